"""Notebook 01's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: what matmul_bias_relu returned, inspected without running it (graph construction works with meta
tensors), and the notebook's own skeleton cells. On a GPU: real answers, right and wrong, through the checkers.
"""
from pathlib import Path

import pytest
import torch

import helpers as H
import grader as X
from grader import nb01
from tests.support import graded, rejects_each, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("01.matmul_bias_relu", "01.run_on_stream")
BF16 = torch.bfloat16


# ------------------------------------------------------------------ CPU: the structural checks
def _meta(*shape, dtype=BF16):
    return torch.empty(*shape, device="meta", dtype=dtype)


def _meta_graph(out_dtype=None, mark_output=True):
    """matmul → add → relu on meta tensors (no GPU): constructed, never validated or built."""
    import cudnn

    g = cudnn.pygraph(io_data_type=BF16, compute_data_type=torch.float32)
    x, w, b = (g.tensor_like(t) for t in (_meta(2, 96, 64), _meta(2, 64, 80), _meta(1, 1, 80)))
    y = g.relu(g.add(g.matmul(x, w), b))
    if mark_output:
        y.set_output(True)
    if out_dtype is not None:
        y.set_data_type(out_dtype)
    return g, {x: None, w: None, b: None, y: None}


def test_a_graph_that_is_not_built_is_rejected():
    graph, pack = _meta_graph(out_dtype=BF16)
    with pytest.raises(X.Wrong, match=r"^the graph is not built: run all five steps, through build_plans"):
        nb01.inspect_matmul_bias_relu((graph, pack), _meta(2, 96, 80))


def test_an_output_stored_in_another_dtype_than_y_is_rejected_before_it_runs():
    graph, pack = _meta_graph(out_dtype=torch.float32)
    with pytest.raises(X.Wrong) as caught:
        nb01.inspect_matmul_bias_relu((graph, pack), _meta(2, 96, 80))
    assert str(caught.value) == ("Y is stored as FLOAT in the graph but y is torch.bfloat16: "
                                 "set the output's data type to y's (BFLOAT16)")


def test_a_graph_without_its_output_marked_is_rejected():
    graph, pack = _meta_graph(mark_output=False)
    with pytest.raises(X.Wrong, match=r"^the graph should have one output, Y .*; it has 0$"):
        nb01.inspect_matmul_bias_relu((graph, pack), _meta(2, 96, 80))


@pytest.mark.parametrize("result, message", [
    ("graph", "return two things, (graph, variant_pack); got str"),
    (("graph", {}), "the first item should be the cudnn.pygraph you built, got str"),
])
def test_something_other_than_graph_and_pack_is_rejected(result, message):
    with pytest.raises(X.Wrong) as caught:
        nb01.inspect_matmul_bias_relu(result, _meta(2, 96, 80))
    assert str(caught.value) == message


def test_a_pack_that_is_not_a_dict_is_rejected():
    graph, pack = _meta_graph(out_dtype=BF16)
    with pytest.raises(X.Wrong, match=r"^the variant pack is a dict \{graph tensor: buffer\}, got list"):
        nb01.inspect_matmul_bias_relu((graph, list(pack)), _meta(2, 96, 80))


@pytest.mark.parametrize("result", [None, ..., (None, {}), (..., ...)])
def test_returning_nothing_is_not_done(result):
    with pytest.raises(X.NotDone):
        nb01.inspect_matmul_bias_relu(result, _meta(2, 96, 80))


def test_stream_verdict_names_the_stream_the_graph_ran_on():
    """The execute that wrote y must have run with its handle bound to `stream`; on the current stream, or on
    another, it fails with the one line that says so."""
    from types import SimpleNamespace

    def writer(stream):
        run = SimpleNamespace(stream=stream)
        return SimpleNamespace(origin=SimpleNamespace(run=run))

    nb01.stream_verdict(writer(7), stream=7, current=0)
    with pytest.raises(X.Wrong, match=r"^the graph ran on the current stream, not on `stream`: bind the handle"):
        nb01.stream_verdict(writer(0), stream=7, current=0)
    with pytest.raises(X.Wrong, match=r"^the graph ran on stream 9, not on `stream`"):
        nb01.stream_verdict(writer(9), stream=7, current=0)


