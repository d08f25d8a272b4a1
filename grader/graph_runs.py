"""Which cuDNN graphs an answer executed while it was graded, and with which buffers.

A checker that compares an answer's output with PyTorch cannot tell who wrote it: the answer's cuDNN graph, or
torch next to it. For a ``with`` block, ``recording`` wraps ``pygraph.execute`` and ``execute_plan_at_index`` so
that every execute is a ``GraphRun``: the graph, the plan index, the buffers its variant pack bound (by UID, the
graph's own bindings included), the host scalars in it, and (``snapshot=True``) a copy of each output as the graph
left it::

    with recording(snapshot=True) as runs:
        graph = answer(q, k, v, o, window)
    runs.require_written(o, "o", by=graph)     # Wrong unless that graph's execute wrote o, and nothing after it

Only the frontend's Python graph is watched: torch's own cuDNN calls (its SDPA, convolutions) never appear here.
"""
from __future__ import annotations

import operator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

import torch

from . import Wrong, internals


def _pointer(obj) -> int | None:
    """The device (or host) address a variant-pack entry binds: a tensor's ``data_ptr()``, an int as is."""
    if type(obj) is int:
        return obj
    data_ptr = getattr(obj, "data_ptr", None)
    if callable(data_ptr):
        try:
            return int(data_ptr())
        except Exception:  # not addressable (meta tensors, ...)
            return None
    return None


def _host_scalar(obj) -> float | None:
    """The value of a one-element CPU tensor (how a pass-by-value scalar travels), else None."""
    if isinstance(obj, torch.Tensor) and obj.device.type == "cpu" and obj.numel() == 1:
        return float(obj.reshape(()).item())
    return None


def _uid_of_key(graph, key) -> int | None:
    """The UID a variant-pack key names: an int, a graph tensor (``.uid``), a tensor name, a lowered tensor."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    uid = getattr(key, "uid", None)
    if isinstance(uid, int):
        return uid
    try:
        if isinstance(key, str):
            return int(graph.find_tensor(key).uid)
        return int(key.get_uid())
    except Exception:  # a key this graph does not know: the execute itself will say so
        return None


def bound_buffers(graph, tensor_dict, tensor_uids=None) -> dict:
    """``{uid: buffer}`` one execute binds: the graph's auto-bound inputs, then the caller's pack (which wins),
    keyed as the frontend keys it (by UID, graph tensor or name; or ``tensor_uids`` for a list of buffers)."""
    bound = internals.bound_inputs(graph)
    if tensor_uids is not None:
        bound.update(zip(tensor_uids, tensor_dict))
        return bound
    if not isinstance(tensor_dict, dict):  # not a pack the frontend takes without tensor_uids: it raises, not us
        return bound
    for key, buffer in tensor_dict.items():
        uid = _uid_of_key(graph, key)
        if uid is not None:
            bound[uid] = buffer
    return bound


@dataclass(eq=False)
class GraphRun:
    """One execute of a graph: its plan index (None where unknown), the buffers it bound by UID, the host scalars
    among them, and (with ``snapshot``) each output buffer's contents right after the execute."""

    graph: Any
    plan: int | None = None
    buffers: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    snapshots: dict = field(default_factory=dict)
    stream: int | None = None     # the CUDA stream the handle bound (None where unknown)
    captured: bool = False        # recorded inside a CUDA-graph capture: it runs at each replay, not here

    def output_uids(self) -> set | None:
        """UIDs of the graph's outputs, or None where the graph does not say (a deserialized graph has no ops)."""
        try:
            outputs = self.graph.get_outputs()
        except Exception:
            return None
        uids = {int(t.uid) for t in outputs}
        return uids or None

    def uid_of(self, tensor) -> int | None:
        """The UID under which this execute bound ``tensor``'s memory as an output (as any tensor, where the graph
        does not say which are outputs), or None."""
        address = _pointer(tensor)
        if address is None:
            return None
        outputs = self.output_uids()
        for uid, buffer in self.buffers.items():
            if _pointer(buffer) == address and (outputs is None or uid in outputs):
                return uid
        return None

    def reads(self, tensor) -> bool:
        """Whether this execute bound ``tensor``'s memory at all (as an input or an output)."""
        address = _pointer(tensor)
        return address is not None and any(_pointer(b) == address for b in self.buffers.values())

    def scalars(self) -> dict:
        """``{uid: value}`` of the graph's pass-by-value tensors that this execute passed host values for."""
        out = {}
        for uid, value in self.values.items():
            try:
                tensor = self.graph.find_tensor(uid)
            except Exception:
                tensor = None
            if tensor is not None and getattr(tensor, "is_pass_by_value", False):
                out[uid] = value
        return out

    def node_kinds(self) -> list[str]:
        return node_kinds(self.graph)


