"""Plumbing around a cuDNN graph: named tensors with explicit UIDs, a timed five-step build, and the
workspace. The handle a graph runs on is ``helpers/handles.py``'s."""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterable

import torch

from .libcudnn import load_cudnn
from .timing.host import StepTimer

# ---------------------------------------------------------------- the build
DEFAULT_HEURISTICS = ("A", "FALLBACK")   # the heuristic modes every build asks unless told otherwise


def heuristic_modes(names=DEFAULT_HEURISTICS) -> list:
    """``cudnn.heur_mode`` members for mode names (``"A"``, ``"B"``, ``"FALLBACK"``); members pass through."""
    cudnn = load_cudnn(need_gpu=False)
    return [getattr(cudnn.heur_mode, m) if isinstance(m, str) else m for m in names]


def build(graph, heuristics=None, policy=None, *, restrict=None, notes=None, pick=None, pin=None) -> StepTimer:
    """The frontend's own ``graph.build(heuristics)`` — validate → build_operation_graph → create_execution_plans
    → check_support → build_plans — with what it lacks: each step timed (the ``StepTimer`` it returns), and four
    choices the course makes in one place. ``timer.plan`` is the selected plan's index (``None`` when
    ``build_plans(policy)`` chose). Notebooks 01/02 spell the steps out; later notebooks call this, or
    ``graph.build([...])`` where nothing below is needed.

    - ``heuristics``: mode names or ``cudnn.heur_mode`` members (default ``DEFAULT_HEURISTICS``, A then FALLBACK);
      ``policy``: ``build_plans``' policy (``cudnn.build_plan_policy.ALL`` builds every candidate);
    - ``restrict(graph)``: a filter set after ``build_operation_graph`` and before the candidates are made
      (``deselect_workspace_greater_than``, ``deselect_engines``, note filters: notebook 03). Set it there: on
      frontend 1.32 a workspace limit set before ``validate()`` was not applied on an H200;
    - ``notes``: keep only candidates with these behaviour notes (e.g. ``SUPPORTS_CUDA_GRAPH_NATIVE_API``);
    - naming: ``pick`` builds one candidate with ``build_plan_at_index`` (which builds *and* selects it) instead
      of ``check_support`` + ``build_plans``: ``"first"`` the first in ranked order that builds (a refusal moves
      on; if none builds, the last refusal is raised), an ``int`` that index, a ``str`` the plan of that name
      (``LookupError`` when it is not a candidate);
    - pinning: ``pin=(engine_id, knobs)`` one configuration (``create_execution_plan``) instead of the heuristics'
      list; built like ``pick="first"``.
    """
    cudnn = load_cudnn(need_gpu=False)
    policy = policy or cudnn.build_plan_policy.HEURISTICS_CHOICE
    timer = StepTimer()
    timer.plan = None
    with timer("validate"):
        graph.validate()
    with timer("build_operation_graph"):
        graph.build_operation_graph()
    if restrict is not None:
        restrict(graph)
    if pin is not None:
        with timer("create_execution_plan"):
            graph.create_execution_plan(*pin)
        candidates = [graph.get_execution_plan_count() - 1]
        pick = "first"
    else:
        with timer("create_execution_plans"):
            graph.create_execution_plans(heuristic_modes(heuristics or DEFAULT_HEURISTICS))
        candidates = range(graph.get_execution_plan_count())
    if notes:
        with timer("select_behavior_notes"):
            graph.select_behavior_notes(list(notes))
    if pick is None:
        with timer("check_support"):
            graph.check_support()
        with timer("build_plans"):
            graph.build_plans(policy)
        return timer
    with timer("build_plan_at_index"):
        timer.plan = _build_one(graph, candidates, pick)
    return timer