def test_an_assigned_stream_attribute_is_named_not_taken_at_its_word():
    """The record keeps cuDNN's backend stream (``stream``) apart from the Python handle's attribute: an answer that
    assigned ``handle.stream`` ran where the backend says, and the line says why."""
    from types import SimpleNamespace

    run = SimpleNamespace(stream=0, stream_attribute=7)
    with pytest.raises(X.Wrong) as caught:
        nb01.stream_verdict(SimpleNamespace(origin=SimpleNamespace(run=run)), stream=7, current=0)
    assert str(caught.value).startswith("the graph ran on stream 0, not on `stream`: the handle's `stream` attribute "
                                        "says `stream`, but cuDNN's handle was never bound to it — call "
                                        "cudnn.set_stream(handle, stream.cuda_stream)")


def test_every_launch_must_be_on_stream_not_only_the_last():
    from grader.graph_runs import GraphRun, require_on_stream

    first_elsewhere = [GraphRun(None, stream=0, stream_attribute=0), GraphRun(None, stream=7, stream_attribute=7)]
    with pytest.raises(X.Wrong, match=r"^an earlier launch of your graph ran on the current stream, not on `stream`"):
        require_on_stream(first_elsewhere, 7, current=0)


def _cpu_fresh(seed=1):
    gen = torch.Generator().manual_seed(seed)
    return lambda *shape, scale=1.0: (torch.randn(*shape, generator=gen) * scale).to(BF16)


def test_the_bias_makes_half_the_columns_strongly_negative():
    b = nb01.separating_bias(_cpu_fresh())
    assert b.shape == (1, 1, nb01.N) and b.dtype == BF16
    assert (b[..., 1::2] < -6).all() and (b[..., ::2].abs() < 1.5).all()


@pytest.mark.parametrize("slope", [0.002, 0.005, 0.02])
def test_a_nearby_activation_a_fraction_of_a_per_cent_off_on_negative_inputs_is_told_apart(slope):
    """With the checker's inputs a leaky ReLU of slope 0.2 % is outside the bf16 tolerance; its line says where."""
    fresh = _cpu_fresh()
    x, w, b = fresh(2, 96, 64), fresh(2, 64, 80, scale=64**-0.5), nb01.separating_bias(fresh)
    pre = torch.bmm(x.double(), w.double()) + b.double()
    right = torch.relu(pre.float()).to(BF16)
    assert X.agrees(right, torch.relu(pre)).ok and nb01.negatives_not_zero(right, pre) is None
    leaky = torch.nn.functional.leaky_relu(pre.float(), slope).to(BF16)
    assert not X.agrees(leaky, torch.relu(pre)).ok
    assert nb01.negatives_not_zero(leaky, pre).startswith(
        "y is right where X @ W + b > 0 but not where it is negative: ReLU gives exactly 0 there, yours gives values "
        "from -")
    assert nb01.negatives_not_zero(pre.to(BF16), pre) is not None          # no ReLU at all: the checker names that first
    assert nb01.negatives_not_zero(torch.relu(pre.float() + 1).to(BF16), pre) is None   # wrong where positive: not this


# ------------------------------------------------------------------ CPU: the notebook's cells


# ------------------------------------------------------------------ GPU: real answers through the checkers
def _built(x, w, b, y, *, bias=True, relu=True, out_dtype=None, build=True, inputs=None, slope=None):
    """A matmul(+bias)(+relu) graph over x, w, b (or over ``inputs``), optionally stopped before build_plans."""
    cudnn = H.load_cudnn()
    g = cudnn.pygraph(io_data_type=x.dtype, compute_data_type=torch.float32, handle=H.get_handle())
    bound = inputs or (x, w, b)
    tx, tw, tb = (g.tensor_like(t) for t in bound)
    out = g.matmul(tx, tw)
    if bias:
        out = g.add(out, tb)
    if relu:
        out = g.relu(out) if slope is None else g.relu(out, negative_slope=slope)
    out.set_output(True).set_data_type(cudnn.datatypes.torch_to_cudnn_data_type(out_dtype or x.dtype))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    if build:
        g.build_plans()
    pack = {tx: bound[0], tw: bound[1], out: y}
    if bias:
        pack[tb] = bound[2]
    return g, pack


def bias_missing(x, w, b, y):
    return _built(x, w, b, y, bias=False)


