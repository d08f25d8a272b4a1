"""Notebook 08's exercises: CUDA graphs around cuDNN plans.

``08.capture_two``   record two different cuDNN graphs (an up-projection with GELU, then a down-projection
                     with SiLU) into ONE ``torch.cuda.CUDAGraph``, driving a raw handle the learner binds
                     (unbound in cuDNN itself before the answer runs). Replayed twice, on a new x each time.
``08.serve``         run requests through a captured graph: new input into the static buffer, replay, a copy
                     of the output per request. The requests are written on the caller's stream behind a GPU
                     wait, and the outputs copied on it at once: work on a stream not ordered with the caller's
                     shows, with no device-wide synchronize to hide it.
``08.swap_weights``  cuDNN's native CUDA-graph API: repoint a populated graph at new weights with
                     ``update_cuda_graph`` and make the executable graph follow; called twice, with weights in a
                     new buffer each time.

Each checker builds its own tiny graphs and buffers, poisons what the GPU must write, and compares with PyTorch in
fp32. The verdicts are pure functions (``capture_verdict``, ``serve_verdict``, ``stream_order_problem``,
``swap_verdict``, ``second_swap_verdict``), tested without a GPU.
"""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import torch
import torch.nn.functional as F

from helpers.checking import poison_
from helpers.cuda_runtime import cuda_call, cudart as cuda_runtime
from helpers.device import require_gpu, working_dtype
from helpers.features import gate
from helpers.graphs import build, workspace_for
from helpers.handles import get_handle
from helpers.libcudnn import load_cudnn
from . import NotDone, Wrong, agrees, checker, inputs, internals
from .graph_runs import stream_slip
from .provenance import tracing

TOKENS, HIDDEN, WIDE = 16, 64, 128      # the two-graph MLP: x [1,16,64] -> h [1,16,128] -> y [1,16,64]
REPLAYS = 2                             # 08.capture_two: replays of the returned graph, each on a new x
SWAP_TOKENS, SWAP_HIDDEN = 16, 256      # the native-API layer: the shape notebook 08 runs it at
REQUESTS = 4
HOLD_CYCLES = 40_000_000                # 08.serve: the caller's stream busy this long (≈ 20 ms) before the requests
REPLAY_CYCLES = 2_000_000               # ... and each replay's stream this long (≈ 1 ms) before the replay


# ---------------------------------------------------------------- shared set-up (GPU)
_RAW_HANDLES: dict = {}


def _raw_handle():
    """A cuDNN handle of the exercises' own, put back on the null stream before each use: the learner must
    bind it. (One per device and process: cudnn handles are not freed by garbage collection.)"""
    require_gpu()
    cudnn = load_cudnn()
    index = torch.cuda.current_device()
    if index not in _RAW_HANDLES:
        _RAW_HANDLES[index] = cudnn.create_handle()
    handle = _RAW_HANDLES[index]
    internals.bind_stream(handle, 0)   # in cuDNN itself: an answer may have assigned the Python attribute only
    return handle


def _randn(gen, *shape, scale=1.0, dtype=None):
    return (scale * torch.randn(*shape, device="cuda", generator=gen)).to(dtype)


def make_mlp(seed: int = 0) -> SimpleNamespace:
    """Two built cuDNN graphs on one raw handle (bound to no stream yet), their variant packs, a workspace
    both can use, and the static buffers x -> h -> y the packs point at."""
    require_gpu()
    dtype = working_dtype()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = _randn(gen, 1, TOKENS, HIDDEN, dtype=dtype)
    h = torch.empty(1, TOKENS, WIDE, device="cuda", dtype=dtype)
    y = torch.empty(1, TOKENS, HIDDEN, device="cuda", dtype=dtype)
    w1 = _randn(gen, 1, HIDDEN, WIDE, scale=HIDDEN ** -0.5, dtype=dtype)
    b1 = _randn(gen, 1, 1, WIDE, scale=0.1, dtype=dtype)
    w2 = _randn(gen, 1, WIDE, HIDDEN, scale=WIDE ** -0.5, dtype=dtype)
    b2 = _randn(gen, 1, 1, HIDDEN, scale=0.1, dtype=dtype)
    handle = _raw_handle()
    up, up_io = inputs.matmul_graph(dict(x=x, w=w1, b=b1, y=h), act="gelu", handle=handle)
    down, down_io = inputs.matmul_graph(dict(x=h, w=w2, b=b2, y=y), act="silu", handle=handle)
    build(up)
    build(down)
    size = max(int(up.get_workspace_size()), int(down.get_workspace_size()), 1)
    return SimpleNamespace(up=up, down=down, up_pack=up_io.pack(), down_pack=down_io.pack(),
                           workspace=torch.empty(size, dtype=torch.uint8, device="cuda"), handle=handle,
                           x=x, h=h, y=y, params=(w1, b1, w2, b2), dtype=dtype, gen=gen)


