"""Notebook 02's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the grading logic (which mistake a wrong output matches, unwritten outputs, the kernel count) and
the notebook's own skeleton cells. On a GPU: real answers, right and wrong, run through the checkers.
"""
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import helpers as H
import grader as X
from helpers.checking import rel_error, tolerance
from grader import nb02
from grader.provenance import tracing
from tests.support import StandInGraph, graded, refused, rejects_each, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
NHWC = torch.channels_last
EXERCISES = {"02.residual_block": nb02.residual_references, "02.folded_bn": nb02.folded_bn_references}


# ------------------------------------------------------------------ CPU: grading logic
@pytest.fixture(scope="module")
def cpu_tensors():
    return nb02.tensors(dtype=torch.bfloat16, device="cpu")


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_every_wrong_formula_is_far_from_the_right_one(cpu_tensors, key):
    """A check that cannot fail is a defect: on the checker's inputs each mistake is off by far more than
    the tolerance, so no wrong formula can pass."""
    right, wrong = EXERCISES[key](cpu_tensors)
    for mistake, formula in wrong.items():
        assert rel_error(formula, right) > 10 * tolerance(torch.bfloat16), mistake


@pytest.mark.parametrize("key", sorted(EXERCISES))
def test_grade_names_the_mistake_a_wrong_output_matches(cpu_tensors, key):
    right, wrong = EXERCISES[key](cpu_tensors)
    assert nb02.grade(right.to(torch.bfloat16), right, wrong) < tolerance(torch.bfloat16)
    for mistake, formula in wrong.items():
        with pytest.raises(X.Wrong) as caught:
            nb02.grade(formula.to(torch.bfloat16), right, wrong)
        assert str(caught.value).startswith(mistake + " (rel err "), str(caught.value)


def test_grade_rejects_unwritten_and_unknown_outputs(cpu_tensors):
    right, wrong = nb02.residual_references(cpu_tensors)
    out = right.to(torch.bfloat16)
    with pytest.raises(X.Wrong, match="y is still all NaN: nothing was written"):
        nb02.grade(torch.full_like(out, float("nan")), right, wrong)
    partly = out.clone()
    partly[0, 0, 0, :5] = float("nan")
    with pytest.raises(X.Wrong, match=r"^5 of \d+ elements of y were never written"):
        nb02.grade(partly, right, wrong)
    with pytest.raises(X.Wrong, match=r"^the output is wrong: rel err 2 against the reference"):
        nb02.grade(-out, right, wrong)
    one_bad = out.clone()
    one_bad[1, 2, 3, 4] += 3.0  # far outside the element-wise bound, too small to move the norm
    with pytest.raises(X.Wrong, match=r"^the output is wrong in places: 1 of \d+ elements outside"):
        nb02.grade(one_bad, right, wrong)


def test_one_kernel_or_one_line_saying_how_many():
    nb02.one_kernel(["sm90_xmma_fprop_implicit_gemm_bf16bf16"], "fix")
    two = ["sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32", "void at::native::vectorized_elementwise_kernel<8>(int)"]
    with pytest.raises(X.Wrong) as caught:
        nb02.one_kernel(two, "add the residual inside the graph")
    assert str(caught.value) == (
        "the output is correct but one call launched 2 kernels (sm90_xmma_fprop_implicit_gemm_bf16bf16_b, "
        "at::native::vectorized_elementwise_kerne); the point is one — add the residual inside the graph")
    with pytest.raises(X.Wrong, match="launched no GPU kernel"):
        nb02.one_kernel([], "fix")


def test_an_answer_that_returns_ellipsis_is_not_done(cpu_tensors):
    def residual_block(*tensors):
        return Ellipsis

    with pytest.raises(X.NotDone, match=r"residual_block returned \.\.\."):
        nb02._run(residual_block, ("x", "w", "b", "r", "y"), cpu_tensors)


def test_checker_inputs_are_reproducible_nhwc_and_poisoned():
    a = nb02.tensors(dtype=torch.bfloat16, device="cpu")
    b = nb02.tensors(dtype=torch.bfloat16, device="cpu")
    assert all(torch.equal(a[k], b[k]) for k in ("x", "w", "b", "r", "scale", "shift"))
    assert all(a[k].is_contiguous(memory_format=NHWC) for k in a)
    assert torch.isnan(a["y"]).all() and a["r"].shape == a["y"].shape
    assert (a["scale"] >= 0.25).all() and (a["scale"] <= 2.0).all()


# ------------------------------------------------------------------ CPU: the backward (02.dgrad_drelu)
@pytest.fixture(scope="module")
def dgrad_t():
    return nb02.dgrad_tensors(dtype=torch.bfloat16, device="cpu")


def test_dgrad_inputs_are_reproducible_nhwc_poisoned_and_c_is_not_k(dgrad_t):
    again = nb02.dgrad_tensors(dtype=torch.bfloat16, device="cpu")
    assert all(torch.equal(dgrad_t[k], again[k]) for k in ("dy", "w", "x"))
    assert all(dgrad_t[k].is_contiguous(memory_format=NHWC) for k in dgrad_t)
    n, c, hw, k = (nb02.DGRAD_SHAPE[d] for d in ("n", "c", "hw", "k"))
    assert c != k, "C == K would let a filter used without its transpose run"
    assert dgrad_t["dy"].shape == (n, k, hw, hw) and dgrad_t["w"].shape == (k, c, 3, 3)
    assert dgrad_t["x"].shape == dgrad_t["dx"].shape == (n, c, hw, hw) and torch.isnan(dgrad_t["dx"]).all()
    zeros = (dgrad_t["x"] == 0).float().mean().item()
    assert (dgrad_t["x"] >= 0).all() and 0.4 < zeros < 0.6, "x is a ReLU's output: about half exact zeros"


