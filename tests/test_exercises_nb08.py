"""Notebook 08's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the verdicts (which mistake a replay's outputs reveal) on hand-made tensors, and the notebook's own
skeleton cells. On a GPU: real answers, right and wrong, run through the checkers.
"""
from pathlib import Path

import pytest
import torch

import helpers as H
import grader as X
from grader import nb08
from tests.support import rejects_each

ROOT = Path(__file__).resolve().parent.parent
KEYS = ["08.capture_two", "08.serve", "08.swap_weights"]
BF16 = torch.bfloat16   # the outputs' dtype in these cases: the verdicts take their tolerance from it


def _nan_like(t):
    return torch.full_like(t, float("nan"), dtype=BF16)


@pytest.fixture
def refs():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 16, 64, generator=g) for _ in range(4)]


# ------------------------------------------------------------------ CPU: 08.capture_two's verdict
def test_capture_verdict_accepts_a_replay_that_wrote_both():
    h_ref, y_ref = torch.randn(1, 16, 128), torch.randn(1, 16, 64)
    msg = nb08.capture_verdict(empty=False, h=h_ref.to(BF16), h_ref=h_ref, y=y_ref.to(BF16), y_ref=y_ref)
    assert msg.startswith("correct — one CUDA graph replays both cuDNN graphs, rel err ")


@pytest.mark.parametrize("empty, match", [
    (True, r"^the replay wrote neither h nor y \(torch warned 'The CUDA Graph is empty'\): bind mlp.handle"),
    (False, r"^the replay wrote neither h nor y: bind mlp.handle to the capture stream"),
])
def test_capture_verdict_names_an_empty_graph(empty, match):
    h_ref, y_ref = torch.randn(1, 16, 128), torch.randn(1, 16, 64)
    with pytest.raises(X.Wrong, match=match):
        nb08.capture_verdict(empty=empty, h=_nan_like(h_ref), h_ref=h_ref, y=_nan_like(y_ref), y_ref=y_ref)


def test_capture_verdict_names_a_graph_without_the_second_cudnn_graph():
    h_ref, y_ref = torch.randn(1, 16, 128), torch.randn(1, 16, 64)
    with pytest.raises(X.Wrong, match="^the replay ran mlp.up but y is still NaN: record mlp.down too"):
        nb08.capture_verdict(empty=False, h=h_ref.to(BF16), h_ref=h_ref, y=_nan_like(y_ref), y_ref=y_ref)


def test_capture_verdict_rejects_wrong_values_and_a_few_wrong_elements():
    h_ref, y_ref = torch.randn(1, 16, 128), torch.randn(1, 16, 64)
    with pytest.raises(X.Wrong, match=r"^h is wrong after the replay \(rel err"):
        nb08.capture_verdict(empty=False, h=(-h_ref).to(BF16), h_ref=h_ref, y=y_ref.to(BF16), y_ref=y_ref)
    one_bad = y_ref.to(BF16)
    one_bad[0, 3, 5] += 0.4     # too small to move the norm past the tolerance, far outside the element bound
    with pytest.raises(X.Wrong, match=r"^y is wrong after the replay \(rel err"):
        nb08.capture_verdict(empty=False, h=h_ref.to(BF16), h_ref=h_ref, y=one_bad, y_ref=y_ref)


# ------------------------------------------------------------------ CPU: 08.serve's verdict
def _serve(outputs, refs, *, replays=4, stale=None, y_static=None):
    stale = torch.randn(1, 16, 64) if stale is None else stale
    y_static = torch.empty(1, 16, 64, dtype=BF16) if y_static is None else y_static
    return nb08.serve_verdict(outputs, refs, stale_ref=stale, y_static=y_static, replays=replays)


def test_serve_verdict_accepts_one_own_copy_per_request(refs):
    assert _serve([r.to(BF16) for r in refs], refs).startswith("correct — 4 requests, each output its own copy")


def test_serve_verdict_rejects_the_static_output_itself(refs):
    y_static = refs[-1].to(BF16)
    with pytest.raises(X.Wrong, match="^an output is mlp.y itself: the next replay overwrites that buffer"):
        _serve([y_static] * 4, refs, y_static=y_static)
    with pytest.raises(X.Wrong, match="^an output is mlp.y itself"):   # a view of it is no better
        _serve([r.to(BF16) for r in refs[:3]] + [y_static[0:1]], refs, y_static=y_static)


