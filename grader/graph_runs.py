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
    stream: int | None = None     # the CUDA stream cuDNN's handle was bound to, read from the backend (None: unknown)
    captured: bool = False        # recorded inside a CUDA-graph capture: it runs at each replay, not here
    stream_attribute: int | None = None   # what the Python handle's ``stream`` attribute said (an answer can assign it)
    method: str = "execute"       # the execute method called ("execute" or "execute_plan_at_index")
    overrides: dict = field(default_factory=dict)   # override_uids/shapes/strides it passed, where it did

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

    def feeding(self, tensor) -> "GraphRuns":
        """The runs whose work ends in ``tensor``, in order: its last writer and, for each buffer a run of that chain
        reads, the last earlier run that wrote it (a graph reading another graph's output). Empty if no run wrote it.
        What ``rerun`` executes again to grade ``tensor`` by the graphs alone."""
        writer = self.writer(tensor)
        if writer is None:
            return GraphRuns()
        position = {id(run): i for i, run in enumerate(self)}
        chain, todo = [writer], [writer]
        while todo:
            run = todo.pop()
            outputs = run.output_uids()
            for uid, buffer in run.buffers.items():
                if outputs is not None and uid in outputs:
                    continue
                earlier = GraphRuns(self[:position[id(run)]]).writer(buffer)
                if earlier is not None and not any(earlier is c for c in chain):
                    chain.append(earlier)
                    todo.append(earlier)
        return GraphRuns(sorted(chain, key=lambda run: position[id(run)]))

    def streams(self) -> list:
        """The streams the recorded executes ran on (cuDNN's backend's word), in order of first use."""
        return list(dict.fromkeys(run.stream for run in self if not run.captured))

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


def _streams_of(graph, handle) -> tuple[int | None, int | None]:
    """``(stream, attribute)``: the stream the execute's handle (the one passed, else the graph's own) is bound to in
    cuDNN's backend, and the one its Python attribute names; None where unknown. A stand-in handle (no backend) has
    only its attribute, which then counts as both."""
    own = handle if handle is not None else internals.graph_handle(graph)
    attribute = internals.stream_attribute(own)
    if own is not None and not hasattr(own, "backend_handle"):
        return attribute, attribute
    try:
        return internals.execute_stream(graph, handle), attribute
    except Exception:   # a handle the backend does not know: the execute itself has raised already
        return None, attribute


def _capturing() -> bool:
    """Whether torch's current stream is capturing a CUDA graph (False without CUDA)."""
    try:
        return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()
    except Exception:
        return False


def _record_execute(runs: GraphRuns, depth: list, original, name: str, *, detail: bool, snapshot: bool, hooks=None,
                    order=None):
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
            stream, attribute = _streams_of(self, given.get("handle")) if detail else (None, None)
            run = GraphRun(self, _plan_number(index), stream=stream, stream_attribute=attribute, method=name,
                           overrides={k: given[k] for k in internals.OVERRIDES if given.get(k) is not None})
            run.captured = hooks.capturing() if hooks is not None else _capturing()
            if detail:
                run.buffers = bound_buffers(self, tensor_dict, given.get("tensor_uids"))
                run.values = {uid: v for uid, b in run.buffers.items() if (v := _host_scalar(b)) is not None}
                if snapshot and not run.captured:   # nothing ran yet inside a capture (and it may not synchronize)
                    _snapshot(run)
            runs.append(run)
            if hooks is not None:
                hooks.executed(run)
            if order is not None:
                order.executed(run)
            return result
        finally:
            if hooks is not None:
                hooks.after()

    return execute


@contextmanager
def recording(*, detail: bool = True, snapshot: bool = False, classes: tuple | None = None, hooks=None,
              runs: GraphRuns | None = None, order: "StreamOrder | None" = None) -> Iterator[GraphRuns]:
    """Record every execute of a graph inside the block (``GraphRuns``). ``detail=False`` keeps only the graph and
    the plan index (cheap enough while an answer times plans); ``snapshot=True`` copies each output after its execute
    (a synchronize per execute) so that ``require_written`` can tell one overwritten later. ``classes``: what to watch
    (default ``cudnn.pygraph``); ``hooks`` (``provenance.tracing``'s) hear of each execute; ``runs``: the list to
    record into; ``order`` (a ``StreamOrder``) holds each execute that ran off the caller's stream."""
    runs, depth = (GraphRuns() if runs is None else runs), [0]
    classes = classes if classes is not None else internals.graph_classes()
    wraps = [(cls, name, lambda original, name=name: _record_execute(
        runs, depth, original, name, detail=detail, snapshot=snapshot, hooks=hooks, order=order))
        for cls in classes
        for name in internals.EXECUTES]
    with internals.wrapped(wraps) as count:
        if not count:   # a frontend that moved its execute methods: recording nothing would fail every right answer
            raise RuntimeError(f"graph_runs.recording found no execute method to watch on {classes}")
        yield runs