def test_dgrad_reference_is_autograds_input_gradient_masked_by_the_relu(dgrad_t):
    """The right answer is the recipe's autograd dx; dgrad is conv2d of dy with the filter transposed AND flipped."""
    from helpers.recipes import conv_backward

    right, _ = nb02.dgrad_drelu_references(dgrad_t)
    autograd_dx, _ = conv_backward.reference(dgrad_t)
    assert rel_error(autograd_dx, right) < 1e-5
    dy, w, x = (dgrad_t[k].double() for k in ("dy", "w", "x"))
    assert rel_error(F.conv2d(dy, w.transpose(0, 1).flip(2, 3), padding=1) * (x > 0), right) < 1e-12


def test_every_dgrad_wrong_formula_is_far_from_the_right_one(dgrad_t):
    right, wrong = nb02.dgrad_drelu_references(dgrad_t)
    assert len(wrong) == 5
    for mistake, formula in wrong.items():
        assert rel_error(formula, right) > 10 * tolerance(torch.bfloat16), mistake
    formulas = list(wrong.values())
    for i, a in enumerate(formulas):   # no wrong formula passes for another: each is named as itself
        for b in formulas[i + 1:]:
            assert rel_error(a, b) > 10 * tolerance(torch.bfloat16)


def test_grade_dx_names_each_mistake_and_an_unwritten_dx(dgrad_t):
    right, wrong = nb02.dgrad_drelu_references(dgrad_t)
    assert nb02.grade_dx(right.to(torch.bfloat16), right, wrong) < tolerance(torch.bfloat16)
    for mistake, formula in wrong.items():
        with pytest.raises(X.Wrong) as caught:
            nb02.grade_dx(formula.to(torch.bfloat16), right, wrong)
        assert str(caught.value).startswith(mistake + " (rel err "), str(caught.value)
    out = right.to(torch.bfloat16)
    with pytest.raises(X.Wrong, match="^dx is still all NaN: nothing was written into it — mark the graph's output "
                                      "with the dx you are given"):
        nb02.grade_dx(torch.full_like(out, float("nan")), right, wrong)
    with pytest.raises(X.Wrong, match=r"^dx has shape \(8, 32, 28, 28\), want \(8, 64, 28, 28\)"):
        nb02.grade_dx(dgrad_t["dy"], right, wrong)   # an answer that wrote the gradient in dy's shape
    with pytest.raises(X.Wrong, match=r"^dx is wrong: rel err 2 against the reference"):
        nb02.grade_dx(-out, right, wrong)


def _refused_on_the_cpu(answer) -> str:
    pytest.importorskip("cudnn")
    with X.grading_on("cpu"):
        with pytest.raises(X.Wrong) as caught:
            X.checker_for("02.dgrad_drelu")(answer)
    return str(caught.value)


def _mask(x):
    return x > 0


@pytest.mark.parametrize("answer, message", [
    (lambda dy, w, x, dx: dx.copy_(torch.nn.grad.conv2d_input(dx.shape, w, dy, padding=1) * _mask(x)),
     "torch computed dx (aten.convolution_backward"),
    (lambda dy, w, x, dx: dx.copy_(F.conv_transpose2d(dy, w, padding=1) * _mask(x)),
     "torch computed dx (aten.convolution"),
    (lambda dy, w, x, dx: dx.copy_(F.conv_transpose2d(dy, w, padding=1)), "the ReLU backward is missing"),
    (lambda dy, w, x, dx: dx.copy_(F.conv2d(dy, w.transpose(0, 1), padding=1) * _mask(x)),
     "the filter is transposed but not flipped"),
    (lambda dy, w, x, dx: None, "dx is still all NaN"),
], ids=["conv2d_input", "conv_transpose2d", "no_mask", "unflipped", "nothing_written"])
def test_the_dgrad_checker_refuses_torch_and_wrong_formulas_on_the_cpu(answer, message):
    got = _refused_on_the_cpu(answer)
    assert got.startswith(message), got


def _dgrad_stand_in(*, masked=True, reads_x=True, kind="CONV_DGRAD"):
    """A stand-in graph (torch inside) writing dx = conv_dgrad(dy, w), masked by x > 0 when ``masked``."""
    def fn(dy, w, x=None):
        dgrad = F.conv_transpose2d(dy, w, padding=1)
        return {"dx": dgrad * (x > 0) if masked else dgrad}

    inputs = {"dy": 1, "w": 2, **({"x": 3} if reads_x else {})}
    return StandInGraph(fn, inputs, {"dx": 4}, kind=kind)


def _scratch_then(torch_step):
    """The dgrad (a stand-in graph) into a scratch tensor, then ``torch_step(scratch, x, dx)``."""
    def answer(dy, w, x, dx):
        scratch = torch.empty_like(dx)
        _dgrad_stand_in(masked=False, reads_x=False).execute({1: dy, 2: w, 4: scratch})
        torch_step(scratch, x, dx)
    return answer


def _dgrad_traced(t, answer):
    t = dict(t, dx=torch.full_like(t["dx"], float("nan")))
    with tracing(classes=(StandInGraph,), cuda_graph_classes=(), cache_classes=()) as trace:
        for name in ("dy", "w", "x", "dx"):
            trace.input(name, t[name])
        with trace.answer():
            answer(t["dy"], t["w"], t["x"], t["dx"])
        nb02.require_fused(trace, t, ("dy", "w", "x", "dx"), out="dx", kinds=("CONV_DGRAD",))


def _dgrad_then_mul_(dy, w, x, dx):
    _dgrad_stand_in(masked=False, reads_x=False).execute({1: dy, 2: w, 4: dx})
    dx.mul_(x > 0)