def test_serve_verdict_rejects_a_stale_input(refs):
    stale = torch.randn(1, 16, 64)
    with pytest.raises(X.Wrong, match="^every output is the result for the input that was in mlp.x before serve"):
        _serve([stale.to(BF16) for _ in refs], refs, stale=stale)


def test_serve_verdict_rejects_reading_before_the_replay(refs):
    late = [_nan_like(refs[0])] + [r.to(BF16) for r in refs[:-1]]
    with pytest.raises(X.Wrong, match="^output i holds the result of request i-1: read mlp.y after the replay"):
        _serve(late, refs)
    with pytest.raises(X.Wrong, match=r"^output 0 is NaN \(the poison in mlp.y\)"):
        _serve([_nan_like(refs[0])] + [r.to(BF16) for r in refs[1:]], refs)


def test_serve_verdict_rejects_too_few_replays_wrong_counts_and_nothing(refs):
    with pytest.raises(X.Wrong, match=r"^the captured graph was replayed 1 time\(s\) for 4 requests"):
        _serve([r.to(BF16) for r in refs], refs, replays=1)
    with pytest.raises(X.Wrong, match="^serve returned 3 outputs for 4 requests"):
        _serve([r.to(BF16) for r in refs[:3]], refs)
    with pytest.raises(X.Wrong, match=r"^output 1 has shape \(16, 64\)"):
        _serve([refs[0].to(BF16), refs[1][0].to(BF16)] + [r.to(BF16) for r in refs[2:]], refs)
    with pytest.raises(X.NotDone):
        _serve(None, refs)
    with pytest.raises(X.Wrong, match=r"^output 2 is wrong \(rel err"):
        _serve([r.to(BF16) for r in refs[:2]] + [(2 * refs[2]).to(BF16), refs[3].to(BF16)], refs)


# ------------------------------------------------------------------ CPU: 08.swap_weights's verdict
@pytest.fixture
def swap():
    g = torch.Generator().manual_seed(1)
    new, old, newer = (torch.randn(1, 16, 256, generator=g) for _ in range(3))
    return dict(ref_new=new, ref_old=old, ref_reread=newer)


def _swap(swap, *, intact=True, launched="new", fresh="new", reread="reread"):
    pick = {"new": swap["ref_new"], "old": swap["ref_old"], "reread": swap["ref_reread"],
            "nan": torch.full_like(swap["ref_new"], float("nan"))}
    return nb08.swap_verdict(old_weights_intact=intact, launched=pick[launched].to(BF16), fresh=pick[fresh].to(BF16),
                             reread=pick[reread].to(BF16), **swap)


def test_swap_verdict_accepts_a_repointed_graph(swap):
    assert _swap(swap).startswith("correct — the launch reads w_new (checked again after rewriting it in place)")


@pytest.mark.parametrize("case, match", [
    (dict(intact=False), "^the old weight buffer was overwritten: point the graph at w_new"),
    (dict(launched="nan"), r"^launching the returned graph left layer.y unwritten \(NaN\)"),
    (dict(launched="old", fresh="new", reread="old"), "^layer.cuda_graph now reads w_new, but the executable graph "
                                                      "you returned still reads the old weights: .*cudaGraphExecUpdate"),
    (dict(launched="old", fresh="old", reread="old"), "^the launch still reads the old weights: call "
                                                      "layer.graph.update_cuda_graph"),
    (dict(fresh="old"), "^the launch uses w_new, but layer.cuda_graph itself was not updated"),
    (dict(reread="new"), "^the graph does not read w_new's memory"),
])
def test_swap_verdict_names_the_missing_step(swap, case, match):
    with pytest.raises(X.Wrong, match=match):
        _swap(swap, **case)


