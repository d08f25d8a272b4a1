"""Who wrote a graded output: a cuDNN graph reading the exercise's own inputs, or torch, the CPU, a copy.

A checker grades inside ``tracing()`` and calls the learner's code inside ``trace.answer()``::

    with tracing(dict(x=x, w=w)) as trace:         # the exercise's inputs, by name
        with trace.answer():
            answer(x, w, y)
        trace.require_graph_output(y, "y", kinds=("CONV_FPROP",), inputs=("x", "w"))

While tracing, one log holds, in order, every execute of a cuDNN graph (``graph_runs`` records them), every torch
operator (a ``TorchDispatchMode`` sees each one, CPU and GPU alike), every CUDA-graph capture and replay, every plan
build and every kernel-cache load. Work recorded inside a capture runs only when the CUDA graph is replayed, so it
enters the log at each replay. From the log follow, per block of memory (a tensor's storage):

- its **last writer**: the event that wrote it last (a graph execute, a replay of one, or a torch operator);
- its **lineage**: every event whose result flowed into it, through any chain of reads and writes.

The rules a checker asks for read these two: the last writer of ``y`` is an execute (or a replay) of a graph with
the exercise's operations; nothing torch *computed* (rather than allocated, filled, copied or viewed) on the
learner's side is in ``y``'s lineage, unless the exercise allows it (05's merge is element-wise torch on purpose);
and the lineage reaches the exercise's own inputs. A cuDNN kernel reached through torch (``torch.cudnn_convolution``,
torch's SDPA) is a torch operator like any other. The checker's own work (poisoning, new input values, references)
is logged too, so lineage stays right across calls, but only the learner's work is judged.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from . import Wrong, internals
from .graph_runs import GraphRun, GraphRuns, recording

# Element-wise work and reductions: what an exercise may let torch do on cuDNN's results (05's merge).
REDUCTIONS = frozenset({"sum", "amax", "amin", "max", "min", "logsumexp", "mean", "_softmax", "softmax",
                        "_log_softmax", "log_softmax", "maximum", "minimum", "where"})
HEAVY = frozenset({"mm", "bmm", "addmm", "baddbmm", "matmul", "convolution", "_convolution", "conv2d", "linear",
                   "addbmm", "einsum", "_softmax", "softmax"})
_THROUGH_TORCH = ("cudnn", "miopen", "_scaled_dot_product", "flash_attention", "efficient_attention", "_scaled_mm",
                  "cublas")


def elementwise_merge(event: "Event") -> bool:
    """An ``allow=`` rule: element-wise arithmetic and reductions (exp, log, add, mul, sum, logsumexp, ...)."""
    return event.pointwise or event.base in REDUCTIONS


def _tensors_in(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors_in(v)]
    return []


@dataclass(eq=False)
class Event:
    """One entry of the log. ``kind``: ``"torch"`` (an operator), ``"graph"`` (an execute of a cuDNN graph) or
    ``"replay"`` (a captured event run again by a CUDA-graph replay; ``of`` is the captured event). ``phase``:
    ``"answer"`` (the learner's code ran it, or captured it) or ``"checker"``."""

    index: int
    kind: str
    name: str
    phase: str
    reads: frozenset = frozenset()
    writes: frozenset = frozenset()
    device: str = "cuda"
    base: str = ""
    compute: bool = False
    pointwise: bool = False
    graph: Any = field(default=None, repr=False)
    run: GraphRun | None = field(default=None, repr=False)
    of: "Event | None" = None
    sources: tuple = ()     # the devices it read from other than its own (a copy in from the CPU: "cpu")
    covering: frozenset = frozenset()   # the written blocks this event overwrote whole

    @property
    def origin(self) -> "Event":
        """The event as it was first recorded: a replay's captured event, else itself."""
        return self.of.origin if self.of is not None else self

    @property
    def is_graph(self) -> bool:
        return self.origin.kind == "graph"

    @property
    def learner(self) -> bool:
        """Whether the learner's code ran (or captured) it."""
        return self.origin.phase == "answer"

    def node_kinds(self) -> list[str]:
        return self.origin.run.node_kinds() if self.origin.run is not None else []

    def describe(self, where: str = "cuda") -> str:
        """How a message names it: ``aten.bmm``; ``aten.convolution (on the CPU)`` for a graded output on ``where``
        (a device type) that is not the CPU."""
        on_cpu = self.origin.device == "cpu" and where != "cpu"
        return self.origin.name + (" (on the CPU)" if on_cpu else "")


class Trace:
    """The log of one grading (see the module's docstring). ``runs``: the ``GraphRuns`` of every execute."""

    def __init__(self, runs: GraphRuns):
        self.runs = runs
        self.events: list[Event] = []
        self.builds: list[tuple[str, Any]] = []       # (what, graph): plan builds and validations, in order
        self.cache_loads: list[tuple[Any, Any]] = []  # (kernel cache, text) of each deserialize
        self.inputs: dict[str, tuple] = {}            # exercise input name -> block key
        self._lineage: dict[tuple, frozenset] = {}
        self._writer: dict[tuple, int] = {}
        self._extent: dict[tuple, int] = {}           # block key -> bytes (to find an int pointer's block)
        self._capturing: list | None = None
        self._captures: dict[int, tuple[Any, list]] = {}
        self.phase = "checker"
        self.paused = 0

    # ------------------------------------------------------------ what the checker says
    def input(self, name: str, tensor) -> None:
        """Name ``tensor`` as the exercise's input ``name`` (its memory, as of now)."""
        key = self._key(tensor)
        if key is None:
            raise ValueError(f"{name}: not a tensor with memory")
        self.inputs[name] = key

    @contextmanager
    def answer(self) -> Iterator["Trace"]:
        """Inside: the learner's code. Whatever it runs (or captures) is judged."""
        previous, self.phase = self.phase, "answer"
        try:
            yield self
        finally:
            self.phase = previous

    # ------------------------------------------------------------ what the log says
    def last_writer(self, tensor) -> Event | None:
        key = self._key(tensor)
        index = self._writer.get(key) if key is not None else None
        return self.events[index] if index is not None else None

    def lineage(self, tensor) -> list[Event]:
        """Every event whose result flowed into ``tensor``'s memory, in log order."""
        key = self._key(tensor)
        return [self.events[i] for i in sorted(self._lineage.get(key, ()))] if key is not None else []

    def computed_by_torch(self, tensor, allow: Callable[[Event], bool] | None = None) -> list[Event]:
        """The learner's torch compute operators in ``tensor``'s lineage that ``allow`` does not permit."""
        return [e for e in self.lineage(tensor) if not e.is_graph and e.origin.compute and e.learner
                and not (allow and allow(e.origin))]

    def reaches(self, tensor, input_name: str) -> bool:
        """Whether the exercise input ``input_name`` flowed into ``tensor`` (some event in its lineage read it)."""
        key = self.inputs[input_name]
        return any(key in e.reads for e in self.lineage(tensor))

    def graph_writes(self, tensor) -> list[Event]:
        """The graph executes and replays of graph executes in ``tensor``'s lineage."""
        return [e for e in self.lineage(tensor) if e.is_graph]

    def plan_builds(self, since: int = 0) -> list:
        """The graphs that built a plan (``build_plans``, ``build_plan_at_index``), after the first ``since`` entries
        of ``builds``."""
        return [g for what, g in self.builds[since:] if what == "build"]

    def validated(self, since: int = 0) -> list:
        """The graphs validated (each build path validates its graph), after the first ``since`` entries of
        ``builds``: once per ``validate()`` call."""
        return [g for what, g in self.builds[since:] if what == "validate"]

    # ------------------------------------------------------------ the rules
    def require_graph_output(self, tensor, name: str, *, kinds: tuple = (), inputs: tuple = (), by=None,
                             replay: bool | None = None, allow: Callable[[Event], bool] | None = None,
                             how: str = "") -> Event:
        """The event that wrote ``tensor`` last, or ``Wrong`` in one line unless: nothing torch computed on the
        learner's side is in its lineage (``allow`` may permit some); it was written last by an execute of a cuDNN
        graph (``by``: that graph; ``replay``: True, only by a CUDA-graph replay of one; False, only directly) whose
        nodes include each of ``kinds`` (a prefix: "MATMUL" takes "MATMUL_FP8"); and each exercise input in
        ``inputs`` flowed into it. ``how`` ends a message with what to do."""
        tail = f" — {how}" if how else ""
        self._forbid_torch(tensor, name, allow)
        writer = self.last_writer(tensor)
        if writer is None or (not writer.is_graph and not writer.learner):
            raise Wrong(f"{name} was not written by a cuDNN graph: nothing your code ran wrote it{tail}")
        if not writer.is_graph:
            raise Wrong(self._not_by_graph(tensor, name, writer) + tail)
        if by is not None and writer.origin.graph is not by:
            raise Wrong(f"{name} was written by another cuDNN graph, not the one you returned{tail}")
        if replay is True and writer.kind != "replay":
            raise Wrong(f"{name} was written by executing the cuDNN graph directly, not by a replay of the CUDA "
                        f"graph{tail}")
        if replay is False and writer.kind == "replay":
            raise Wrong(f"{name} was written by a CUDA-graph replay, not by executing the cuDNN graph{tail}")
        have = writer.node_kinds()
        missing = [k for k in kinds if not any(n.startswith(k) for n in have)]
        if have and missing:
            raise Wrong(f"the cuDNN graph that wrote {name} has no {' or '.join(k.lower() for k in missing)} node "
                        f"(its nodes: {', '.join(have)}): that operation belongs in the graph{tail}")
        unread = [i for i in inputs if not self.reaches(tensor, i)]
        if unread:
            raise Wrong(f"{name} does not depend on the {' and '.join(unread)} you were given: bind "
                        f"{'them' if len(unread) > 1 else 'it'} in the graph's variant pack{tail}")
        return writer

    def require_derived(self, tensor, name: str, *, needs: list, allow: Callable[[Event], bool] | None = None,
                        inputs_through_graphs: tuple = (), how: str = "") -> None:
        """``Wrong`` in one line unless ``tensor`` is built from cuDNN results: nothing torch computed on the
        learner's side is in its lineage beyond what ``allow`` permits; no such operator read one of the inputs in
        ``inputs_through_graphs`` itself (they reach ``tensor`` through cuDNN graphs only); and for every
        ``(test, what)`` in ``needs`` some graph event in its lineage passes ``test`` (``what`` completes "... does
        not use ___")."""
        tail = f" — {how}" if how else ""
        self._forbid_torch(tensor, name, allow)
        keys = {self.inputs[i]: i for i in inputs_through_graphs}
        for event in self.lineage(tensor):
            if event.is_graph or not event.origin.compute or not event.learner:
                continue
            touched = [keys[k] for k in event.reads if k in keys]
            if touched:
                raise Wrong(f"torch computed with the inputs themselves ({event.describe(tensor.device.type)} on "
                            f"{', '.join(sorted(set(touched)))}) on the way to {name}: only the cuDNN graphs may read "
                            f"them{tail}")
        graphs = self.graph_writes(tensor)
        for test, what in needs:
            if not any(test(e) for e in graphs):
                raise Wrong(f"{name} does not use {what}{tail}")

    def _forbid_torch(self, tensor, name: str, allow) -> None:
        computed = self.computed_by_torch(tensor, allow)
        if not computed:
            return
        where = tensor.device.type
        through = next((e for e in computed if any(s in e.origin.base for s in _THROUGH_TORCH)), None)
        if through is not None:
            raise Wrong(f"{name} comes from torch's own kernel ({through.describe(where)}), not from a cuDNN frontend "
                        f"graph you built: build the graph")
        writer, key = self.last_writer(tensor), self._key(tensor)
        if writer is not None and writer in computed and any(key in e.writes for e in self.graph_writes(tensor)):
            raise Wrong(f"torch changed {name} after your cuDNN graph wrote it ({writer.describe(where)}): let the "
                        f"graph's output stand, and do that work inside the graph")
        heavy = sorted(computed, key=lambda e: e.origin.base not in HEAVY)   # the matmuls and convolutions first
        names = ", ".join(list(dict.fromkeys(e.describe(where) for e in heavy))[:3])
        part = "part of " if self.graph_writes(tensor) else ""
        raise Wrong(f"torch computed {part}{name} ({names}): that work belongs inside your cuDNN graph")

    def _not_by_graph(self, tensor, name: str, writer: Event) -> str:
        what = writer.describe(tensor.device.type)
        if "cpu" in writer.origin.sources:
            return f"{name} was copied in from the CPU ({what}), not written by a cuDNN graph on the GPU"
        if self.graph_writes(tensor):
            return f"{name} holds a copy of a cuDNN result ({what}), not what your graph wrote into it: make {name} the graph's output"
        return f"{name} was last written by torch ({what}), not by a cuDNN graph"

    # ------------------------------------------------------------ recording
    def _key(self, tensor) -> tuple | None:
        """The block of memory a tensor (or a raw device pointer) lives in: (device type, storage address)."""
        if type(tensor) is int:
            for (device, start), size in self._extent.items():
                if device == "cuda" and start <= tensor < start + size:
                    return device, start
            return ("cuda", tensor) if tensor else None
        try:
            storage = tensor.untyped_storage()
            start = storage.data_ptr()
        except Exception:  # no memory (meta) or not a tensor
            return None
        if not start:
            return None
        key = (tensor.device.type, start)
        self._extent[key] = max(self._extent.get(key, 0), storage.nbytes())
        return key

    def _covers(self, tensor) -> bool:
        try:
            return (tensor.storage_offset() == 0
                    and tensor.numel() * tensor.element_size() >= tensor.untyped_storage().nbytes())
        except Exception:
            return False

    def _log(self, event: Event) -> None:
        """Append ``event``; inside a capture it waits for a replay, else its writes take effect now."""
        self.events.append(event)
        if self._capturing is not None:
            self._capturing.append(event)
            return
        self._apply(event)

    def _apply(self, event: Event) -> None:
        flowed = frozenset().union(*(self._lineage.get(k, frozenset()) for k in event.reads)) | {event.index}
        for key in event.writes:
            kept = frozenset() if key in event.covering else self._lineage.get(key, frozenset())
            self._lineage[key] = kept | flowed
            self._writer[key] = event.index

    def _next(self) -> int:
        return len(self.events)

    def torch_op(self, func, args, kwargs, out) -> None:
        """Log one torch operator (called by the dispatch mode)."""
        op = internals.op(func)
        reads, writes, covering, devices = set(), set(), set(), set()
        for i, (name, written, keyword) in enumerate(op.arguments):
            for t in _tensors_in(args[i] if i < len(args) else kwargs.get(name)):
                key = self._key(t)
                if key is None:
                    continue
                devices.add(key[0])
                if written:
                    writes.add(key)
                    if (op.overwrites or keyword) and self._covers(t):
                        covering.add(key)
                if not op.shape_only and (not written or not op.overwrites):
                    reads.add(key)
        results = out if isinstance(out, (list, tuple)) else (out,)
        for aliased, value in zip(op.aliased, results):
            if aliased:
                continue   # a view or the in-place argument itself
            for t in _tensors_in(value):
                key = self._key(t)
                if key is not None:
                    writes.add(key)
                    covering.add(key)
                    devices.add(key[0])
        if not writes:
            return   # reads nothing into memory (.item(), comparisons into Python): nothing to follow
        device = "cuda" if any(k[0] == "cuda" for k in writes) else next(iter(writes))[0]
        sources = tuple(sorted({k[0] for k in reads - writes} - {device}))
        self._log(Event(self._next(), "torch", op.name, self.phase, frozenset(reads), frozenset(writes), device=device,
                        base=op.base, compute=not op.free, pointwise=op.pointwise, sources=sources,
                        covering=frozenset(covering)))

    # ------------------------------------------------------------ graph_runs.recording's hooks
    def before(self) -> None:
        """An execute begins: the torch operators it runs are the graph's own work, not the answer's."""
        self.paused += 1

    def after(self) -> None:
        self.paused -= 1

    def executed(self, run: GraphRun) -> None:
        """Log one execute of a cuDNN graph (``graph_runs`` calls it after the execute)."""
        outputs = run.output_uids()
        reads, writes, covering = set(), set(), set()
        for uid, buffer in run.buffers.items():
            key = self._key(buffer)
            if key is None:
                continue
            if outputs is None:            # a deserialized graph does not say which are outputs: all but the inputs
                reads.add(key)
                if key not in self.inputs.values():
                    writes.add(key)
            elif uid in outputs:
                writes.add(key)
                if not isinstance(buffer, int) and self._covers(buffer):
                    covering.add(key)
            else:
                reads.add(key)
        label = type(run.graph).__name__
        device = "cuda" if any(k[0] == "cuda" for k in writes | reads) else "cpu"
        self._log(Event(self._next(), "graph", f"cuDNN graph ({label})", self.phase, frozenset(reads),
                        frozenset(writes), device=device, graph=run.graph, run=run, covering=frozenset(covering)))

    def capture_began(self, cuda_graph) -> None:
        self._capturing = []
        self._captures[id(cuda_graph)] = (cuda_graph, self._capturing)

    def capture_ended(self, cuda_graph) -> None:
        self._capturing = None

    def capturing(self) -> bool:
        return self._capturing is not None

    def replayed(self, cuda_graph) -> None:
        """Each event captured into ``cuda_graph`` takes effect again, as a replay."""
        for event in self.captured(cuda_graph):
            replay = Event(self._next(), "replay", event.name, self.phase, event.reads, event.writes,
                           device=event.device, base=event.base, compute=event.compute, pointwise=event.pointwise,
                           of=event, sources=event.sources, covering=event.covering)
            self.events.append(replay)
            self._apply(replay)

    def captured(self, cuda_graph) -> list[Event]:
        """The events captured into ``cuda_graph`` (empty for a graph captured outside this trace)."""
        return list(self._captures.get(id(cuda_graph), (None, []))[1])


# ---------------------------------------------------------------- the watchers
def _then(notify: Callable, first: bool = False) -> Callable:
    """An ``internals.wrapped`` maker: the original method, then (``first``: before it) ``notify(self, *args)``."""
    def make(original):
        def watched(self, *args, **kwargs):
            if first:
                notify(self, *args, **kwargs)
            result = original(self, *args, **kwargs)
            if not first:
                notify(self, *args, **kwargs)
            return result
        return watched
    return make


def _built(trace: Trace, what: str, depth: list) -> Callable:
    """A maker that logs ``(what, graph)`` for the outermost of nested builds (``build_plans`` may build each plan)."""
    def make(original):
        def watched(self, *args, **kwargs):
            if depth[0] == 0:
                trace.builds.append((what, self))
            depth[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                depth[0] -= 1
        return watched
    return make


@contextmanager
def tracing(inputs: dict | None = None, *, snapshot: bool = False, classes: tuple | None = None,
            cuda_graph_classes: tuple | None = None, cache_classes: tuple | None = None,
            order=None) -> Iterator[Trace]:
    """Log everything a grading runs (module docstring) for the block, ``inputs`` (name -> tensor) named as the
    exercise's; everything wrapped comes back on leaving, whatever happens inside. ``snapshot``: ``graph_runs``' copy
    of each output after its execute (not inside a capture). ``classes``, ``cuda_graph_classes``, ``cache_classes``:
    what to watch (default the cuDNN ``pygraph``, ``torch.cuda.CUDAGraph``, the frontend's kernel cache); ``order``:
    a ``graph_runs.StreamOrder`` that holds each launch made off the caller's stream."""
    graphs = classes if classes is not None else internals.graph_classes()
    if cuda_graph_classes is None:
        cuda_graph_classes = internals.cuda_graph_classes()
    if cache_classes is None:
        cache_classes = tuple(c for c in [internals.kernel_cache_class()] if c is not None)
    trace, depth = Trace(GraphRuns()), [0]
    for name, tensor in (inputs or {}).items():
        trace.input(name, tensor)
    begin, end, replay = internals.CAPTURES
    wraps = [(cls, name, make) for cls in cuda_graph_classes for name, make in (
        (begin, _then(lambda graph, *a, **k: trace.capture_began(graph))),
        (end, _then(lambda graph, *a, **k: trace.capture_ended(graph), first=True)),   # what follows is not captured
        (replay, _then(lambda graph, *a, **k: trace.replayed(graph))))]
    wraps += [(cls, name, _built(trace, what, depth)) for cls in graphs for name, what in internals.BUILDS.items()]
    wraps += [(cls, internals.CACHE_LOAD, _then(lambda cache, *a, **k: trace.cache_loads.append(
        (cache, a[0] if a else k.get("data"))))) for cls in cache_classes]
    with internals.wrapped(wraps), recording(snapshot=snapshot, classes=graphs, hooks=trace, runs=trace.runs,
                                                      order=order):
        with internals.dispatch_mode(lambda *op: None if trace.paused else trace.torch_op(*op)):
            yield trace