@pytest.mark.parametrize("answer, message", [
    (_dgrad_then_mul_, "torch changed dx after your cuDNN graph wrote it (aten.mul_): let the graph's output stand"),
    (_scratch_then(lambda scratch, x, dx: torch.mul(scratch, x > 0, out=dx)), "torch computed part of dx (aten.gt"),
    (_scratch_then(lambda scratch, x, dx: dx.copy_(torch.where(x > 0, scratch, 0.0))), "torch computed part of dx"),
    (lambda dy, w, x, dx: _dgrad_stand_in(kind="CONV_FPROP").execute({1: dy, 2: w, 3: x, 4: dx}),
     "the cuDNN graph that wrote dx has no conv_dgrad node (its nodes: CONV_FPROP)"),
    (lambda dy, w, x, dx: _dgrad_stand_in(masked=False, reads_x=False).execute({1: dy, 2: w, 4: dx}),
     "dx does not depend on the x you were given"),
], ids=["dgrad_then_mul_", "mul_out", "where", "fprop_graph", "x_unread"])
def test_dx_must_come_from_one_dgrad_graph_that_read_dy_w_and_x(dgrad_t, answer, message):
    """The point: the ReLU backward in dgrad's epilogue. A cuDNN dgrad with torch's mask after it has the right
    numbers and only cuDNN's convolution, yet fails, naming the torch operator."""
    t = {k: v.float() for k, v in dgrad_t.items()}
    _dgrad_traced(t, lambda dy, w, x, dx: _dgrad_stand_in().execute({1: dy, 2: w, 3: x, 4: dx}))   # the right one
    with pytest.raises(X.Wrong) as caught:
        _dgrad_traced(t, answer)
    assert str(caught.value).startswith(message), str(caught.value)


# ------------------------------------------------------------------ CPU: near misses, the graph run again, a second call
@pytest.mark.parametrize("key, pre_of", [
    ("02.residual_block", lambda t: nb02._conv64(t) + t["b"].double() + t["r"].double()),
    ("02.folded_bn", lambda t: nb02._conv64(t) * t["scale"].double() + t["shift"].double()),
])
def test_the_rerun_inputs_separate_a_leaky_relu_that_the_first_inputs_let_pass(key, pre_of):
    """On the first call's inputs half the pre-activations are negative, and a leaky ReLU (slope 0.01) is about 1 %
    off: inside bf16's tolerance. The checker's own inputs for running the graph again shift b (or shift) so that
    most are negative: the same leak is off by about 20 %, and is named."""
    first = nb02.tensors(dtype=torch.bfloat16, device="cpu")
    again = nb02.rerun_tensors(dtype=torch.bfloat16, device="cpu")
    assert rel_error(F.leaky_relu(pre_of(first), 0.01), torch.relu(pre_of(first))) < tolerance(torch.bfloat16)
    pre = pre_of(again)
    assert rel_error(F.leaky_relu(pre, 0.01), torch.relu(pre)) > 10 * tolerance(torch.bfloat16)
    assert 0.01 < (pre > 0).double().mean() < 0.1, "some positive values remain: the ReLU's pass side is graded too"
    references = EXERCISES[key]
    with pytest.raises(X.Wrong, match=r"^the ReLU lets negative values through: they come out times 0.01 \(a leaky "
                                      r"ReLU\) — use graph.relu with no negative_slope$"):
        nb02.grade_fused(key, F.leaky_relu(pre, 0.01).to(torch.bfloat16), again, references, nb02.grade)
    right, _ = references(again)
    assert nb02.grade_fused(key, right.to(torch.bfloat16), again, references, nb02.grade) < tolerance(torch.bfloat16)


def test_the_references_come_from_a_copy_taken_before_the_answer_ran(cpu_tensors):
    """An answer that zeroes r after leaving it out of its output must not make the reference agree with it."""
    t = {k: v.clone() for k, v in cpu_tensors.items()}
    first = nb02.private_copy(t, "y")
    t["r"].zero_()   # what such an answer would do to its argument
    assert torch.equal(first["r"], cpu_tensors["r"]) and "y" not in first


def test_a_second_call_names_the_first_calls_inputs_it_still_reads(cpu_tensors):
    references, inputs = nb02.residual_references, ("x", "w", "b", "r")
    first = nb02.private_copy(cpu_tensors, "y")
    now = nb02.private_copy(nb02.tensors(dtype=torch.bfloat16, device="cpu", seed=nb02.SECOND_SEED), "y")
    cases = [(inputs, "called a second time with new x, w, b and r, your function wrote the first call's y again: it "
                      "still reads the first call's inputs (a graph or copies kept from the first call) — bind the "
                      "tensors of each call in the variant pack"),
             (("w",), "called a second time with new x, w, b and r, your y followed the new x, b and r but not the "
                      "new w: it still reads the first call's w (kept from the first call) — bind every tensor of "
                      "each call in the variant pack"),
             (("w", "b", "r"), "called a second time with new x, w, b and r, your y followed the new x but not the "
                               "new w, b and r: it still reads the first call's w, b and r")]
    for stale, message in cases:
        out = references({**now, **{n: first[n] for n in stale}})[0].to(torch.bfloat16)
        found = nb02.stale_inputs(out, now, first, inputs, references)
        assert found == stale
        assert nb02.stale_message("y", found, inputs).startswith(message)
    assert nb02.stale_inputs(references(now)[0].neg().to(torch.bfloat16), now, first, inputs, references) is None


def _cached(build_pack):
    """An answer (torch, on the CPU) that keeps what ``build_pack(x, w, b, r)`` returns on its first call and
    computes the residual block from it and the tensors of each call: the stand-in of a cached graph."""
    kept = {}

    def residual_block(x, w, b, r, y):
        held = kept.setdefault("pack", build_pack(x, w, b, r))
        now = dict(x=x, w=w, b=b, r=r)
        x, w, b, r = (held.get(n, now[n]) for n in "xwbr")
        y.copy_(torch.relu(F.conv2d(x, w, padding=1) + b + r))
    return residual_block


@pytest.mark.parametrize("answer, message", [
    (_cached(lambda x, w, b, r: dict(x=x.clone(), w=w.clone(), b=b.clone(), r=r.clone())),
     "called a second time with new x, w, b and r, your function wrote the first call's y again"),
    (_cached(lambda x, w, b, r: dict(w=w, b=b)), "called a second time with new x, w, b and r, your y followed the "
                                                 "new x and r but not the new w and b"),
    (lambda x, w, b, r, y: y.copy_(torch.relu(F.conv2d(x, w, padding=1) + b + r) * (1 if x.sum() > 0 else 0.5)),
     "on a second call with new x, w, b and r: the output is wrong"),
], ids=["copies_taken_at_the_first_call", "w_and_b_kept", "right_once"])
def test_the_second_call_grades_new_values_at_new_addresses(answer, message):
    """The checker's second call (on the CPU: no kernel count) gives new values in new buffers: an answer that keeps
    the first call's tensors, or copies of them, writes a stale y and is told which it still reads."""
    first = nb02.private_copy(nb02.tensors(dtype=torch.float32, device="cpu"), "y")
    answer(*(nb02.tensors(dtype=torch.float32, device="cpu")[n] if n != "y" else torch.empty(8, 64, 28, 28)
             for n in ("x", "w", "b", "r", "y")))   # the first call, as the checker makes it
    with X.grading_on("cpu"), pytest.raises(X.Wrong) as caught:
        nb02._second_call(answer, "02.residual_block", ("x", "w", "b", "r", "y"), "y", first,
                          nb02.residual_references, nb02.tensors, nb02.grade, count=False)
    assert str(caught.value).startswith(message), str(caught.value)