def mlp_reference(mlp, x):
    """(h, y) in fp32 for input ``x``; h is rounded to the working dtype before the second matmul, as the
    cuDNN pair stores it."""
    w1, b1, w2, b2 = (t.float() for t in mlp.params)
    h = F.gelu(x.float() @ w1 + b1)
    y = F.silu(h.to(mlp.dtype).float() @ w2 + b2)
    return h, y


def _record_mlp(mlp):
    """The checker's own capture of up then down (08.serve grades what happens after a capture)."""
    require_gpu()
    cudnn = load_cudnn()

    def both():
        mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
        mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)

    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        cudnn.set_stream(mlp.handle, warm.cuda_stream)
        both()
    torch.cuda.current_stream().wait_stream(warm)
    recorded = torch.cuda.CUDAGraph()
    with torch.cuda.graph(recorded):
        cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)
        both()
    return recorded


def _all_nan(t) -> bool:
    return bool(torch.isnan(t.float()).all())


def _compare(out, ref, tol=None):
    """``agrees`` (by norm and element-wise, at ``tol`` or the dtype's tolerance), or None where shapes differ."""
    try:
        return agrees(out, ref, tol)
    except ValueError:
        return None


def _matches(out, ref, tol=None) -> bool:
    """``out`` agrees with ``ref`` by norm and element by element: which result an output is (right or wrong)."""
    result = _compare(out, ref, tol)
    return result is not None and result.ok


def _off_by(out, ref, tol=None) -> str:
    """``rel err …, tol …`` for a Wrong message."""
    result = _compare(out, ref, tol)
    return f"rel err {result.rel_err:.1e}, tol {result.tol:.2g}" if result else "shapes differ"


# ---------------------------------------------------------------- 08.capture_two
def capture_verdict(*, empty: bool, h, h_ref, y, y_ref, tol: float | None = None, h_stale=None) -> str:
    """What one replay on fresh input says about a capture (h and y were poisoned before the replay).
    ``tol``: the course's tolerance for the outputs' dtype unless given; ``h_stale``: h for the x that was in mlp.x
    at capture time (a capture that does not read mlp.x replays that)."""
    if empty or (_all_nan(h) and _all_nan(y)):
        said = " (torch warned 'The CUDA Graph is empty')" if empty else ""
        raise Wrong(f"the replay wrote neither h nor y{said}: bind mlp.handle to the capture stream inside the "
                    "capture — cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)")
    if h_stale is not None and _matches(h, h_stale, tol) and not _matches(h, h_ref, tol):
        raise Wrong("h after the replay is the result for the x that was in mlp.x when you captured, not for the new "
                    "x written there before the replay: what you captured does not read mlp.x — record mlp.up's "
                    "execute with mlp.up_pack as given (it binds mlp.x itself)")
    if not _matches(h, h_ref, tol):
        raise Wrong(f"h is wrong after the replay ({_off_by(h, h_ref, tol)}): mlp.up must read mlp.x")
    if _all_nan(y):
        raise Wrong("the replay ran mlp.up but y is still NaN: record mlp.down too, after mlp.up, in the same "
                    "capture (it reads the h that mlp.up writes)")
    if not _matches(y, y_ref, tol):
        raise Wrong(f"y is wrong after the replay ({_off_by(y, y_ref, tol)})")
    return f"correct — one CUDA graph replays both cuDNN graphs, rel err {_compare(y, y_ref, tol).rel_err:.1e}"