def test_capture_verdict_takes_its_tolerance_from_the_outputs_dtype():
    h_ref, y_ref = torch.randn(1, 16, 128), torch.randn(1, 16, 64)
    y_off = y_ref * (1 + 5e-3)      # 0.5 % off: inside bf16's tolerance, outside fp16's
    assert nb08.capture_verdict(empty=False, h=h_ref.to(BF16), h_ref=h_ref, y=y_off.to(BF16), y_ref=y_ref)
    fp16_tol = f"{H.tolerance(torch.float16):.2g}"
    with pytest.raises(X.Wrong, match=rf"^y is wrong after the replay \(rel err 5.0e-03, tol {fp16_tol}\)"):
        nb08.capture_verdict(empty=False, h=h_ref.half(), h_ref=h_ref, y=y_off.half(), y_ref=y_ref)


def test_serve_verdict_rejects_a_few_wrong_elements_the_norm_would_pass(refs):
    one_bad = refs[1].to(BF16)
    one_bad[0, 7, 9] += 0.4
    assert H.rel_error(one_bad, refs[1]) < H.tolerance(BF16)
    with pytest.raises(X.Wrong, match=r"^output 1 is wrong \(rel err"):
        _serve([refs[0].to(BF16), one_bad] + [r.to(BF16) for r in refs[2:]], refs)


def test_swap_verdict_rejects_a_few_wrong_elements_the_norm_would_pass(swap):
    one_bad = swap["ref_new"].to(BF16)
    one_bad[0, 2, 3] += 0.4
    assert H.rel_error(one_bad, swap["ref_new"]) < H.tolerance(BF16)
    with pytest.raises(X.Wrong, match=r"^the output is wrong \(rel err"):
        nb08.swap_verdict(old_weights_intact=True, launched=one_bad, fresh=swap["ref_new"].to(BF16),
                          reread=swap["ref_reread"].to(BF16), **swap)


# ------------------------------------------------------------------ CPU: the issue-50 verdicts
def test_capture_verdict_names_a_capture_that_does_not_read_mlp_x():
    h_ref, y_ref, h_old = torch.randn(1, 16, 128), torch.randn(1, 16, 64), torch.randn(1, 16, 128)
    with pytest.raises(X.Wrong, match="^h after the replay is the result for the x that was in mlp.x when you "
                                      "captured, not for the new x written there"):
        nb08.capture_verdict(empty=False, h=h_old.to(BF16), h_ref=h_ref, y=y_ref.to(BF16), y_ref=y_ref, h_stale=h_old)
    assert nb08.capture_verdict(empty=False, h=h_ref.to(BF16), h_ref=h_ref, y=y_ref.to(BF16), y_ref=y_ref,
                                h_stale=h_old).startswith("correct")


def _run_on(stream, attribute):
    from types import SimpleNamespace

    return SimpleNamespace(stream=stream, stream_attribute=attribute)


def test_capture_stream_problem_names_an_assigned_attribute_and_an_early_execute():
    assert nb08.capture_stream_problem([_run_on(7, 7), _run_on(7, 7)]) is None
    assert nb08.capture_stream_problem([]) is None
    line = nb08.capture_stream_problem([_run_on(0, 7), _run_on(0, 7)])
    assert line.startswith("the graph ran on stream 0, not on the capture stream: the handle's `stream` attribute "
                           "says the capture stream, but cuDNN's handle was never bound to it")
    assert line.endswith("inside the capture: cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)")
    assert nb08.capture_stream_problem([_run_on(5, 5), _run_on(7, 7)]).startswith(
        "during the capture your executes ran on 2 streams (5, 7): the ones before the handle was bound")


def test_stream_order_problem_names_work_not_ordered_with_the_callers_stream(refs):
    outputs = [r.to(BF16) for r in refs]
    assert nb08.stream_order_problem([o.clone() for o in outputs], outputs, elsewhere=True) is None
    early = [_nan_like(r) for r in refs]
    assert nb08.stream_order_problem([o.clone() for o in early], early, elsewhere=True).startswith(
        "serve read the requests before they were ready: the checker wrote them on the stream serve was called on")
    assert nb08.stream_order_problem([o.clone() for o in early], early, elsewhere=False) is None   # serve_verdict's
    seen = [o.clone() for o in outputs]
    seen[2] = _nan_like(refs[2])   # what the caller's stream saw when serve returned: not written yet
    assert nb08.stream_order_problem(seen, outputs, elsewhere=True).startswith(
        "output 2 was not ready on the stream serve was called on: your work ran on another stream")