def _dgrad_then_in_a_thread(step):
    """An answer whose stand-in graph writes the unmasked dgrad into dx (binding x, read by nothing), then lets a
    worker thread, which the tracer does not see, apply ``step(dx, x)``."""
    import threading

    def answer(dy, w, x, dx):
        _dgrad_stand_in(masked=False, reads_x=True).execute({1: dy, 2: w, 3: x, 4: dx})
        worker = threading.Thread(target=step, args=(dx, x))
        worker.start()
        worker.join()
    return answer


def _zeroed_plus_outside(dy, w, x, dx):
    """The right node times zero, plus a result computed outside the graph (an input, uid 5, made by torch with the
    tracer paused, as numpy on the host would): the stand-in writes 0 * dgrad * mask + z."""
    def fn(dy, w, x, z):
        return {"dx": 0 * F.conv_transpose2d(dy, w, padding=1) * (x > 0) + z}

    import threading
    made = []
    worker = threading.Thread(target=lambda: made.append((F.conv_transpose2d(dy, w, padding=1) * (x > 0))))
    worker.start()
    worker.join()
    StandInGraph(fn, {"dy": 1, "w": 2, "x": 3, "z": 5}, {"dx": 4}, kind="CONV_DGRAD").execute(
        {1: dy, 2: w, 3: x, 5: made[0], 4: dx})


@pytest.mark.parametrize("answer, message", [
    (_dgrad_then_in_a_thread(lambda dx, x: dx.mul_(x > 0)),
     r"^your graph, run again by the checker on new dy, w and x \(bound by UID, your code not called\), does not "
     r"compute dx by itself: the ReLU backward is missing: dx is conv_dgrad\(dy, w\) alone.* — work done after the "
     r"graph ran \(on the host, in another thread, by torch\) does not count: do all of it inside the graph$"),
    (_zeroed_plus_outside,
     r"^your graph, run again by the checker on new dy, w and x .*does not compute dx by itself: dx is wrong: rel err "
     r".* — it reads 1 tensor you made yourself, which did not change with the inputs: a result computed outside "
     r"the graph \(on the host, in another thread\), or a copy of an input, does not count$"),
], ids=["masked_in_a_thread", "zero_times_the_node_plus_a_result_from_outside"])
def test_the_graph_that_wrote_dx_is_run_again_on_the_checkers_own_inputs(dgrad_t, answer, message):
    """Work the tracer cannot see (a worker thread; a result made outside and fed in as an input, the graph's own
    node multiplied by zero) gives the right dx and passes the trace; run again by UID on new inputs, the graph
    alone does not compute dx."""
    t = {k: v.float() for k, v in dgrad_t.items()}
    names = ("dy", "w", "x", "dx")

    def traced(answer):
        u = dict(t, dx=torch.full_like(t["dx"], float("nan")))
        with tracing(dict((n, u[n]) for n in names[:3]), classes=(StandInGraph,), cuda_graph_classes=(),
                     cache_classes=()) as trace:
            with trace.answer():
                answer(*(u[n] for n in names))
        nb02.grade_dx(u["dx"], *nb02.dgrad_drelu_references(u))
        nb02.require_fused(trace, u, names, out="dx", kinds=("CONV_DGRAD",))   # the trace is satisfied
        with X.grading_on("cpu"):
            return nb02.graph_again(trace, "02.dgrad_drelu", u, names, "dx", nb02.dgrad_drelu_references,
                                    nb02.dgrad_rerun_tensors, nb02.grade_dx)

    assert traced(lambda dy, w, x, dx: _dgrad_stand_in().execute({1: dy, 2: w, 3: x, 4: dx})) < 1e-3
    with pytest.raises(X.Wrong) as caught:
        traced(answer)
    assert re.match(message, str(caught.value)), str(caught.value)


# ------------------------------------------------------------------ CPU: the notebook's cells


# ------------------------------------------------------------------ GPU: real answers through the checkers
def _graph(x):
    from helpers.recipes import new_graph

    g = new_graph(x.dtype)
    return g, H.GraphIO(g, dtype=x.dtype)


def _conv(g, io, x, w):
    return g.conv_fprop(io.input("x", x, layout=NHWC), io.input("w", w, layout=NHWC),
                        padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="conv")


def _run_graph(g, io):
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())


def residual_after_relu(x, w, b, r, y):
    from helpers.recipes import conv_bias_relu

    g, io = conv_bias_relu.graph(dict(x=x, w=w, b=b, y=y))
    _run_graph(g, io)
    y.add_(r)


def residual_missing(x, w, b, r, y):
    from helpers.recipes import conv_bias_relu

    g, io = conv_bias_relu.graph(dict(x=x, w=w, b=b, y=y))
    _run_graph(g, io)


def relu_in_torch(x, w, b, r, y):
    """Right numbers, but the ReLU is a second kernel."""
    g, io = _graph(x)
    summed = g.add(g.bias(_conv(g, io, x, w), io.input("b", b, layout=NHWC)), io.input("r", r, layout=NHWC))
    io.output("y", summed, y)
    _run_graph(g, io)
    y.relu_()


def shift_then_scale(x, w, scale, shift, y):
    g, io = _graph(x)
    shifted = g.bias(_conv(g, io, x, w), io.input("shift", shift, layout=NHWC))
    io.output("y", g.relu(g.scale(shifted, io.input("scale", scale, layout=NHWC))), y)
    _run_graph(g, io)