def capture_stream_problem(runs) -> str | None:
    """Why the executes recorded during a capture (``runs``: ``GraphRun``s) did not all launch on one stream that
    cuDNN's handle was really bound to (one line), or None: an assigned ``stream`` attribute, or an execute issued
    before the handle was bound to the capture stream (it ran at once, on another stream, and is not in the graph)."""
    for run in runs:
        if run.stream is not None and run.stream_attribute is not None and run.stream != run.stream_attribute:
            return stream_slip(run, run.stream_attribute, want_name="the capture stream") + \
                " — inside the capture: cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)"
    streams = list(dict.fromkeys(run.stream for run in runs if run.stream is not None))
    if len(streams) > 1:
        return (f"during the capture your executes ran on {len(streams)} streams ({', '.join(map(str, streams))}): "
                "the ones before the handle was bound to the capture stream ran at once and are not in the CUDA "
                "graph — bind mlp.handle to the capture stream first, then execute mlp.up and mlp.down")
    return None


def replayed_graphs(trace, mlp, h, y) -> None:
    """``Wrong`` in one line unless the replay wrote h with mlp.up's captured execute and y with mlp.down's, from
    mlp.x, with nothing torch computed on the way (a capture of torch ops, or cuDNN executed outside the capture
    and copied in, fails)."""
    how = "record the executes of mlp.up and mlp.down inside the capture"
    trace.require_graph_output(h, "h", inputs=("x",), by=mlp.up, replay=True, how=how)
    trace.require_graph_output(y, "y", inputs=("x",), by=mlp.down, replay=True, how=how)


@checker("08.capture_two")
def check_capture_two(capture_two):
    require_gpu()
    mlp = make_mlp(seed=1)
    x, h, y = mlp.x, mlp.h, mlp.y               # kept: the answer may rebind the names on mlp
    with tracing(dict(x=x)) as trace:
        with warnings.catch_warnings(record=True) as caught, trace.answer():
            warnings.simplefilter("always")
            recorded = capture_two(mlp)
        torch.cuda.synchronize()
        if recorded is None or recorded is Ellipsis:
            raise NotDone("not done yet — capture_two returned nothing; return the torch.cuda.CUDAGraph")
        if not isinstance(recorded, torch.cuda.CUDAGraph):
            raise Wrong(f"capture_two returned a {type(recorded).__name__}, not the torch.cuda.CUDAGraph it recorded")
        empty = any("CUDA Graph is empty" in str(w.message) for w in caught)
        problem = capture_stream_problem([run for run in trace.runs if run.captured])
        if problem:
            raise Wrong(problem)
        h_stale = mlp_reference(mlp, x.clone())[0]   # what a capture that does not read mlp.x would replay
        replayed = []
        for replay in range(REPLAYS):   # every replay on a new x: h and y must follow it each time
            x_new = _randn(mlp.gen, *x.shape, dtype=mlp.dtype)
            x.copy_(x_new)
            poison_(h)
            poison_(y)
            try:
                recorded.replay()
                torch.cuda.synchronize()
            except RuntimeError as exc:
                raise Wrong(f"replaying the returned graph failed — was it captured? "
                            f"({str(exc).splitlines()[0][:80]})")
            h_ref, y_ref = mlp_reference(mlp, x_new)
            verdict = capture_verdict(empty=empty, h=h, h_ref=h_ref, y=y, y_ref=y_ref, h_stale=h_stale)
            replayed.append(verdict)
            replayed_graphs(trace, mlp, h, y)
    return replayed[0]


# ---------------------------------------------------------------- 08.serve
class CountingGraph:
    """A captured graph that counts its replays and notes the stream each was launched on: the checker's view of
    what ``serve`` did. Each replay first keeps its stream busy for ``hold`` GPU cycles, so that work which is not
    ordered with the caller's stream shows (``stream_order_problem``)."""

    def __init__(self, graph, hold: int = 0):
        self._graph, self.replays, self.streams, self._hold = graph, 0, set(), hold

    def replay(self):
        self.replays += 1
        self.streams.add(torch.cuda.current_stream().cuda_stream)
        if self._hold:
            internals.gpu_sleep(self._hold)
        self._graph.replay()

    def __getattr__(self, name):
        return getattr(self._graph, name)