def _build_one(graph, candidates, pick) -> int:
    if isinstance(pick, str) and pick != "first":
        names = [graph.get_plan_name_at_index(i) for i in candidates]
        if pick not in names:
            raise LookupError(f"plan {pick!r} is not among this graph's {len(names)} candidates")
        pick = list(candidates)[names.index(pick)]
    if isinstance(pick, int) and not isinstance(pick, bool):
        graph.build_plan_at_index(pick)
        return pick
    if pick != "first":
        raise ValueError(f"pick must be None, 'first', a plan index or a plan name, got {pick!r}")
    failure: Exception = RuntimeError("the heuristics returned no candidate plan")
    for index in candidates:
        try:
            graph.build_plan_at_index(index)       # compiles the kernel (or finds it in a kernel cache)
        except Exception as exc:                   # this configuration cannot run the graph: try the next
            failure = exc
            continue
        return index
    raise failure


def workspace_for(graph, plan: int | Iterable[int] | None = None) -> torch.Tensor:
    """A uint8 device buffer for ``graph``'s workspace (at least 1 byte).

    ``plan=None``: the selected plan's size. ``plan=i``: plan *i*'s (``get_workspace_size_plan_at_index``),
    for ``execute_plan_at_index``. ``plan=[i, j, ...]``: the largest of those plans', so one buffer serves all.
    """
    if plan is None:
        size = int(graph.get_workspace_size())
    else:
        indices = [plan] if isinstance(plan, int) else [int(i) for i in plan]
        size = max([int(graph.get_workspace_size_plan_at_index(i)) for i in indices] + [0])
    return torch.empty(max(size, 1), dtype=torch.uint8, device=f"cuda:{torch.cuda.current_device()}")


# ---------------------------------------------------------------- tensors
def describe_tensors(tensors: dict, uids: dict | None = None) -> str:
    """One line per tensor — ``[uid N: ]name  shape (...) strides (...) dtype`` — names padded to one width and
    the dtype last, so the lines of a bf16 run and an fp16 run differ only in the dtype's name (a padded dtype
    column would shift with it and make stored outputs depend on the GPU)."""
    if not isinstance(tensors, dict) or not all(isinstance(t, torch.Tensor) for t in tensors.values()):
        raise TypeError("tensors must be a dict {name: torch.Tensor}")
    width = max((len(str(name)) for name in tensors), default=0)
    lines = []
    for name, t in tensors.items():
        prefix = f"uid {uids[name]}: " if uids is not None else ""
        lines.append(f"{prefix}{str(name):<{width}}  shape {tuple(t.shape)} strides {tuple(t.stride())} {t.dtype}")
    return "\n".join(lines)