def test_second_swap_verdict_wants_the_second_calls_weights(swap):
    second, first = swap["ref_reread"], swap["ref_new"]
    nb08.second_swap_verdict(second.to(BF16), ref_second=second, ref_first=first)
    with pytest.raises(X.Wrong, match="^called a second time with another w_new \\(new values in a new buffer\\), "
                                      "the launch still read the first call's w_new"):
        nb08.second_swap_verdict(first.to(BF16), ref_second=second, ref_first=first)
    with pytest.raises(X.Wrong, match="^called a second time with another w_new, the output is wrong"):
        nb08.second_swap_verdict(swap["ref_old"].to(BF16), ref_second=second, ref_first=first)


# ------------------------------------------------------------------ CPU: who wrote the replay's outputs
def _stand_in_mlp():
    """Two stand-in graphs (torch inside) x -> h -> y, and the buffers, as ``make_mlp`` lays them out."""
    from types import SimpleNamespace

    from tests.support import StandInGraph

    x, h, y = torch.randn(1, 4, 8), torch.full((1, 4, 16), float("nan")), torch.full((1, 4, 8), float("nan"))
    w1, w2 = torch.randn(1, 8, 16), torch.randn(1, 16, 8)
    up = StandInGraph(lambda x, w: {"h": torch.relu(x @ w)}, {"x": 1, "w": 2}, {"h": 3})
    down = StandInGraph(lambda h, w: {"y": torch.sigmoid(h @ w)}, {"h": 1, "w": 2}, {"y": 3})
    return SimpleNamespace(up=up, down=down, x=x, h=h, y=y, up_pack={1: x, 2: w1, 3: h}, down_pack={1: h, 2: w2, 3: y},
                           w1=w1, w2=w2)


def _traced(body):
    """Run ``body(mlp, cuda_graph, trace)`` as the learner's code in a trace that watches the stand-ins."""
    from grader.provenance import tracing
    from tests.support import StandInGraph
    from tests.test_provenance import StandInCUDAGraph

    mlp, cuda_graph = _stand_in_mlp(), StandInCUDAGraph()
    with tracing(classes=(StandInGraph,), cuda_graph_classes=(StandInCUDAGraph,), cache_classes=()) as trace:
        trace.input("x", mlp.x)
        body(mlp, cuda_graph, trace)
    return mlp, cuda_graph, trace


def test_a_capture_of_torch_ops_is_refused_on_the_cpu():
    def capture(graphs):
        def body(mlp, cuda_graph, trace):
            with trace.answer():
                cuda_graph.capture_begin()
                if graphs:
                    mlp.up.execute(mlp.up_pack)
                    mlp.down.execute(mlp.down_pack)
                else:   # the same MLP as torch ops: no cuDNN at all
                    mlp.h.copy_(torch.relu(mlp.x @ mlp.w1))
                    mlp.y.copy_(torch.sigmoid(mlp.h @ mlp.w2))
                cuda_graph.capture_end()
            cuda_graph.replay()   # the checker's replay
        return body

    mlp, _, trace = _traced(capture(graphs=True))
    nb08.replayed_graphs(trace, mlp, mlp.h, mlp.y)
    mlp, _, trace = _traced(capture(graphs=False))
    with pytest.raises(X.Wrong, match=r"^torch computed h \(aten.bmm, aten.relu\)"):
        nb08.replayed_graphs(trace, mlp, mlp.h, mlp.y)