def _shares_memory(a, b) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def serve_verdict(outputs, refs, *, stale_ref, y_static, replays: int, tol: float | None = None) -> str:
    """Grade ``serve``'s outputs: one own tensor per request, each equal to its request's reference.
    ``stale_ref`` is the result for the input that sat in the static buffer before ``serve`` ran.
    ``tol``: the course's tolerance for each output's dtype unless given."""
    n = len(refs)
    if outputs is None or outputs is Ellipsis:
        raise NotDone("not done yet — serve returned nothing; return one output per request")
    outputs = list(outputs)
    if len(outputs) != n:
        raise Wrong(f"serve returned {len(outputs)} outputs for {n} requests")
    for i, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            raise Wrong(f"output {i} is a {type(out).__name__}, not a tensor")
        if tuple(out.shape) != tuple(refs[i].shape):
            raise Wrong(f"output {i} has shape {tuple(out.shape)}, want {tuple(refs[i].shape)} (the shape of mlp.y)")
    if any(_shares_memory(out, y_static) for out in outputs):
        raise Wrong("an output is mlp.y itself: the next replay overwrites that buffer — keep a copy of each "
                    "result (clone())")
    shared = next(((i, j) for i in range(n) for j in range(i) if _shares_memory(outputs[i], outputs[j])), None)
    if shared:
        raise Wrong(f"outputs {shared[1]} and {shared[0]} share one buffer, so the later request overwrote the earlier "
                    "one's result: give every request a copy of its own (mlp.y.clone())")
    if replays < n:
        raise Wrong(f"the captured graph was replayed {replays} time(s) for {n} requests: replay it once per request")
    if all(_matches(out, ref, tol) for out, ref in zip(outputs, refs)):
        worst = max(_compare(out, ref, tol).rel_err for out, ref in zip(outputs, refs))
        return f"correct — {n} requests, each output its own copy, worst rel err {worst:.1e}"
    if all(_matches(out, stale_ref, tol) for out in outputs):
        raise Wrong("every output is the result for the input that was in mlp.x before serve ran: copy each "
                    "request INTO the static buffer (mlp.x.copy_(request)) — the graph reads that memory, not a name")
    if n > 1 and all(_matches(outputs[i], refs[i - 1], tol) for i in range(1, n)):
        raise Wrong("output i holds the result of request i-1: read mlp.y after the replay, not before")
    bad = next(i for i in range(n) if not _matches(outputs[i], refs[i], tol))
    if _all_nan(outputs[bad]):
        raise Wrong(f"output {bad} is NaN (the poison in mlp.y): it was read before any replay wrote it")
    raise Wrong(f"output {bad} is wrong ({_off_by(outputs[bad], refs[bad], tol)})")