def scale_folded_into_weights_by_torch(x, w, scale, shift, y):
    """Right numbers (up to rounding), but scaling w is a torch kernel before the graph's."""
    from helpers.recipes import conv_bias_relu

    w_scaled = (w * scale.reshape(-1, 1, 1, 1)).contiguous(memory_format=NHWC)
    g, io = conv_bias_relu.graph(dict(x=x, w=w_scaled, b=shift, y=y))
    _run_graph(g, io)


def writes_a_new_tensor(x, w, b, r, y):
    y = torch.empty_like(y)
    residual_block = X.solution("02.residual_block")
    residual_block(x, w, b, r, y)


# ---- who did the work: torch (its own cuDNN convolution op included), the CPU, a cuDNN result thrown away or copied
def block_by_torchs_cudnn_op(x, w, b, r, y):
    """One kernel, right numbers, no frontend graph: torch's own fused cuDNN conv + add + ReLU."""
    y.copy_(torch.cudnn_convolution_add_relu(x, w, r, 1.0, b.reshape(-1), (1, 1), (1, 1), (1, 1), 1))


def block_by_torch(x, w, b, r, y):
    y.copy_(torch.relu(F.conv2d(x, w, b.reshape(-1), padding=1) + r))


def block_on_the_cpu(x, w, b, r, y):
    cpu = [t.float().cpu() for t in (x, w, b, r)]
    y.copy_(torch.relu(F.conv2d(cpu[0], cpu[1], padding=1) + cpu[2] + cpu[3]).to(y.device, y.dtype))


def block_graph_thrown_away(x, w, b, r, y):
    X.solution("02.residual_block")(x, w, b, r, torch.empty_like(y))
    block_by_torch(x, w, b, r, y)


def block_graph_copied_in(x, w, b, r, y):
    scratch = torch.empty_like(y)
    X.solution("02.residual_block")(x, w, b, r, scratch)
    y.copy_(scratch)


def bn_by_torch(x, w, scale, shift, y):
    y.copy_(torch.relu(F.conv2d(x, w, padding=1) * scale + shift))


def bn_on_the_cpu(x, w, scale, shift, y):
    cpu = [t.float().cpu() for t in (x, w, scale, shift)]
    y.copy_(torch.relu(F.conv2d(cpu[0], cpu[1], padding=1) * cpu[2] + cpu[3]).to(y.device, y.dtype))


def bn_graph_copied_in(x, w, scale, shift, y):
    scratch = torch.empty_like(y)
    X.solution("02.folded_bn")(x, w, scale, shift, scratch)
    y.copy_(scratch)


# ---- 02.dgrad_drelu: the backward, right and wrong
def _dgrad(g, io, dy, w):
    return g.conv_dgrad(io.input("dy", dy, layout=NHWC), io.input("w", w, layout=NHWC),
                        padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="dgrad")


def dgrad_without_the_mask(dy, w, x, dx):
    g, io = _graph(dy)
    io.output("dx", _dgrad(g, io, dy, w), dx)
    _run_graph(g, io)


def dgrad_then_relu(dy, w, x, dx):
    """The mask from dgrad's own output: relu where relu_backward with x belongs."""
    g, io = _graph(dy)
    io.output("dx", g.relu(_dgrad(g, io, dy, w)), dx)
    _run_graph(g, io)


def _fprop_then_mask(dy, w_t, x, dx):
    """dx = relu_backward(conv_fprop(dy, w_t), x) as one graph: a forward convolution standing in for the dgrad."""
    g, io = _graph(dy)
    conv = g.conv_fprop(io.input("dy", dy, layout=NHWC), io.input("w", w_t, layout=NHWC),
                        padding=[1, 1], stride=[1, 1], dilation=[1, 1])
    io.output("dx", g.relu_backward(conv, io.input("x", x, layout=NHWC)), dx)
    _run_graph(g, io)


def fprop_with_the_filter_transposed(dy, w, x, dx):
    """conv_fprop of dy with w's K and C swapped (a copy: no arithmetic), then the right mask: the taps not flipped."""
    _fprop_then_mask(dy, w.transpose(0, 1).contiguous(memory_format=NHWC), x, dx)


def fprop_with_the_filter_flipped_by_torch(dy, w, x, dx):
    """Right numbers: conv_fprop of dy with w transposed and flipped, but the flip is torch's and no dgrad is in it."""
    _fprop_then_mask(dy, w.transpose(0, 1).flip(2, 3).contiguous(memory_format=NHWC), x, dx)


def dgrad_then_mask_in_torch(dy, w, x, dx):
    """Right numbers, cuDNN's dgrad, but the ReLU backward is a second (torch) kernel."""
    dgrad_without_the_mask(dy, w, x, dx)
    dx.mul_(x > 0)


def dgrad_by_torch(dy, w, x, dx):
    dx.copy_(torch.nn.grad.conv2d_input(dx.shape, w, dy, padding=1) * (x > 0))


def dgrad_on_the_cpu(dy, w, x, dx):
    cpu = [t.float().cpu() for t in (dy, w, x)]
    dx.copy_((F.conv_transpose2d(cpu[0], cpu[1], padding=1) * (cpu[2] > 0)).to(dx.device, dx.dtype))


def dgrad_graph_copied_in(dy, w, x, dx):
    scratch = torch.empty_like(dx)
    X.solution("02.dgrad_drelu")(dy, w, x, scratch)
    dx.copy_(scratch)


def dgrad_into_a_new_tensor(dy, w, x, dx):
    X.solution("02.dgrad_drelu")(dy, w, x, torch.empty_like(dx))


# Wrong answers cuDNN may also refuse to build (then the learner reads their own exception, in one line).
def relu_backward_arguments_swapped(dy, w, x, dx):
    g, io = _graph(dy)
    io.output("dx", g.relu_backward(io.input("x", x, layout=NHWC), _dgrad(g, io, dy, w)), dx)
    _run_graph(g, io)