def relu_missing(x, w, b, y):
    return _built(x, w, b, y, relu=False)


def not_built(x, w, b, y):
    return _built(x, w, b, y, build=False)


def output_in_fp32(x, w, b, y):
    return _built(x, w, b, y, out_dtype=torch.float32, build=False)  # the dtype is checked before the build


def bound_to_copies(x, w, b, y):
    return _built(x, w, b, y, inputs=(x.clone(), w.clone(), b.clone()))


def sized_from_other_tensors(x, w, b, y):
    """As if built from the notebook's globals: other sizes than the arguments."""
    others = (torch.randn(4, 256, 512, device="cuda", dtype=x.dtype),
              torch.randn(4, 512, 128, device="cuda", dtype=x.dtype), torch.randn(1, 1, 128, device="cuda", dtype=x.dtype))
    return _built(x, w, b, y, inputs=others)


def ran_on_the_current_stream(graph, pack, workspace, stream):
    graph.execute(pack, workspace, handle=H.get_handle())


def ran_on_stream_then_waited(graph, pack, workspace, stream):
    with torch.cuda.stream(stream):
        graph.execute(pack, workspace, handle=H.get_handle())
    stream.synchronize()


def own_handle_never_bound(graph, pack, workspace, stream):
    cudnn = H.load_cudnn()
    graph.execute(pack, workspace, handle=cudnn.create_handle())  # a fresh handle runs on the default stream


def never_ran(graph, pack, workspace, stream):
    stream.wait_stream(torch.cuda.current_stream())


def _out_uid(graph):
    return graph.get_outputs()[0].uid


def relu_by_torch_on_the_stream(graph, pack, workspace, stream):
    """torch does the work, on the right stream; the graph never runs."""
    y = pack[_out_uid(graph)]
    x = next(b for uid, b in pack.items() if uid != _out_uid(graph))
    with torch.cuda.stream(stream):
        y.copy_(torch.relu(x))


def graph_into_scratch_then_torch(graph, pack, workspace, stream):
    scratch = {uid: (torch.empty_like(b) if uid == _out_uid(graph) else b) for uid, b in pack.items()}
    with torch.cuda.stream(stream):
        graph.execute(scratch, workspace, handle=H.get_handle())   # the cuDNN result is thrown away
        relu_by_torch_on_the_stream(graph, pack, workspace, stream)


def graph_into_scratch_then_copied(graph, pack, workspace, stream):
    y = pack[_out_uid(graph)]
    scratch = {uid: (torch.empty_like(b) if uid == _out_uid(graph) else b) for uid, b in pack.items()}
    with torch.cuda.stream(stream):
        graph.execute(scratch, workspace, handle=H.get_handle())
        y.copy_(scratch[_out_uid(graph)])


def torch_computes_y_graph_writes_scratch(x, w, b, y):
    """y by torch, and a built graph whose pack binds a scratch output: the checker's own run leaves y unwritten."""
    y.copy_(torch.relu(x @ w + b))
    return _built(x, w, b, torch.empty_like(y))


def leaky_relu_two_per_cent(x, w, b, y):
    """A nearby activation: 2 % of the input on the negative side instead of 0."""
    return _built(x, w, b, y, slope=0.02)


def leaky_relu_half_a_per_cent(x, w, b, y):
    return _built(x, w, b, y, slope=0.005)


def host_result_through_a_zero_matmul(x, w, b, y):
    """The work done on the host (numpy), fed to a graph that multiplies by zeros and adds it: the graph "writes" y."""
    import numpy as np

    done = np.maximum(x.float().cpu().numpy() @ w.float().cpu().numpy() + b.float().cpu().numpy(), 0)
    fed = torch.from_numpy(done).to(device="cuda", dtype=x.dtype)
    return _built(x, w, b, y, inputs=(x, torch.zeros_like(w), fed))


def handle_stream_assigned_not_set(graph, pack, workspace, stream):
    """Assigns the handle's attribute instead of calling cudnn.set_stream: cuDNN still launches on the current
    stream (ahead of the work queued on `stream`)."""
    handle = H.get_handle()
    handle.stream = stream.cuda_stream
    graph.execute(pack, workspace, handle=handle)