def _same_bits(a, b) -> bool:
    return (a.shape == b.shape and a.dtype == b.dtype
            and torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def stream_order_problem(seen_by_caller, outputs, *, elsewhere: bool) -> str | None:
    """Why ``serve``'s work was not ordered with the stream it was called on (one line), or None. The checker wrote
    the requests on that stream behind a GPU wait, and copied each output on it as soon as ``serve`` returned
    (``seen_by_caller``), before waiting for the device; ``elsewhere``: some replay ran on another stream."""
    if elsewhere and any(_all_nan(out) for out in outputs):
        return ("serve read the requests before they were ready: the checker wrote them on the stream serve was "
                "called on, and your replays ran on another stream that did not wait for it — "
                "side.wait_stream(torch.cuda.current_stream()) first, or replay on the current stream")
    late = next((i for i, (seen, out) in enumerate(zip(seen_by_caller, outputs)) if not _same_bits(seen, out)), None)
    if late is not None:
        return (f"output {late} was not ready on the stream serve was called on: your work ran on another stream "
                "and serve returned without making the caller's stream wait for it — end with "
                "torch.cuda.current_stream().wait_stream(side), or replay on the current stream")
    return None


def served_by_replays(trace, mlp, outputs) -> None:
    """``Wrong`` in one line unless every output holds what a replay of the captured mlp.down wrote, computed from
    its own request, with nothing torch computed on the way (torch's MLP, or the cuDNN graphs executed directly
    outside the CUDA graph, fail)."""
    needs = [(lambda e: e.kind == "replay" and e.origin.graph is mlp.down,
              "a replay of cuda_graph: copy the request into mlp.x, replay, then copy mlp.y out")]
    for i, out in enumerate(outputs):
        trace.require_derived(out, f"output {i}", needs=needs)
        if not trace.reaches(out, f"request {i}"):
            raise Wrong(f"output {i} does not depend on request {i}: copy each request into mlp.x before its replay")


@checker("08.serve")
def check_serve(serve):
    """The requests are written on the caller's stream behind a GPU wait and each replay's stream waits a little
    first, with no device-wide synchronize between: serve must order its work after the caller's and the caller's
    after its own (``stream_order_problem``). Then the outputs (``serve_verdict``) and who wrote them."""
    require_gpu()
    mlp = make_mlp(seed=2)
    x_static, y_static = mlp.x, mlp.y          # kept: serve may rebind the names on mlp
    with tracing() as trace:
        recorded = CountingGraph(_record_mlp(mlp), hold=REPLAY_CYCLES)
        x_before = _randn(mlp.gen, *x_static.shape, dtype=mlp.dtype)
        x_static.copy_(x_before)
        poison_(y_static)
        requests = [_randn(mlp.gen, *x_static.shape, dtype=mlp.dtype) for _ in range(REQUESTS)]
        refs = [mlp_reference(mlp, r)[1] for r in requests]
        handed = [poison_(torch.empty_like(r)) for r in requests]
        torch.cuda.synchronize()
        for i, (request, given) in enumerate(zip(requests, handed)):
            trace.input(f"request {i}", given)
        caller = torch.cuda.current_stream()
        internals.gpu_sleep(HOLD_CYCLES)       # the requests are not ready until the caller's stream gets there
        for request, given in zip(requests, handed):
            given.copy_(request)
        with trace.answer():
            outputs = serve(mlp, recorded, handed)
        listed = None if outputs is None or outputs is Ellipsis else list(outputs)
        tensors = listed is not None and all(isinstance(out, torch.Tensor) for out in listed)
        seen_by_caller = [out.clone() for out in listed] if tensors else None   # on the caller's stream, no wait
        torch.cuda.synchronize()
    if tensors:
        problem = stream_order_problem(seen_by_caller, listed, elsewhere=bool(recorded.streams - {caller.cuda_stream}))
        if problem:
            raise Wrong(problem)
    message = serve_verdict(listed if listed is not None else outputs, refs,
                            stale_ref=mlp_reference(mlp, x_before)[1], y_static=y_static, replays=recorded.replays)
    served_by_replays(trace, mlp, listed)
    return message


# ---------------------------------------------------------------- 08.swap_weights
def swap_verdict(*, old_weights_intact: bool, launched, ref_new, ref_old, fresh, reread, ref_reread,
                 tol: float | None = None) -> str:
    """Grade a weight swap from three launches: the returned executable graph (``launched``), a new one
    instantiated from ``layer.cuda_graph`` (``fresh``), and the returned one again after new values were
    written into ``w_new`` in place (``reread``). ``tol``: the course's tolerance for the outputs' dtype unless
    given."""
    if not old_weights_intact:
        raise Wrong("the old weight buffer was overwritten: point the graph at w_new instead of copying into "
                    "the captured buffer")
    if _all_nan(launched):
        raise Wrong("launching the returned graph left layer.y unwritten (NaN): return the executable graph of "
                    "layer.cuda_graph")
    if _matches(launched, ref_old, tol) and not _matches(launched, ref_new, tol):
        if _matches(fresh, ref_new, tol):
            raise Wrong("layer.cuda_graph now reads w_new, but the executable graph you returned still reads the "
                        "old weights: push the update into it with cudaGraphExecUpdate (or instantiate it again)")
        raise Wrong("the launch still reads the old weights: call layer.graph.update_cuda_graph with a pack "
                    "whose 'w' entry is w_new.data_ptr()")
    if not _matches(launched, ref_new, tol):
        raise Wrong(f"the output is wrong ({_off_by(launched, ref_new, tol)})")
    if not _matches(fresh, ref_new, tol):
        raise Wrong("the launch uses w_new, but layer.cuda_graph itself was not updated: repoint it with "
                    "update_cuda_graph instead of populating a new CUDA graph")
    if not _matches(reread, ref_reread, tol):
        raise Wrong("the graph does not read w_new's memory: after new values were written into w_new the launch "
                    "gave a stale result — put w_new.data_ptr() itself in the pack, not a copy's")
    err = _compare(launched, ref_new, tol).rel_err
    return f"correct — the launch reads w_new (checked again after rewriting it in place), rel err {err:.1e}"


def make_native_layer(seed: int = 3) -> SimpleNamespace:
    """GELU(x @ w + b) with a plan that supports the native CUDA-graph API, populated into an empty CUDA
    graph and instantiated."""
    require_gpu()
    cudnn = load_cudnn()
    gate("native_cuda_graph").require()
    cudart = cuda_runtime()
    dtype = working_dtype()
    gen = torch.Generator(device="cuda").manual_seed(seed)
    t = dict(x=_randn(gen, 1, SWAP_TOKENS, SWAP_HIDDEN, dtype=dtype),
             w=_randn(gen, 1, SWAP_HIDDEN, SWAP_HIDDEN, scale=SWAP_HIDDEN ** -0.5, dtype=dtype),
             b=_randn(gen, 1, 1, SWAP_HIDDEN, scale=0.1, dtype=dtype),
             y=torch.empty(1, SWAP_TOKENS, SWAP_HIDDEN, device="cuda", dtype=dtype))
    handle = get_handle()
    graph, io = inputs.matmul_graph(t, act="gelu", handle=handle)
    build(graph, notes=[cudnn.behavior_note.SUPPORTS_CUDA_GRAPH_NATIVE_API])   # plans that can populate a CUDA graph
    workspace = workspace_for(graph)
    cuda_graph = cuda_call(cudart.cudaGraphCreate(0))
    graph.populate_cuda_graph(handle, {uid: buf.data_ptr() for uid, buf in io.pack().items()},
                              workspace.data_ptr(), int(cuda_graph))
    graph_exec = cuda_call(cudart.cudaGraphInstantiate(cuda_graph, 0))
    return SimpleNamespace(graph=graph, io=io, cuda_graph=cuda_graph, graph_exec=graph_exec, workspace=workspace,
                           handle=handle, x=t["x"], w=t["w"], b=t["b"], y=t["y"], dtype=dtype, gen=gen)


def _layer_reference(x, w, b):
    return F.gelu(x.float() @ w.float() + b.float())


def _launch(cudart, graph_exec, y):
    """Poison y, launch an executable graph on torch's current stream, wait; a copy of y."""
    poison_(y)
    cuda_call(cudart.cudaGraphLaunch(graph_exec, torch.cuda.current_stream().cuda_stream))
    torch.cuda.synchronize()
    return y.clone()


@checker("08.swap_weights", needs=("native_cuda_graph",))
def check_swap_weights(swap_weights):
    require_gpu()
    layer = make_native_layer()
    cudart = cuda_runtime()
    cuda_graph, x, w_old, b, y = layer.cuda_graph, layer.x, layer.w, layer.b, layer.y   # the answer may rebind them
    w_old_copy = w_old.clone()
    w_new = _randn(layer.gen, *w_old.shape, scale=SWAP_HIDDEN ** -0.5, dtype=layer.dtype)
    returned = _swapped(swap_weights(layer, w_new), cudart)
    latest = returned                      # the executable graph the checker destroys at the end
    try:
        launched = _launch(cudart, returned, y)
        probe = cuda_call(cudart.cudaGraphInstantiate(cuda_graph, 0))
        try:
            fresh = _launch(cudart, probe, y)
        finally:
            cuda_call(cudart.cudaGraphExecDestroy(probe))
        ref_new = _layer_reference(x, w_new, b)
        w_newer = _randn(layer.gen, *w_old.shape, scale=SWAP_HIDDEN ** -0.5, dtype=layer.dtype)
        w_new.copy_(w_newer)
        reread = _launch(cudart, returned, y)
        message = swap_verdict(old_weights_intact=bool(torch.equal(w_old, w_old_copy)), launched=launched,
                               ref_new=ref_new, ref_old=_layer_reference(x, w_old_copy, b), fresh=fresh,
                               reread=reread, ref_reread=_layer_reference(x, w_newer, b))
        # called again on the layer as it now is, with other weights in a new buffer: it must repoint again
        layer.graph_exec, layer.cuda_graph = returned, cuda_graph
        w_second = _randn(layer.gen, *w_old.shape, scale=SWAP_HIDDEN ** -0.5, dtype=layer.dtype)
        latest = _swapped(swap_weights(layer, w_second), cudart)
        again = _launch(cudart, latest, y)
        second_swap_verdict(again, ref_second=_layer_reference(x, w_second, b),
                            ref_first=_layer_reference(x, w_newer, b))
        return message
    finally:
        cudart.cudaGraphExecDestroy(latest)   # the answer's executable graph (the layer's, or a new one)
        cudart.cudaGraphDestroy(cuda_graph)


def _swapped(returned, cudart):
    """What ``swap_weights`` returned, once the device is idle: an executable graph, else NotDone or Wrong."""
    torch.cuda.synchronize()
    if returned is None or returned is Ellipsis:
        raise NotDone("not done yet — swap_weights returned nothing; return the executable graph to launch")
    executable = isinstance(returned, (int, cudart.cudaGraphExec_t)) or hasattr(returned, "getPtr")
    if isinstance(returned, (bool, str, torch.Tensor)) or not executable:
        raise Wrong(f"swap_weights returned a {type(returned).__name__}, not the executable graph "
                    "(cudaGraphExec_t) to launch")
    return returned


def second_swap_verdict(again, *, ref_second, ref_first, tol: float | None = None) -> None:
    """``Wrong`` in one line unless a second ``swap_weights`` call, with other weights in a new buffer, launches
    with them (``again``: layer.y after that launch)."""
    if _matches(again, ref_second, tol):
        return
    if _matches(again, ref_first, tol):
        raise Wrong("called a second time with another w_new (new values in a new buffer), the launch still read the "
                    "first call's w_new: repoint the graph at the w_new of every call")
    raise Wrong(f"called a second time with another w_new, the output is wrong ({_off_by(again, ref_second, tol)})")


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H


def capture_two(mlp):
    """mlp.up (x -> h), then mlp.down (h -> y), recorded into one torch.cuda.CUDAGraph."""
    cudnn = H.load_cudnn()

    def up_then_down():
        mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
        mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)

    warmup_stream = torch.cuda.Stream()
    warmup_stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warmup_stream):              # one-time work stays out of the graph
        cudnn.set_stream(mlp.handle, warmup_stream.cuda_stream)
        for _ in range(2):
            up_then_down()
    torch.cuda.current_stream().wait_stream(warmup_stream)

    both = torch.cuda.CUDAGraph()
    with torch.cuda.graph(both):
        capture_stream = torch.cuda.current_stream()    # torch's capture stream, inside the block
        cudnn.set_stream(mlp.handle, capture_stream.cuda_stream)
        up_then_down()
    return both


def serve(mlp, cuda_graph, requests):
    """Each request through the captured graph; every result copied out before the next replay."""
    results = []
    for new_input in requests:
        mlp.x.copy_(new_input)            # into the address the graph reads
        cuda_graph.replay()
        results.append(mlp.y.clone())     # out of the address the next replay overwrites
    return results


def swap_weights(layer, w_new):
    """layer.cuda_graph repointed at w_new (update_cuda_graph), pushed into layer.graph_exec."""
    from cuda.bindings import runtime as cudart

    pointers = {uid: buffer.data_ptr() for uid, buffer in layer.io.pack(w=w_new).items()}
    layer.graph.update_cuda_graph(layer.handle, pointers, layer.workspace.data_ptr(), int(layer.cuda_graph))
    status, _ = cudart.cudaGraphExecUpdate(layer.graph_exec, layer.cuda_graph)
    if status == cudart.cudaError_t.cudaSuccess:
        return layer.graph_exec
    # the driver refused the in-place update: instantiate the updated graph afresh
    H.cuda_call(cudart.cudaGraphExecDestroy(layer.graph_exec))
    return H.cuda_call(cudart.cudaGraphInstantiate(layer.cuda_graph, 0))   # raises, naming the error, if refused
