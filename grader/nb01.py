"""Checkers for notebook 01's exercises: build and run a first graph yourself, and run a graph on a stream."""
from __future__ import annotations

import time

import torch

from helpers.checking import poison_
from helpers.graphs import GraphIO, build, workspace_for
from helpers.handles import get_handle
from helpers.libcudnn import load_cudnn
from . import NotDone, Wrong, agrees, checker, internals, on_gpu
from .graph_runs import course_handle, require_on_stream, settle, stream_slip
from .inputs import new_graph
from .provenance import tracing

# The checker's own sizes, not the notebook's: a graph built from the notebook's x and w shows up as a wrong shape.
BATCH, M, K, N = 2, 96, 64, 80
# The bias of every other column of y sits far below zero, so that half of X @ W + b is strongly negative while the
# positive half stays near 1: an activation that is not exactly 0 there (a leaky ReLU of slope 0.002, a clip at
# -0.01) is off by several times the bf16 tolerance instead of hiding in it.
NEGATIVE_BIAS = -8.0
GATE_CYCLES = 200_000_000  # GPU clock cycles the checker holds the learner's stream for (about 0.1 s at 2 GHz)


def _dtype_label(data_type) -> str:
    return getattr(data_type, "name", str(data_type))


# ------------------------------------------------------------------ 01.matmul_bias_relu
def inspect_matmul_bias_relu(result, y):
    """What ``matmul_bias_relu`` returned, checked without running it (so on the CPU too, with meta tensors):
    ``(graph, pack)`` or one line why not."""
    if result is None or result is Ellipsis:
        raise NotDone("not done yet — return (graph, variant_pack)")
    if not (isinstance(result, tuple) and len(result) == 2):
        raise Wrong(f"return two things, (graph, variant_pack); got {type(result).__name__}")
    graph, pack = result
    if graph is Ellipsis or pack is Ellipsis or graph is None or pack is None:
        raise NotDone("not done yet — return (graph, variant_pack)")
    cudnn = load_cudnn(need_gpu=False)
    if not isinstance(graph, cudnn.pygraph):
        raise Wrong(f"the first item should be the cudnn.pygraph you built, got {type(graph).__name__}")
    if not isinstance(pack, dict):
        raise Wrong(f"the variant pack is a dict {{graph tensor: buffer}}, got {type(pack).__name__}")
    outputs = graph.get_outputs()
    if len(outputs) != 1:
        raise Wrong(f"the graph should have one output, Y (set_output(True) on the ReLU's result); it has {len(outputs)}")
    declared = outputs[0].get_data_type()
    wanted = cudnn.datatypes.torch_to_cudnn_data_type(y.dtype)
    if declared is not None and declared != cudnn.data_type.NOT_SET and declared != wanted:
        raise Wrong(f"Y is stored as {_dtype_label(declared)} in the graph but y is {y.dtype}: "
                    f"set the output's data type to y's ({_dtype_label(wanted)})")
    try:
        graph.get_workspace_size()
    except RuntimeError:
        raise Wrong("the graph is not built: run all five steps, through build_plans, before returning it") from None
    return graph, pack


def separating_bias(fresh) -> torch.Tensor:
    """b [1,1,N]: near 0 in the even columns, near ``NEGATIVE_BIAS`` in the odd ones (``fresh(*shape, scale=)`` draws
    standard normals)."""
    drawn = fresh(1, 1, N)
    noise = drawn.float()
    odd = (torch.arange(N, device=noise.device) % 2 == 1).reshape(1, 1, N)
    return torch.where(odd, NEGATIVE_BIAS + 0.5 * noise, 0.25 * noise).to(drawn.dtype)


def _new_values(x, w, b, fresh) -> None:
    x.copy_(fresh(*x.shape))
    w.copy_(fresh(*w.shape, scale=K**-0.5))
    b.copy_(separating_bias(fresh))


def _run_returned(graph, pack, x, w, b, y, fresh) -> None:
    """New values in the same buffers, y poisoned again, the returned graph executed by the checker through the
    frontend's own ``execute`` (not one the answer set on the graph), on the course handle bound to the current
    stream: what y then holds is computed by that graph alone."""
    _new_values(x, w, b, fresh)
    poison_(y)
    load_cudnn(need_gpu=False).pygraph.execute(graph, pack, workspace_for(graph), handle=course_handle())
    settle()