def first_on_the_current_stream_then_on_stream(graph, pack, workspace, stream):
    graph.execute(pack, workspace, handle=H.get_handle())   # too early: ahead of what `stream` holds
    with torch.cuda.stream(stream):
        graph.execute(pack, workspace, handle=H.get_handle())


def on_a_side_stream_of_its_own(graph, pack, workspace, stream):
    """Launches on a new stream that waits for nothing: unordered with the work queued on `stream`."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        graph.execute(pack, workspace, handle=H.get_handle())


def launched_on_stream_then_current_waits(graph, pack, workspace, stream):
    """A right answer: launch on `stream`, then make the current stream wait for it (no host wait)."""
    with torch.cuda.stream(stream):
        graph.execute(pack, workspace, handle=H.get_handle())
    torch.cuda.current_stream().wait_stream(stream)


@requires_gpu
def test_a_current_stream_made_to_wait_for_stream_is_a_right_answer():
    verdict = graded("01.run_on_stream", launched_on_stream_then_current_waits)
    assert verdict.status == "passed", verdict.message


WRONG = [
    # a torch op's first launch in a process can stall the host for its kernel's loading: either line is right
    ("01.run_on_stream", relu_by_torch_on_the_stream, r"torch computed y \(aten.relu\)|your function waited"),
    # its scratch allocations on `stream` can make the host wait: either line is right
    ("01.run_on_stream", graph_into_scratch_then_torch, r"torch computed y \(aten.relu\)|your function waited"),
    ("01.run_on_stream", graph_into_scratch_then_copied,   # on the H100 its scratch run made the host wait first
     r"(y holds a copy of a cuDNN result \(aten.copy_\)|your function waited for the GPU)"),
    ("01.matmul_bias_relu", torch_computes_y_graph_writes_scratch, "y was not written when the checker ran your graph"),
    ("01.matmul_bias_relu", bias_missing, "the output ignores the bias b"),
    ("01.matmul_bias_relu", relu_missing, "the output has no ReLU"),
    ("01.matmul_bias_relu", not_built, "the graph is not built"),
    ("01.matmul_bias_relu", output_in_fp32, "Y is stored as FLOAT in the graph but y is torch."),
    ("01.matmul_bias_relu", bound_to_copies, "y matches the first inputs, not the new values"),
    ("01.matmul_bias_relu", sized_from_other_tensors, "the graph's output is 4×256×128 but y is 2×96×80"),
    ("01.run_on_stream", ran_on_the_current_stream, "the graph ran on the current stream, not on `stream`"),
    ("01.run_on_stream", ran_on_stream_then_waited, "your function waited for the GPU"),
    # a fresh handle launches on the legacy default stream, which waits for `stream`: either message is right
    ("01.run_on_stream", own_handle_never_bound,
     "the graph ran on the current stream, not on `stream`|your function waited for the GPU|your code raised"),
    ("01.run_on_stream", never_ran, "y was never written"),
    # issue 50: the nearby activation (inputs that separate it), the host's work fed in, the stream by the backend
    ("01.matmul_bias_relu", leaky_relu_two_per_cent, "y is right where X @ W \\+ b > 0 but not where it is negative"),
    ("01.matmul_bias_relu", leaky_relu_half_a_per_cent, "y is right where X @ W \\+ b > 0 but not where it is negative"),
    ("01.matmul_bias_relu", host_result_through_a_zero_matmul, "y matches the first inputs, not the new values"),
    ("01.run_on_stream", handle_stream_assigned_not_set,
     "the graph ran on stream \\d+, not on `stream`: the handle's `stream` attribute says `stream`, but cuDNN's "
     "handle was never bound to it"),
    ("01.run_on_stream", first_on_the_current_stream_then_on_stream,
     "an earlier launch of your graph ran on the current stream, not on `stream`"),
    ("01.run_on_stream", on_a_side_stream_of_its_own,
     "the graph ran on stream \\d+, not on `stream`: work launched there is not ordered after"),
]


test_a_wrong_answer_fails_with_one_line_saying_why = rejects_each(WRONG, how="match")


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) 01's checkers build cuDNN graphs before they call the answer: the CPU
# test of the function that decides each verdict
DECIDED_BY = {
    "01.matmul_bias_relu": "test_a_graph_that_is_not_built_is_rejected",
    "01.run_on_stream": "test_stream_verdict_names_the_stream_the_graph_ran_on",
}