def test_outputs_from_torch_or_direct_executes_are_refused_on_the_cpu():
    requests = [torch.randn(1, 4, 8) for _ in range(3)]

    def serve(how):
        def body(mlp, cuda_graph, trace):
            cuda_graph.capture_begin()          # the checker's capture of up then down
            mlp.up.execute(mlp.up_pack)
            mlp.down.execute(mlp.down_pack)
            cuda_graph.capture_end()
            for i, r in enumerate(requests):
                trace.input(f"request {i}", r)
            outputs = []
            with trace.answer():
                for r in requests:
                    mlp.x.copy_(r)
                    if how == "replay":
                        cuda_graph.replay()
                    elif how == "direct":
                        mlp.up.execute(mlp.up_pack)
                        mlp.down.execute(mlp.down_pack)
                    if how == "torch":
                        outputs.append(torch.sigmoid(torch.relu(r @ mlp.w1) @ mlp.w2))
                    else:
                        outputs.append(mlp.y.clone())
            body.outputs = outputs
        return body

    for how, message in [("torch", r"^torch computed output 0 \(aten.bmm"),
                         ("direct", r"^output 0 does not use a replay of cuda_graph: copy the request into mlp.x, "
                                    r"replay, then copy mlp.y out")]:
        body = serve(how)
        mlp, _, trace = _traced(body)
        with pytest.raises(X.Wrong, match=message):
            nb08.served_by_replays(trace, mlp, body.outputs)
    body = serve("replay")
    mlp, _, trace = _traced(body)
    nb08.served_by_replays(trace, mlp, body.outputs)


# ------------------------------------------------------------------ GPU: real answers through the checkers
def _run(mlp):
    mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
    mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)


def capture_without_binding(mlp):
    """Wrong: the raw handle stays on the null stream, so the capture records nothing."""
    _run(mlp)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _run(mlp)
    return graph


def capture_only_up(mlp):
    """Wrong: warm-up and binding done right, but only the first cuDNN graph is recorded."""
    cudnn = H.load_cudnn()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        cudnn.set_stream(mlp.handle, side.cuda_stream)
        _run(mlp)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)
        mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
    return graph


def serve_without_copy(mlp, cuda_graph, requests):
    """Wrong: binds the request to the name, the graph still reads the old buffer."""
    outputs = []
    for request in requests:
        mlp.x = request
        cuda_graph.replay()
        outputs.append(mlp.y.clone())
    return outputs


def serve_static_output(mlp, cuda_graph, requests):
    """Wrong: returns mlp.y itself, which the next replay overwrites."""
    outputs = []
    for request in requests:
        mlp.x.copy_(request)
        cuda_graph.replay()
        outputs.append(mlp.y)
    return outputs


def serve_eagerly(mlp, cuda_graph, requests):
    """Wrong: right numbers, but computed by executing the cuDNN graphs, not by replaying the capture."""
    cudnn = H.load_cudnn()
    cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)
    outputs = []
    for request in requests:
        mlp.x.copy_(request)
        _run(mlp)
        outputs.append(mlp.y.clone())
    return outputs


def _pointers(layer, **buffers):
    return {uid: t.data_ptr() for uid, t in layer.io.pack(**buffers).items()}


def swap_without_exec_update(layer, w_new):
    """Wrong: updates the cudaGraph_t but never pushes it into the executable graph."""
    layer.graph.update_cuda_graph(layer.handle, _pointers(layer, w=w_new), layer.workspace.data_ptr(),
                                  int(layer.cuda_graph))
    return layer.graph_exec


def swap_by_copying(layer, w_new):
    """Wrong: right numbers once, but by overwriting the captured weights instead of repointing."""
    layer.w.copy_(w_new)
    return layer.graph_exec


def swap_nothing(layer, w_new):
    """Wrong: returns the executable graph untouched."""
    return layer.graph_exec


def capture_torch_ops(mlp):
    """Wrong: the same two layers as torch ops, captured; no cuDNN at all."""
    w1, b1, w2, b2 = _mlp_params(mlp)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _torch_layers(mlp, w1, b1, w2, b2)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        _torch_layers(mlp, w1, b1, w2, b2)
    return graph


def _mlp_params(mlp):
    """The weights and biases the two graphs bind: (w1, b1, w2, b2)."""
    return mlp.params


def _torch_layers(mlp, w1, b1, w2, b2):
    import torch.nn.functional as F

    mlp.h.copy_(F.gelu(mlp.x @ w1 + b1))
    mlp.y.copy_(F.silu(mlp.h @ w2 + b2))


def capture_copies_of_eager_results(mlp):
    """Wrong: the cuDNN graphs run eagerly; the capture holds only copies of their results into h and y, which
    cannot follow a new input."""
    solution = X.solution("08.capture_two")
    scratch_h, scratch_y = torch.empty_like(mlp.h), torch.empty_like(mlp.y)
    solution(mlp)                                   # warms up and binds the handle; the result is not used
    mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
    mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)
    torch.cuda.synchronize()
    scratch_h.copy_(mlp.h)
    scratch_y.copy_(mlp.y)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mlp.h.copy_(scratch_h)
        mlp.y.copy_(scratch_y)
    return graph