# ---------------------------------------------------------------- streams: which one, and ordered with the caller
def stream_slip(run: GraphRun, want: int, *, current: int | None = None, want_name: str = "`stream`",
                first: bool = False) -> str | None:
    """Why ``run`` did not launch on stream ``want`` (cuDNN's backend's word), in the learner's terms, or None where it
    did. ``current``: torch's current stream, to name the usual slip; ``first``: say it was an earlier launch."""
    if run.stream is None or run.stream == want:
        return None
    which = "an earlier launch of your graph" if first else "the graph"
    if getattr(run, "stream_attribute", None) == want:
        return (f"{which} ran on stream {run.stream}, not on {want_name}: the handle's `stream` attribute says "
                f"{want_name}, but cuDNN's handle was never bound to it — call cudnn.set_stream(handle, "
                f"stream.cuda_stream) (or H.get_handle() inside `with torch.cuda.stream(stream):`); assigning the "
                f"attribute tells cuDNN nothing")
    if current is not None and run.stream == current:
        return (f"{which} ran on the current stream, not on {want_name}: bind the handle to {want_name} before "
                f"execute (H.get_handle() inside `with torch.cuda.stream(stream):`, or cudnn.set_stream)")
    return (f"{which} ran on stream {run.stream}, not on {want_name}: work launched there is not ordered after what "
            f"is queued on {want_name} — bind the handle to {want_name} before execute")


def require_on_stream(runs, want: int, *, current: int | None = None, want_name: str = "`stream`") -> None:
    """``Wrong`` in one line unless every execute in ``runs`` (not captured) launched on ``want``: the first that did
    not names the slip (an attribute assigned instead of ``cudnn.set_stream``, the current stream, another)."""
    launched = [run for run in runs if not getattr(run, "captured", False)]
    for i, run in enumerate(launched):
        slip = stream_slip(run, want, current=current, want_name=want_name,
                           first=i < len(launched) - 1 and launched[-1].stream == want)
        if slip:
            raise Wrong(slip)


def _torch_stream(handle: int):
    """The torch stream for a raw stream handle (0 and 1, the legacy default stream, as torch's default)."""
    if handle in (0, 1) or handle == torch.cuda.default_stream().cuda_stream:
        return torch.cuda.default_stream()
    return torch.cuda.ExternalStream(handle)


def settle(stream=None) -> None:
    """Wait on the host for the work queued on ``stream`` (a torch stream or raw handle; default torch's current)
    and nothing else: an event recorded there, synchronized. What a checker does instead of
    ``torch.cuda.synchronize()``, which would also wait for a side stream the caller never waits for."""
    if stream is None:
        stream = torch.cuda.current_stream()
    elif isinstance(stream, int):
        stream = _torch_stream(stream)
    done = torch.cuda.Event()
    done.record(stream)
    done.synchronize()


HOLD_CYCLES = 60_000_000   # about 30 ms at 2 GHz: how long a side stream is held after each of its launches


class StreamOrder:
    """Whether the caller's stream waits for every launch an answer made elsewhere. Passed to ``recording`` (or
    ``provenance.tracing``) as ``order=``: right after each execute on a stream other than ``caller`` (default
    torch's current stream when made), that stream is held behind a GPU wait of ``cycles``, then an event is
    recorded. ``require_ordered`` then waits on the host for the caller's stream only: a held launch whose event is
    still pending when the caller's stream has drained was never ordered before it (its result would be read too
    early). Conclusive when the answer returns within the hold (about 30 ms of host time after its last launch),
    which a launch-and-return answer does; the device is synchronized afterwards."""

    def __init__(self, caller: int | None = None, cycles: int = HOLD_CYCLES):
        self.caller = torch.cuda.current_stream().cuda_stream if caller is None else int(caller)
        self.cycles, self.held = cycles, []

    def executed(self, run: GraphRun) -> None:
        if run.captured or run.stream is None or run.stream == self.caller:
            return
        side = _torch_stream(run.stream)
        if side.cuda_stream == _torch_stream(self.caller).cuda_stream:
            return
        with torch.cuda.stream(side):
            internals.gpu_sleep(self.cycles)
            released = torch.cuda.Event()
            released.record(side)
        self.held.append((run, released))

    def unordered(self) -> list:
        """The held runs the caller's stream did not wait for (waits for the caller's stream, then the device)."""
        if not self.held:
            return []
        settle(self.caller)
        late = [run for run, released in self.held if not released.query()]
        torch.cuda.synchronize()   # the holds end before anything else runs
        return late

    def require_ordered(self, what: str = "the output", how: str = "") -> None:
        """``Wrong`` in one line if a launch on another stream was left unordered with the caller's stream."""
        late = self.unordered()
        if late:
            tail = f" — {how}" if how else ""
            raise Wrong(f"your graph ran on a side stream (stream {late[0].stream}) that the caller's stream never "
                        f"waits for: the caller would read {what} before it is written — make the current stream "
                        f"wait for it (torch.cuda.current_stream().wait_stream(side)) before returning{tail}")