def node_kinds(graph) -> list[str]:
    """A graph's node types by name (``"SDPA"``, ``"MATMUL"``, ...); empty for a deserialized graph."""
    return [getattr(getattr(n, "node_type", None), "name", "?") for n in (getattr(graph, "nodes", None) or [])]


def distinct(objects) -> list:
    """``objects`` without repeats (by identity: graphs do not compare by value), in order."""
    seen: list = []
    for obj in objects:
        if not any(obj is s for s in seen):
            seen.append(obj)
    return seen


def _same_bytes(a, b) -> bool:
    """Whether two tensors hold the same bits (NaN included): False for another shape or dtype."""
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return False
    return torch.equal(a.detach().contiguous().reshape(-1).view(torch.uint8),
                       b.detach().contiguous().reshape(-1).view(torch.uint8))


class GraphRuns(list):
    """The ``GraphRun`` of every execute inside a ``recording`` block, in order."""

    def since(self, mark: int) -> "GraphRuns":
        """The runs recorded after the first ``mark`` (take ``len(runs)`` before a call, ``since`` after it)."""
        return GraphRuns(self[mark:])

    def graphs(self) -> list:
        """The distinct graphs executed, in the order each first ran."""
        return distinct(run.graph for run in self)

    def of_graph(self, graph) -> "GraphRuns":
        return GraphRuns(run for run in self if run.graph is graph)

    def plans_of(self, graph) -> set:
        """The plan indices executed on ``graph``."""
        return {run.plan for run in self.of_graph(graph) if run.plan is not None}

    def writer(self, tensor) -> GraphRun | None:
        """The last run (not captured) that had ``tensor``'s memory as an output in its variant pack, or None."""
        return next((run for run in reversed(self) if not run.captured and run.uid_of(tensor) is not None), None)

    def require_written(self, tensor, name: str, *, by=None, how: str = "") -> GraphRun:
        """The run that wrote ``tensor`` (named ``name`` in the messages). ``Wrong`` in one line unless a recorded
        execute (of graph ``by``, where given) had it as an output, and — where that run kept a snapshot —
        nothing changed it afterwards. ``how`` ends a message with what to do."""
        tail = f" — {how}" if how else ""
        writer = self.writer(tensor)
        if writer is None:
            if by is not None and not self.of_graph(by):
                raise Wrong(f"{name} was not written by a cuDNN graph: the graph you returned never ran{tail}")
            raise Wrong(f"{name} was not written by a cuDNN graph: no execute had {name} as an output in its "
                        f"variant pack{tail}")
        if by is not None and writer.graph is not by:
            raise Wrong(f"{name} was written by another cuDNN graph, not the one you returned{tail}")
        uid = writer.uid_of(tensor)
        snapshot = writer.snapshots.get(uid)   # compared with the buffer the execute bound: a view of the same shape
        if snapshot is not None and not _same_bytes(snapshot, writer.buffers[uid]):
            raise Wrong(f"{name} changed after your cuDNN graph wrote it: something else wrote {name} last — "
                        "let the graph's output stand")
        return writer