def serve_with_torch(mlp, cuda_graph, requests):
    """Wrong: one replay per request, but each output is torch's MLP on the request."""
    w1, b1, w2, b2 = _mlp_params(mlp)
    import torch.nn.functional as F

    outputs = []
    for request in requests:
        mlp.x.copy_(request)
        cuda_graph.replay()
        outputs.append(F.silu(F.gelu(request @ w1 + b1) @ w2 + b2))
    return outputs


def serve_replays_then_executes(mlp, cuda_graph, requests):
    """Wrong: replays to be counted, then overwrites the result by executing the cuDNN graphs directly."""
    cudnn = H.load_cudnn()
    outputs = []
    for request in requests:
        mlp.x.copy_(request)
        cuda_graph.replay()
        cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)
        _run(mlp)
        outputs.append(mlp.y.clone())
    return outputs


def serve_one_shared_buffer(mlp, cuda_graph, requests):
    """Wrong: every output is the same copy buffer, so each request overwrites the one before."""
    out = torch.empty_like(mlp.y)
    outputs = []
    for request in requests:
        mlp.x.copy_(request)
        cuda_graph.replay()
        out.copy_(mlp.y)
        outputs.append(out)
    return outputs


def swap_with_torch(layer, w_new):
    """Wrong: computes the layer with torch into layer.y and returns the untouched executable graph."""
    import torch.nn.functional as F

    layer.y.copy_(F.gelu(layer.x @ w_new + layer.b))
    return layer.graph_exec


GPU_CASES = [
    ("08.capture_two", capture_torch_ops, "torch computed h (aten."),
    ("08.capture_two", capture_copies_of_eager_results,
     "h is wrong after the replay"),   # on the H100 the wrong values are caught before the capture's x is named
    ("08.serve", serve_with_torch, "torch computed output 0 (aten."),
    ("08.serve", serve_replays_then_executes, "output 0 does not use a replay of cuda_graph"),
    ("08.serve", serve_one_shared_buffer, "outputs 0 and 1 share one buffer"),
    ("08.swap_weights", swap_with_torch, "the launch still reads the old weights"),
    ("08.capture_two", capture_without_binding, "the replay wrote neither h nor y"),
    ("08.capture_two", capture_only_up, "the replay ran mlp.up but y is still NaN"),
    ("08.serve", serve_without_copy, "every output is the result for the input that was in mlp.x before serve ran"),
    ("08.serve", serve_static_output, "an output is mlp.y itself"),
    ("08.serve", serve_eagerly, "the captured graph was replayed 0 time(s) for 4 requests"),
    ("08.swap_weights", swap_without_exec_update, "layer.cuda_graph now reads w_new, but the executable graph"),
    ("08.swap_weights", swap_by_copying, "the old weight buffer was overwritten"),
    ("08.swap_weights", swap_nothing, "the launch still reads the old weights"),
]


test_the_checker_rejects_a_typical_wrong_answer = rejects_each(GPU_CASES)