class GraphIO:
    """Names, explicit UIDs and buffers for a graph's inputs and outputs.

    A thin layer over ``graph.tensor_like``: it rejects a CPU tensor, a wrong
    dtype or a wrong memory layout with one line naming the argument, gives every
    tensor a stable UID (so a serialized plan can be fed by UID later), and
    builds the variant pack ``{uid: buffer}``.
    """

    def __init__(self, graph, *, dtype: torch.dtype | None = None, first_uid: int = 1):
        self.graph = graph
        self.dtype = dtype
        self._next_uid = int(first_uid)
        self.uids: "OrderedDict[str, int]" = OrderedDict()
        self.buffers: dict = {}
        self._scalars: dict = {}

    def _uid(self, name: str) -> int:
        if not name or not isinstance(name, str):
            raise ValueError(f"tensor name must be a non-empty string, got {name!r}")
        if name in self.uids:
            raise ValueError(f"tensor name {name!r} is used twice in this graph")
        uid = self._next_uid
        self._next_uid += 1
        self.uids[name] = uid
        return uid

    @staticmethod
    def _validate(name: str, t, dtype, layout) -> None:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
        if not t.is_cuda and not t.is_meta:  # meta tensors: construction only (unit tests without a GPU)
            raise ValueError(f"{name}: tensor is on {t.device}; cuDNN needs it on a CUDA device (use .cuda())")
        if dtype is not None and t.dtype != dtype:
            raise TypeError(f"{name}: dtype is {t.dtype}, this graph expects {dtype}")
        if layout is not None and not t.is_contiguous(memory_format=layout):
            raise ValueError(f"{name}: tensor is not in {layout} layout (use .to(memory_format={layout}))")
        if t.data_ptr() % 16:
            raise ValueError(f"{name}: data pointer is not 16-byte aligned (a sliced view?); pass a fresh tensor")

    def input(self, name: str, t: torch.Tensor, *, dtype: torch.dtype | None = None, layout=None):
        """A graph input shaped, strided and typed like ``t``; ``t`` is its buffer."""
        self._validate(name, t, dtype or self.dtype, layout)
        g = self.graph.tensor_like(t, name=name)
        g.set_uid(self._uid(name))
        self.buffers[name] = t
        return g

    def output(self, name: str, graph_tensor, t: torch.Tensor, *, dtype: torch.dtype | None = None):
        """Mark ``graph_tensor`` as an output written into buffer ``t``.

        The graph tensor takes ``t``'s dtype, shape and strides (so a channels-last or
        transposed buffer is written in its own layout, and a reduction's output gets the
        buffer's reduced shape). ``check_buffers()`` after ``validate()`` confirms the
        graph agrees.
        """
        self._validate(name, t, dtype, None)
        import cudnn  # already imported: it made self.graph (and needs no libcudnn for a dtype conversion)

        graph_tensor.set_output(True).set_name(name).set_uid(self._uid(name))
        graph_tensor.set_data_type(cudnn.datatypes.torch_to_cudnn_data_type(t.dtype))
        graph_tensor.set_dim(list(t.shape)).set_stride(list(t.stride()))
        self.buffers[name] = t
        return graph_tensor

    def scalar(self, name: str, value: float, dtype: torch.dtype = torch.float32, *, rank: int = 3):
        """A pass-by-value scalar (lives in the variant pack, not on the GPU), shaped ``[1] * rank`` like the graph's
        other tensors (4 for NCHW graphs and norms)."""
        if not isinstance(value, (int, float)):
            raise TypeError(f"{name}: scalar value must be a Python number, got {type(value).__name__}")
        host = torch.full((1,) * rank, value, dtype=dtype)
        g = self.graph.tensor_like(host, name=name)  # a CPU tensor becomes pass-by-value
        g.set_uid(self._uid(name))
        self.buffers[name] = host
        return g

    def check_buffers(self) -> None:
        """After ``validate()``: every bound buffer matches its graph tensor's shape and strides."""
        for name, uid in self.uids.items():
            gt = self.graph.find_tensor(uid)
            buf = self.buffers[name]
            if gt is None or not gt.dim:
                continue
            if tuple(gt.dim) != tuple(buf.shape):
                raise ValueError(f"{name}: graph infers shape {tuple(gt.dim)}, buffer has {tuple(buf.shape)}")
            if gt.stride and tuple(gt.stride) != tuple(buf.stride()):
                raise ValueError(f"{name}: graph infers strides {tuple(gt.stride)}, buffer has {tuple(buf.stride())}")

    def pack(self, **replacements) -> dict:
        """The variant pack ``{uid: buffer}``; ``name=tensor`` swaps in a new buffer."""
        unknown = set(replacements) - set(self.uids)
        if unknown:
            raise KeyError(f"unknown tensor name(s) {sorted(unknown)}; this graph has {list(self.uids)}")
        out = {}
        for name, uid in self.uids.items():
            buf = replacements.get(name, self.buffers[name])
            ref = self.buffers[name]
            if buf is not ref and (buf.shape != ref.shape or buf.dtype != ref.dtype or buf.stride() != ref.stride()):
                raise ValueError(f"{name}: replacement is {tuple(buf.shape)} {buf.dtype}, graph was built for "
                                 f"{tuple(ref.shape)} {ref.dtype} with the same strides")
            out[uid] = buf
        return out