def _snapshot(run: GraphRun) -> None:
    """Copy each output buffer of ``run`` (every torch buffer, where the graph does not say) once it is written."""
    outputs = run.output_uids()
    chosen = {uid: b for uid, b in run.buffers.items()
              if isinstance(b, torch.Tensor) and (outputs is None or uid in outputs)}
    if any(b.is_cuda for b in chosen.values()):
        torch.cuda.synchronize()
    run.snapshots = {uid: b.detach().clone() for uid, b in chosen.items()}


def _plan_number(index) -> int | None:
    """A plan index as an int (numpy integers included), or None."""
    if index is None or isinstance(index, bool):
        return None
    try:
        return operator.index(index)
    except TypeError:
        return None


def _stream_of(graph, handle) -> int | None:
    """The stream a cuDNN handle (the one passed, else the graph's own) is bound to, or None where unknown."""
    handle = handle if handle is not None else internals.graph_handle(graph)
    stream = getattr(handle, "stream", None)
    return stream if isinstance(stream, int) else None


def _capturing() -> bool:
    """Whether torch's current stream is capturing a CUDA graph (False without CUDA)."""
    try:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def _record_execute(runs: GraphRuns, depth: list, original, name: str, *, detail: bool, snapshot: bool, hooks=None):
    def execute(self, tensor_dict, *args, **kwargs):
        if depth[0]:  # called by a watched method (an execute_plan_at_index that calls execute): one run, the outer
            return original(self, tensor_dict, *args, **kwargs)
        depth[0] += 1
        if hooks is not None:
            hooks.before()   # what the execute (and the record below) runs is the graph's, not the answer's
        try:
            try:
                result = original(self, tensor_dict, *args, **kwargs)
            finally:
                depth[0] -= 1
            given = internals.execute_arguments(name, args, kwargs)
            index = given.get("index", 0) if "index" in internals.EXECUTES[name] else internals.selected_plan(self)
            run = GraphRun(self, _plan_number(index), stream=_stream_of(self, given.get("handle")))
            run.captured = hooks.capturing() if hooks is not None else _capturing()
            if detail:
                run.buffers = bound_buffers(self, tensor_dict, given.get("tensor_uids"))
                run.values = {uid: v for uid, b in run.buffers.items() if (v := _host_scalar(b)) is not None}
                if snapshot and not run.captured:   # nothing ran yet inside a capture (and it may not synchronize)
                    _snapshot(run)
            runs.append(run)
            if hooks is not None:
                hooks.executed(run)
            return result
        finally:
            if hooks is not None:
                hooks.after()

    return execute


@contextmanager
def recording(*, detail: bool = True, snapshot: bool = False, classes: tuple | None = None, hooks=None,
              runs: GraphRuns | None = None) -> Iterator[GraphRuns]:
    """Record every execute of a graph inside the block (``GraphRuns``). ``detail=False`` keeps only the graph and
    the plan index (cheap enough while an answer times plans); ``snapshot=True`` copies each output after its execute
    (a synchronize per execute) so that ``require_written`` can tell one overwritten later. ``classes``: what to watch
    (default ``cudnn.pygraph``); ``hooks`` (``provenance.tracing``'s) hear of each execute; ``runs``: the list to
    record into."""
    runs, depth = (GraphRuns() if runs is None else runs), [0]
    classes = classes if classes is not None else internals.graph_classes()
    wraps = [(cls, name, lambda original, name=name: _record_execute(
        runs, depth, original, name, detail=detail, snapshot=snapshot, hooks=hooks)) for cls in classes
        for name in internals.EXECUTES]
    with internals.wrapped(wraps) as count:
        if not count:   # a frontend that moved its execute methods: recording nothing would fail every right answer
            raise RuntimeError(f"graph_runs.recording found no execute method to watch on {classes}")
        yield runs