# ------------------------------------------------------------------ GPU: wrong answers of the issue-50 classes
def _warm_up(mlp, bind):
    """Both graphs run once on a side stream, bound with ``bind(stream)``; the caller's stream then waits."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        bind(side.cuda_stream)
        _run(mlp)
    torch.cuda.current_stream().wait_stream(side)


def capture_assigning_the_stream_attribute(mlp):
    """Streams: the handle's attribute assigned instead of cudnn.set_stream (cuDNN's handle stays unbound)."""
    def assign(stream):
        mlp.handle.stream = stream

    _warm_up(mlp, assign)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        assign(torch.cuda.current_stream().cuda_stream)
        _run(mlp)
    return graph


def capture_executing_up_before_binding(mlp):
    """Streams: mlp.up executed inside the capture while the handle is still on the warm-up stream, then bound."""
    cudnn = H.load_cudnn()
    _warm_up(mlp, lambda stream: cudnn.set_stream(mlp.handle, stream))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        mlp.up.execute(mlp.up_pack, mlp.workspace, handle=mlp.handle)
        cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)
        mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)
    return graph


_KEPT = []   # buffers a capture reads must outlive it


def capture_reading_a_copy_of_x(mlp):
    """Inputs read once: mlp.up captured on a copy of mlp.x taken before the capture."""
    cudnn = H.load_cudnn()
    x_uid = next(uid for uid, t in mlp.up_pack.items() if t is mlp.x)
    pack = dict(mlp.up_pack)
    pack[x_uid] = mlp.x.clone()
    _KEPT.append(pack)
    _warm_up(mlp, lambda stream: cudnn.set_stream(mlp.handle, stream))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        cudnn.set_stream(mlp.handle, torch.cuda.current_stream().cuda_stream)
        mlp.up.execute(pack, mlp.workspace, handle=mlp.handle)
        mlp.down.execute(mlp.down_pack, mlp.workspace, handle=mlp.handle)
    return graph


def capture_torch_ops_in_a_thread(mlp):
    """Work where the tracer does not look: the MLP as torch ops, captured in a worker thread."""
    import threading

    made = []
    worker = threading.Thread(target=lambda: made.append(capture_torch_ops(mlp)))
    worker.start()
    worker.join()
    return made[0]


def serve_on_a_side_stream_that_does_not_wait(mlp, cuda_graph, requests):
    """Streams: replays on a side stream that never waits for the caller's (the requests are not written yet)."""
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        outputs = X.solution("08.serve")(mlp, cuda_graph, requests)
    torch.cuda.current_stream().wait_stream(side)
    return outputs


def serve_on_a_side_stream_never_joined(mlp, cuda_graph, requests):
    """Streams: replays on a side stream the caller's stream never waits for."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        return X.solution("08.serve")(mlp, cuda_graph, requests)


def serve_by_torch_in_a_thread(mlp, cuda_graph, requests):
    """Work where the tracer does not look: one replay per request, each output torch's MLP in a worker thread."""
    import threading

    outputs = []

    def torch_mlp(request):
        outputs.append(nb08.mlp_reference(mlp, request)[1].to(mlp.dtype))

    for request in requests:
        mlp.x.copy_(request)
        cuda_graph.replay()
        worker = threading.Thread(target=torch_mlp, args=(request,))
        worker.start()
        worker.join()
    return outputs


def swap_only_once(layer, w_new):
    """Inputs read once: the first call repoints the graph; a later call on the same layer changes nothing."""
    if getattr(layer, "swapped", False):
        return layer.graph_exec
    layer.swapped = True
    return X.solution("08.swap_weights")(layer, w_new)


CLASSES = [
    ("08.capture_two", capture_assigning_the_stream_attribute,
     "the graph ran on stream 0, not on the capture stream: the handle's `stream` attribute says the capture stream, "
     "but cuDNN's handle was never bound to it"),
    ("08.capture_two", capture_executing_up_before_binding, "during the capture your executes ran on 2 streams"),
    ("08.capture_two", capture_reading_a_copy_of_x,
     "h after the replay is the result for the x that was in mlp.x when you captured"),
    ("08.capture_two", capture_torch_ops_in_a_thread,
     "h was not written by a cuDNN graph: nothing your code ran wrote it"),
    ("08.serve", serve_on_a_side_stream_that_does_not_wait, "serve read the requests before they were ready"),
    ("08.serve", serve_on_a_side_stream_never_joined, "output 0 was not ready on the stream serve was called on"),
    ("08.serve", serve_by_torch_in_a_thread, "output 0 does not use a replay of cuda_graph"),
    ("08.swap_weights", swap_only_once,
     "called a second time with another w_new (new values in a new buffer), the launch still read the first call's"),
]

test_the_checker_rejects_a_wrong_answer_of_each_class = rejects_each(CLASSES)


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) 08's checkers build cuDNN and CUDA graphs before they call the answer
DECIDED_BY = {
    "08.capture_two": "test_a_capture_of_torch_ops_is_refused_on_the_cpu",
    "08.serve": "test_outputs_from_torch_or_direct_executes_are_refused_on_the_cpu",
    "08.swap_weights": "test_swap_verdict_names_the_missing_step",
}