def negatives_not_zero(y, pre) -> str | None:
    """One line when ``y`` matches ReLU(``pre``) where ``pre`` > 0 but is not 0 where it is negative (a nearby
    activation: leaky, clipped, smooth), else None."""
    positive = pre > 0
    if not positive.any() or positive.all() or not agrees(y[positive], torch.relu(pre)[positive]).ok:
        return None
    below = y[~positive].float()
    if not below.abs().max().item() > 0:
        return None
    return (f"y is right where X @ W + b > 0 but not where it is negative: ReLU gives exactly 0 there, yours gives "
            f"values from {below.min().item():.3g} to {below.max().item():.3g} — use relu (no negative slope, no clip)")


@checker("01.matmul_bias_relu")
def check_matmul_bias_relu(answer):
    _, dtype = on_gpu()
    gen = torch.Generator(device="cuda").manual_seed(1)

    def fresh(*shape, scale=1.0):
        return (torch.randn(*shape, device="cuda", dtype=torch.float32, generator=gen) * scale).to(dtype)

    x, w, b = fresh(BATCH, M, K), fresh(BATCH, K, N, scale=K**-0.5), separating_bias(fresh)
    y = poison_(torch.empty(BATCH, M, N, device="cuda", dtype=dtype))
    first_inputs = [t.clone() for t in (x, w, b)]
    with tracing(dict(x=x, w=w, b=b)) as trace:
        with trace.answer():
            returned = answer(x, w, b, y)
        graph, pack = inspect_matmul_bias_relu(returned, y)
        dims = tuple(graph.get_outputs()[0].get_dim())
        if dims and dims != tuple(y.shape):
            raise Wrong(f"the graph's output is {'×'.join(map(str, dims))} but y is {'×'.join(map(str, y.shape))}: "
                        "build it from the tensors passed in, not the notebook's x and w")
        _run_returned(graph, pack, x, w, b, y, fresh)

    def ref(x_, w_, b_, bias=True, relu=True):
        out = torch.bmm(x_.double(), w_.double()) + (b_.double() if bias else 0)
        return torch.relu(out) if relu else out

    def matches(reference) -> bool:
        return agrees(y, reference).ok

    result = agrees(y, ref(x, w, b))
    if result.ok:
        trace.require_graph_output(y, "y", kinds=("MATMUL",), inputs=("x", "w", "b"), by=graph)
        return f"correct — your graph computes ReLU(X @ W + b) from the buffers it was given, rel err {result.rel_err:.1e}"
    if result.unwritten == y.numel():
        raise Wrong("y was not written when the checker ran your graph: the variant pack must bind the graph's "
                    "output to the y you were given")
    if result.unwritten:
        raise Wrong(f"{result.unwritten} of {y.numel()} elements of y were never written")
    if matches(ref(*first_inputs)):
        raise Wrong("y matches the first inputs, not the new values the checker wrote into x, w, b: bind x, w, b "
                    "themselves in the variant pack (not copies, nor results computed beforehand), so the graph "
                    "reads them when it runs")
    if matches(ref(x, w, b, bias=False)):
        raise Wrong(f"the output ignores the bias b (rel err {result.rel_err:.2g}; it matches ReLU(X @ W))")
    if matches(ref(x, w, b, relu=False)):
        raise Wrong(f"the output has no ReLU (rel err {result.rel_err:.2g}; it matches X @ W + b)")
    nearby = negatives_not_zero(y, ref(x, w, b, relu=False))
    if nearby:
        raise Wrong(nearby)
    if result.rel_err <= result.tol:  # right by norm, but some elements are off
        raise Wrong(f"most of y is right, but {result.elements}")
    raise Wrong(f"y is not ReLU(X @ W + b): rel err {result.rel_err:.2g} (tolerance {result.tol:g})")


# ------------------------------------------------------------------ 01.run_on_stream
def stream_verdict(writer, stream: int, current: int) -> None:
    """``Wrong`` in one line unless the execute that wrote y (``writer``, a ``provenance.Event``) ran on ``stream``
    (its handle bound there in cuDNN's backend); ``current``: torch's current stream, to name the usual slip."""
    run = writer.origin.run
    slip = stream_slip(run, stream, current=current) if run is not None else None
    if slip:
        raise Wrong(slip)