# ---------------------------------------------------------------- grading the graph: run it again on fresh inputs
def _same_memory(a, b) -> bool:
    pa, pb = _pointer(a), _pointer(b)
    return pa is not None and pa == pb


def permuted(old: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """The default new values: ``old``'s values in a random order, in a new buffer with ``old``'s shape, strides,
    dtype and device (the same distribution: a ReLU's output stays non-negative; a one-element tensor keeps its
    value — give ``rerun`` a ``fresh`` for scales)."""
    flat = old.detach().reshape(-1)
    order = torch.randperm(flat.numel(), generator=generator, device="cpu").to(flat.device)
    new = torch.empty_strided(old.size(), old.stride(), dtype=old.dtype, device=old.device)
    new.copy_(flat[order].reshape(old.shape))
    return new


def _blank_like(old: torch.Tensor) -> torch.Tensor:
    """A new buffer like ``old`` (shape, strides, dtype, device), NaN where the dtype has one, else zeros."""
    new = torch.empty_strided(old.size(), old.stride(), dtype=old.dtype, device=old.device)
    return new.fill_(float("nan")) if new.is_floating_point() else new.zero_()


def _clone(old: torch.Tensor) -> torch.Tensor:
    new = torch.empty_strided(old.size(), old.stride(), dtype=old.dtype, device=old.device)
    return new.copy_(old)


@dataclass
class Rerun:
    """What ``rerun`` did: the new buffers of the named inputs and outputs (name -> tensor), the UIDs of the inputs
    the checker did not name (the answer's own tensors, bound again with the same values at new addresses), and the
    new buffers each run bound (uid -> buffer), and the named inputs no run bound."""

    inputs: dict
    outputs: dict
    foreign: list
    packs: list
    unread: list = field(default_factory=list)


def _graph_method(graph, name: str):
    """``graph``'s method ``name`` as its frontend class defines it (an attribute the answer set on the instance, or
    a subclass's override, is not called)."""
    for cls in internals.graph_classes():
        if isinstance(graph, cls):
            return getattr(cls, name).__get__(graph)
    return getattr(type(graph), name).__get__(graph)


def _workspace(run: GraphRun, device):
    """A new workspace for ``run``'s plan (None for a stand-in graph, or on the CPU)."""
    if device is None or device.type != "cuda":
        return None
    try:
        if run.method == "execute_plan_at_index" and run.plan is not None:
            size = _graph_method(run.graph, "get_workspace_size_plan_at_index")(run.plan)
        else:
            size = _graph_method(run.graph, "get_workspace_size")()
    except AttributeError:
        return None
    return torch.empty(max(int(size), 1), dtype=torch.uint8, device=device)


def rerun(runs, inputs: dict, outputs: dict, *, fresh=None, blank=None, handle=None, generator=None) -> Rerun:
    """Execute the graphs of ``runs`` again, in order (a writer, or ``GraphRuns.feeding``'s chain), with the
    answer's Python code out of the loop: each UID a run bound is bound to a new buffer —
    - one of the checker's ``inputs`` (name -> the tensor the answer was given): ``fresh(name, old)`` (default
      ``permuted``: new values, new address);
    - one of its ``outputs`` (name -> tensor) or any other output of the graph: ``blank(name, old)`` (name None for
      an output the checker did not name; default a NaN-filled buffer like it — an AMAX that engines combine with
      an atomic max wants zeros);
    - a buffer an earlier run of the chain wrote: the new one that run wrote;
    - anything else (the answer's own tensors: a constant, a copy taken at build time, a result computed outside
      the graph): a clone, same values at a new address (listed in ``Rerun.foreign``).
    Each graph runs through its frontend class's own method (``execute`` or ``execute_plan_at_index`` as recorded,
    same plan, same overrides) on ``handle`` (default, for GPU buffers, the course's handle bound in the backend to
    the current stream). Returns the ``Rerun``; the outputs are ready on the current stream."""
    generator = generator if generator is not None else torch.Generator().manual_seed(50)   # a CPU generator
    fresh = fresh or (lambda name, old: permuted(old, generator))
    blank = blank or (lambda name, old: _blank_like(old))
    new_inputs, new_outputs, foreign, packs, written = {}, {}, [], [], []   # written: (old buffer, new buffer)
    device = None
    for run in runs:
        if run.captured:
            raise ValueError("rerun: a captured execute runs at replay; re-run its graph from a direct execute")
        declared = run.output_uids()
        pack = {}
        for uid, old in run.buffers.items():
            is_output = (uid in declared) if declared is not None else any(_same_memory(old, t) for t in outputs.values())
            named_in = next((n for n, t in inputs.items() if _same_memory(old, t)), None)
            named_out = next((n for n, t in outputs.items() if _same_memory(old, t)), None)
            earlier = next((new for before, new in reversed(written) if _same_memory(old, before)), None)
            if not isinstance(old, torch.Tensor) and named_in is None and named_out is None and earlier is None:
                raise Wrong(f"the checker could not run your graph again: UID {uid} is bound to a raw pointer, not a "
                            f"tensor — bind torch tensors in the variant pack")
            if is_output:
                new = blank(named_out, outputs[named_out] if named_out else old)
                if named_out:
                    new_outputs[named_out] = new
                written.append((old, new))
            elif earlier is not None:
                new = earlier
            elif named_in is not None:
                new = new_inputs.get(named_in)
                if new is None:
                    new = new_inputs[named_in] = fresh(named_in, inputs[named_in])
            elif named_out is not None:      # an output read as an input (in place): it holds the answer's result
                new = new_outputs.get(named_out) if named_out in new_outputs else _clone(outputs[named_out])
                foreign.append(uid)
            else:
                new = _clone(old)
                foreign.append(uid)
            pack[uid] = new
            if isinstance(new, torch.Tensor) and new.is_cuda:
                device = new.device
        packs.append(pack)
    unread = [name for name in inputs if name not in new_inputs]
    for name in unread:   # the reference takes them all; the graph never sees these
        new_inputs[name] = fresh(name, inputs[name])
    if handle is None and device is not None:
        handle = course_handle()
    for run, pack in zip(runs, packs):
        workspace = _workspace(run, device)
        if run.method == "execute_plan_at_index":
            _graph_method(run.graph, "execute_plan_at_index")(pack, workspace, run.plan or 0, handle)
        else:
            _graph_method(run.graph, "execute")(pack, workspace, handle, **run.overrides)
    return Rerun({name: new_inputs[name] for name in inputs}, new_outputs, foreign, packs, unread)


def course_handle():
    """The course's handle bound to torch's current stream, in cuDNN's backend too (an answer may have assigned its
    ``stream`` attribute, which ``cudnn.set_stream`` then takes at its word)."""
    from helpers.handles import get_handle

    handle = get_handle()
    current = torch.cuda.current_stream().cuda_stream
    if internals.handle_stream(handle) != current:
        internals.bind_stream(handle, current)
    return handle


def regrade(runs, inputs: dict, outputs: dict, reference, *, fresh=None, blank=None, generator=None, tol=None,
            how: str = "") -> dict:
    """``rerun`` ``runs`` on fresh inputs, then compare each named output with ``reference(**new inputs)`` (name ->
    expected; the checker's function, called only now, after the answer returned). Returns ``{name: rel err}``, or
    ``Wrong`` in one line: the graph, run again by the checker, leaves an output unwritten or does not compute it
    (its work done outside the graph, a copy of an input read, part of the work missing)."""
    from . import agrees

    tail = f" — {how}" if how else ""
    done = rerun(runs, inputs, outputs, fresh=fresh, blank=blank, generator=generator)
    expected = reference(**done.inputs)
    changed = ", ".join(done.inputs) or "its inputs"
    errors = {}
    for name, out in done.outputs.items():
        if name not in expected:
            continue
        result = agrees(out, expected[name], tol)
        if result.ok:
            errors[name] = result.rel_err
            continue
        if result.unwritten == out.numel():
            raise Wrong(f"your graph, run again by the checker on new {changed}, did not write {name}: bind {name} "
                        f"as the graph's output{tail}")
        why = (f": it reads {len(done.foreign)} tensor{'s' if len(done.foreign) > 1 else ''} you made yourself "
               f"(UID {', '.join(map(str, done.foreign))}), which did not change with the inputs — a result computed "
               f"outside the graph, or a copy of an input, does not count" if done.foreign else
               f": it does not read {' or '.join(done.unread)}" if done.unread else
               ": your graph does only part of the work, or its result was changed after it ran")
        raise Wrong(f"your graph, run again by the checker on new {changed} (new buffers, bound by UID, your code not "
                    f"called), does not compute {name}: rel err {result.rel_err:.2g}{why}{tail}")
    return errors