def mask_by_a_second_graph(dy, w, x, dx):
    """Two cuDNN graphs: dgrad into a scratch tensor, then relu_backward alone."""
    scratch = torch.empty_like(dx)
    dgrad_without_the_mask(dy, w, x, scratch)
    g, io = _graph(dy)
    io.output("dx", g.relu_backward(io.input("dgrad", scratch, layout=NHWC), io.input("x", x, layout=NHWC)), dx)
    _run_graph(g, io)


def dgrad_by_torchs_cudnn_op(dy, w, x, dx):
    """torch's own cuDNN transposed convolution (dgrad), masked by torch."""
    dgrad = torch.cudnn_convolution_transpose(dy, w, (1, 1), (0, 0), (1, 1), (1, 1), 1, False, False, False)
    dx.copy_(dgrad * (x > 0))


# ---- work done where the tracer does not look: numpy on the host, torch in a worker thread, a node times zero
def _host(t):
    """A tensor's values in a float64 numpy array on the host (through copies only)."""
    return t.detach().cpu().double().numpy()   # to the host first: no cast kernel on the GPU


def _numpy_conv(x, w):
    """conv2d(x, w, padding=1) in numpy (float64, logical NCHW): nine shifted matrix products."""
    import numpy as np

    n, c, h, wd = x.shape
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    out = np.zeros((n, w.shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            out += np.einsum("kc,nchw->nkhw", w[:, :, i, j], padded[:, :, i:i + h, j:j + wd], optimize=True)
    return out


def _numpy_dgrad(dy, w):
    """conv_dgrad(dy, w) in numpy: the convolution of dy with w's K and C swapped and its taps flipped."""
    return _numpy_conv(dy, w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])


def _in_a_thread(work):
    """Run ``work()`` in a worker thread and wait for it: torch there is not seen by the checker's tracer."""
    import threading

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


def _written_in_a_thread(out, values):
    """Write the host array ``values`` into ``out`` from a worker thread (a copy to the GPU, no kernel)."""
    def work():
        out.copy_(torch.from_numpy(values).to(out.dtype).contiguous(memory_format=NHWC))
    _in_a_thread(work)


def _from_host(values, like):
    """The host array ``values`` as a tensor like ``like`` (dtype, NHWC, device), through copies only."""
    return torch.from_numpy(values).to(like.dtype).contiguous(memory_format=NHWC).to(like.device)


def _zero_like_k(y):
    return torch.zeros(1, y.shape[1], 1, 1, device=y.device, dtype=y.dtype).contiguous(memory_format=NHWC)


def residual_relu_on_the_host(x, w, b, r, y):
    """The graph writes conv + b + r; numpy takes the ReLU on the host and a worker thread writes it into y."""
    g, io = _graph(x)
    io.output("y", g.add(g.bias(_conv(g, io, x, w), io.input("b", b, layout=NHWC)), io.input("r", r, layout=NHWC)),
              y)
    _run_graph(g, io)
    _written_in_a_thread(y, _host(y).clip(min=0))


def residual_node_times_zero_plus_numpy(x, w, b, r, y):
    """The whole block in numpy, fed in as z; the graph's convolution multiplied by zero: relu(0·conv + b + r + z)
    with z = block − b − r."""
    block = (_numpy_conv(_host(x), _host(w)) + _host(b) + _host(r)).clip(min=0)
    z = _from_host(block - _host(b) - _host(r), y)
    g, io = _graph(x)
    zeroed = g.scale(_conv(g, io, x, w), io.input("zero", _zero_like_k(y), layout=NHWC))
    summed = g.add(g.add(g.bias(zeroed, io.input("b", b, layout=NHWC)), io.input("r", r, layout=NHWC)),
                   io.input("z", z, layout=NHWC))
    io.output("y", g.relu(summed), y)
    _run_graph(g, io)


def bn_relu_on_the_host(x, w, scale, shift, y):
    g, io = _graph(x)
    scaled = g.scale(_conv(g, io, x, w), io.input("scale", scale, layout=NHWC))
    io.output("y", g.bias(scaled, io.input("shift", shift, layout=NHWC)), y)
    _run_graph(g, io)
    _written_in_a_thread(y, _host(y).clip(min=0))


def bn_node_times_zero_plus_numpy(x, w, scale, shift, y):
    layer = (_numpy_conv(_host(x), _host(w)) * _host(scale) + _host(shift)).clip(min=0)
    z = _from_host(layer, y)
    g, io = _graph(x)
    folded = g.bias(g.scale(_conv(g, io, x, w), io.input("scale", scale, layout=NHWC)),
                    io.input("shift", shift, layout=NHWC))
    zeroed = g.mul(folded, io.input("zero", _zero_like_k(y), layout=NHWC))
    io.output("y", g.relu(g.add(zeroed, io.input("z", z, layout=NHWC))), y)
    _run_graph(g, io)


def dgrad_half_the_batch_on_the_host(dy, w, x, dx):
    """The reference graph on the first half of the batch (views at dy's, x's and dx's own addresses); numpy computes
    the other half on the host and a worker thread writes it."""
    half = dy.shape[0] // 2
    g, io = _graph(dy)
    mask = io.input("x", x[:half], layout=NHWC)
    io.output("dx", g.relu_backward(_dgrad(g, io, dy[:half], w), mask), dx[:half])
    _run_graph(g, io)
    _written_in_a_thread(dx[half:], _numpy_dgrad(_host(dy[half:]), _host(w)) * (_host(x[half:]) > 0))


def dgrad_node_times_zero_plus_numpy(dy, w, x, dx):
    """relu_backward(0·dgrad + z, x) with z the masked dgrad from numpy."""
    z = _from_host(_numpy_dgrad(_host(dy), _host(w)) * (_host(x) > 0), dx)
    g, io = _graph(dy)
    zeroed = g.scale(_dgrad(g, io, dy, w), io.input("zero", _zero_like_k(dx), layout=NHWC))
    io.output("dx", g.relu_backward(g.add(zeroed, io.input("z", z, layout=NHWC)), io.input("x", x, layout=NHWC)), dx)
    _run_graph(g, io)


# ---- inputs read once: a graph cached on the first call, bound to that call's tensors (or to copies of them)
def _cached_answer(name: str, key: str, names: tuple, rebound: tuple, copies: bool = False):
    """An answer to ``key`` that runs the reference graph built on its first call and, on later calls, rebinds only
    ``rebound`` (the output among them); ``copies``: the graph was built on copies taken at the first call."""
    kept = {}

    def answer(*tensors):
        given = dict(zip(names, tensors))
        if "graph" not in kept:
            built = {n: (t.clone() if copies and n in names[:-1] else t) for n, t in given.items()}
            kept["graph"] = _reference_graph(key, built)
        g, io = kept["graph"]
        g.execute(io.pack(**{n: given[n] for n in rebound}), H.workspace_for(g), handle=H.get_handle())

    answer.__name__ = name
    return answer


def _reference_graph(key, t):
    """The reference answer's graph for ``key`` on the tensors ``t``, built: (graph, io)."""
    if key == "02.dgrad_drelu":
        g, io = _graph(t["dy"])
        io.output("dx", g.relu_backward(_dgrad(g, io, t["dy"], t["w"]), io.input("x", t["x"], layout=NHWC)), t["dx"])
    elif key == "02.residual_block":
        g, io = _graph(t["x"])
        pre = g.add(g.bias(_conv(g, io, t["x"], t["w"]), io.input("b", t["b"], layout=NHWC)),
                    io.input("r", t["r"], layout=NHWC))
        io.output("y", g.relu(pre), t["y"])
    else:
        g, io = _graph(t["x"])
        pre = g.bias(g.scale(_conv(g, io, t["x"], t["w"]), io.input("scale", t["scale"], layout=NHWC)),
                     io.input("shift", t["shift"], layout=NHWC))
        io.output("y", g.relu(pre), t["y"])
    H.build(g)
    return g, io


RESIDUAL, BN, DGRAD = ("x", "w", "b", "r", "y"), ("x", "w", "scale", "shift", "y"), ("dy", "w", "x", "dx")
AGAIN = "your graph, run again by the checker on new {} (bound by UID, your code not called), does not compute {} by " \
        "itself: "
SECOND = "called a second time with new {}, your "
READ_ONCE = [
    ("02.residual_block", _cached_answer("residual_graph_cached_rebinding_only_y", "02.residual_block", RESIDUAL,
                                         ("y",)), SECOND.format("x, w, b and r") + "function wrote the first call's y"),
    ("02.residual_block", _cached_answer("residual_graph_cached_rebinding_x_and_y", "02.residual_block", RESIDUAL,
                                         ("x", "y")),
     SECOND.format("x, w, b and r") + "y followed the new x but not the new w, b and r: it still reads the first "
                                      "call's w, b and r"),
    ("02.residual_block", _cached_answer("residual_graph_on_copies_taken_at_the_first_call", "02.residual_block",
                                         RESIDUAL, ("x", "y"), copies=True), AGAIN.format("x, w, b and r", "y")),
    ("02.folded_bn", _cached_answer("bn_graph_cached_rebinding_only_y", "02.folded_bn", BN, ("y",)),
     SECOND.format("x, w, scale and shift") + "function wrote the first call's y"),
    ("02.folded_bn", _cached_answer("bn_graph_cached_rebinding_x_shift_and_y", "02.folded_bn", BN,
                                    ("x", "shift", "y")),
     SECOND.format("x, w, scale and shift") + "y followed the new x and shift but not the new w and scale"),
    ("02.folded_bn", _cached_answer("bn_graph_on_copies_taken_at_the_first_call", "02.folded_bn", BN,
                                    ("x", "y"), copies=True), AGAIN.format("x, w, scale and shift", "y")),
    ("02.dgrad_drelu", _cached_answer("dgrad_graph_cached_rebinding_only_dx", "02.dgrad_drelu", DGRAD, ("dx",)),
     SECOND.format("dy, w and x") + "function wrote the first call's dx"),
    ("02.dgrad_drelu", _cached_answer("dgrad_graph_cached_rebinding_dy_and_dx", "02.dgrad_drelu", DGRAD,
                                      ("dy", "dx")),
     SECOND.format("dy, w and x") + "dx followed the new dy but not the new w and x"),
    ("02.dgrad_drelu", _cached_answer("dgrad_graph_on_copies_taken_at_the_first_call", "02.dgrad_drelu", DGRAD,
                                      ("dy", "dx"), copies=True), AGAIN.format("dy, w and x", "dx")),
]
OUTSIDE_THE_TRACE = [
    ("02.residual_block", residual_relu_on_the_host,
     AGAIN.format("x, w, b and r", "y") + "the ReLU is missing: the output is conv + b + r (rel err "),
    ("02.residual_block", residual_node_times_zero_plus_numpy,
     AGAIN.format("x, w, b and r", "y") + "the output is wrong: rel err "),
    ("02.folded_bn", bn_relu_on_the_host,
     AGAIN.format("x, w, scale and shift", "y") + "the ReLU is missing: the output is conv * scale + shift (rel err "),
    ("02.folded_bn", bn_node_times_zero_plus_numpy, AGAIN.format("x, w, scale and shift", "y") + "the output is wrong"),
    ("02.dgrad_drelu", dgrad_half_the_batch_on_the_host,
     AGAIN.format("dy, w and x", "dx") + "200704 of 401408 elements of dx were never written (still NaN)"),
    ("02.dgrad_drelu", dgrad_node_times_zero_plus_numpy, AGAIN.format("dy, w and x", "dx") + "dx is wrong: rel err "),
]


@requires_gpu
@pytest.mark.parametrize("key, answer, message", OUTSIDE_THE_TRACE, ids=[c[1].__name__ for c in OUTSIDE_THE_TRACE])
def test_work_the_tracer_cannot_see_fails_when_the_graph_runs_again_alone(key, answer, message):
    """The right y, one kernel, a graph with every node reading every input: only running that graph again on the
    checker's own inputs shows that it does not compute y by itself (the rest was numpy, a thread, or fed in)."""
    got = refused(key, answer)
    if answer is dgrad_node_times_zero_plus_numpy and got.startswith("your code raised"):
        pytest.skip(f"cuDNN refuses a pointwise chain between dgrad and its ReLU backward here: {got}")
    assert got.startswith(message), got
    if "times_zero" in answer.__name__:
        assert re.search(r" — it reads \d tensors? you made yourself", got), got


@requires_gpu
def test_a_leaky_relu_in_the_graph_is_named_on_the_checkers_own_inputs():
    """1 % off on the first call's inputs (inside bf16's tolerance); far off on the checker's, where most
    pre-activations are negative."""
    def residual_block(x, w, b, r, y):
        g, io = _graph(x)
        pre = g.add(g.bias(_conv(g, io, x, w), io.input("b", b, layout=NHWC)), io.input("r", r, layout=NHWC))
        io.output("y", g.relu(pre, negative_slope=0.01), y)
        _run_graph(g, io)

    got = refused("02.residual_block", residual_block)
    named = "the ReLU lets negative values through: they come out times 0.01 (a leaky ReLU)"
    # bf16: 1 % is inside the tolerance on the first call's inputs, so the checker's own run names it; fp16 (a T4,
    # rehearsed as COURSE_GPU=t4 on the H100) is tight enough for the first call to name it already
    first = "" if H.working_dtype() == torch.float16 else AGAIN.format("x, w, b and r", "y")
    assert got.startswith(first + named), got


test_an_answer_that_reads_its_inputs_once_fails_the_second_call = rejects_each(READ_ONCE)


WRONG = [
    ("02.residual_block", block_by_torch, "torch computed y (aten.convolution"),
    ("02.residual_block", block_on_the_cpu, "torch computed y (aten.convolution (on the CPU)"),
    ("02.residual_block", block_graph_thrown_away, "torch computed y (aten.convolution"),
    ("02.residual_block", block_graph_copied_in, "y holds a copy of a cuDNN result (aten.copy_)"),
    ("02.folded_bn", bn_by_torch, "torch computed y (aten.convolution"),
    ("02.folded_bn", bn_on_the_cpu, "torch computed y (aten.convolution (on the CPU)"),
    ("02.folded_bn", bn_graph_copied_in, "y holds a copy of a cuDNN result (aten.copy_)"),
    ("02.residual_block", residual_after_relu, "the residual is added after the ReLU"),
    ("02.residual_block", residual_missing, "the output ignores the residual r"),
    ("02.residual_block", relu_in_torch, "torch changed y after your cuDNN graph wrote it (aten.relu_)"),
    ("02.residual_block", writes_a_new_tensor, "y is still all NaN"),
    ("02.folded_bn", shift_then_scale, "scale and shift are applied in the wrong order"),
    ("02.folded_bn", scale_folded_into_weights_by_torch, "torch computed part of y (aten.mul)"),
    ("02.dgrad_drelu", dgrad_without_the_mask, "the ReLU backward is missing"),
    ("02.dgrad_drelu", dgrad_then_relu, "the mask comes from dgrad's output, not from x"),
    ("02.dgrad_drelu", fprop_with_the_filter_transposed, "the filter is transposed but not flipped"),
    ("02.dgrad_drelu", fprop_with_the_filter_flipped_by_torch, "torch computed part of dx (aten.flip)"),
    ("02.dgrad_drelu", dgrad_then_mask_in_torch, "torch changed dx after your cuDNN graph wrote it (aten.mul_)"),
    ("02.dgrad_drelu", dgrad_by_torch, "torch computed dx (aten.convolution_backward"),
    ("02.dgrad_drelu", dgrad_on_the_cpu, "torch computed dx (aten.convolution (on the CPU)"),
    ("02.dgrad_drelu", dgrad_graph_copied_in, "dx holds a copy of a cuDNN result (aten.copy_)"),
    ("02.dgrad_drelu", dgrad_into_a_new_tensor, "dx is still all NaN"),
]
# (answer, what the checker says if cuDNN builds it); where cuDNN refuses the graph, the learner's own exception
WRONG_OR_UNBUILT = [
    (relu_backward_arguments_swapped, "relu_backward's arguments are swapped"),
    (mask_by_a_second_graph, "the cuDNN graph that wrote dx has no conv_dgrad node (its nodes: POINTWISE)"),
    (dgrad_by_torchs_cudnn_op, "dx comes from torch's own kernel (aten.cudnn_convolution_transpose)"),
]


test_the_checker_rejects_a_typical_wrong_answer = rejects_each(WRONG)


@requires_gpu
def test_torchs_own_fused_cudnn_convolution_is_refused_by_name():
    """One kernel and the right numbers, so neither the formula nor the kernel count can tell: only who did the
    work (or, where this torch lacks the op for these tensors, the learner's own exception in one line)."""
    got = refused("02.residual_block", block_by_torchs_cudnn_op)
    assert got.startswith(("y comes from torch's own kernel (aten.cudnn_convolution_add_relu)",
                           "your code raised")), got




@requires_gpu
def test_the_dgrad_reference_passes_in_one_kernel():
    verdict = graded("02.dgrad_drelu", X.solution("02.dgrad_drelu"))
    assert verdict.status == "passed" and verdict.message.startswith("correct — one kernel"), verdict.message


@requires_gpu
@pytest.mark.parametrize("answer, message", WRONG_OR_UNBUILT, ids=[w[0].__name__ for w in WRONG_OR_UNBUILT])
def test_a_dgrad_answer_cudnn_may_not_build_fails_either_way(answer, message):
    got = refused("02.dgrad_drelu", answer)
    assert got.startswith((message, "your code raised")), got


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) torch computing the right numbers, which each checker refuses on the CPU
TORCH_ANSWERS = {
    "02.residual_block": lambda x, w, b, r, y: y.copy_(torch.relu(F.conv2d(x, w, padding=1) + b + r)),
    "02.folded_bn": lambda x, w, scale, shift, y: y.copy_(torch.relu(F.conv2d(x, w, padding=1) * scale + shift)),
    "02.dgrad_drelu": lambda dy, w, x, dx: dx.copy_(torch.nn.grad.conv2d_input(dx.shape, w, dy, padding=1) * (x > 0)),
}