@checker("01.run_on_stream")
def check_run_on_stream(answer):
    """The answer must launch the graph on ``stream`` and return at once: the checker holds ``stream`` behind a long GPU
    wait and times the call on the host (one that waits for the GPU takes about as long), then requires y written by
    the checker's graph with its handle bound to ``stream``."""
    _, dtype = on_gpu()
    gen = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(4, 128, 128, device="cuda", dtype=torch.float32, generator=gen).to(dtype)
    y = torch.empty_like(x)
    graph = new_graph(dtype)
    io = GraphIO(graph, dtype=dtype)
    io.output("y", graph.relu(io.input("x", x), name="relu"), y)
    build(graph)
    pack, workspace = io.pack(), workspace_for(graph)
    graph.execute(pack, workspace, handle=get_handle())  # once, untimed: first-launch work is done before the test
    torch.cuda.synchronize()

    stream, blocker = torch.cuda.Stream(), torch.cuda.Stream()
    current = torch.cuda.current_stream().cuda_stream
    poison_(y)
    torch.cuda.synchronize()
    gate_start, gate_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(blocker):
        gate_start.record()
        internals.gpu_sleep(GATE_CYCLES)
        gate_end.record()
    stream.wait_event(gate_end)
    with tracing(dict(x=x)) as trace:
        t0 = time.perf_counter()
        try:
            with trace.answer():
                answer(graph, pack, workspace, stream)
        finally:
            host_ms = (time.perf_counter() - t0) * 1e3
            course_handle()  # the course handle back on the current stream, in cuDNN's backend too
    # Every launch of the answer on `stream`, by the stream cuDNN's handle was bound to (not its Python attribute);
    # then the host waits for `stream` alone (an event), not the device: y is read as a caller of `stream` would.
    require_on_stream(trace.runs, stream.cuda_stream, current=current)
    settle(stream)
    gate_ms = gate_start.elapsed_time(gate_end)
    if host_ms > gate_ms / 2:
        raise Wrong(f"your function waited for the GPU ({host_ms:.0f} ms, while the stream was held for "
                    f"{gate_ms:.0f} ms): launch on the stream and return without synchronizing")
    result = agrees(y, torch.relu(x.double()))
    if result.unwritten == y.numel():
        raise Wrong("y was never written: execute the graph (with pack and workspace) on `stream`")
    writer = trace.require_graph_output(y, "y", inputs=("x",), by=graph,
                                        how="execute the graph you are given, on `stream`")
    stream_verdict(writer, stream.cuda_stream, current)
    if not result.ok:
        raise Wrong(f"y is not ReLU(x): rel err {result.rel_err:.2g}"
                    + (f"; {result.elements}" if result.rel_err <= result.tol else ""))
    return "correct — your graph ran on `stream`, after the work already queued there"


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H


def matmul_bias_relu(x, w, b, y):
    """y = ReLU(x @ w + b) as one graph: three graph inputs, a virtual matmul and sum, one stored output."""
    cudnn = H.load_cudnn()
    mm_graph = cudnn.pygraph(io_data_type=x.dtype, compute_data_type=torch.float32, handle=H.get_handle())
    x_in, w_in, b_in = (mm_graph.tensor_like(t) for t in (x, w, b))
    summed = mm_graph.add(mm_graph.matmul(x_in, w_in, name="mm"), b_in, name="plus_bias")  # b broadcasts
    y_out = mm_graph.relu(summed, name="act")
    y_out.set_output(True).set_data_type(cudnn.datatypes.torch_to_cudnn_data_type(y.dtype))
    mm_graph.validate()
    mm_graph.build_operation_graph()
    mm_graph.create_execution_plans(H.heuristic_modes())   # the course's default: A, then FALLBACK
    mm_graph.check_support()
    mm_graph.build_plans(cudnn.build_plan_policy.HEURISTICS_CHOICE)
    return mm_graph, {x_in: x, w_in: w, b_in: b, y_out: y}


def run_on_stream(graph, pack, workspace, stream):
    """Ask for the course handle inside the stream context: it is bound to `stream` for this launch."""
    with torch.cuda.stream(stream):
        graph.execute(pack, workspace, handle=H.get_handle())
