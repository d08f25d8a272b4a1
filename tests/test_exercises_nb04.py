"""Notebook 04's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the grading logic (which mistake a wrong y or AMAX matches, unwritten outputs, torch kernels next
to the graph, counting graph builds) and the notebook's own skeleton cells. On a GPU: real answers, right
and wrong, written as cuDNN graphs, run through the checkers.
"""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import helpers as H
import grader as X
from helpers.checking import rel_error, tolerance
from grader import graph_runs, nb04
from tests.support import StandInGraph, graded, refused, rejects_each, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("04.silu_amax", "04.scaled_relu", "04.fp8_matmul_amax", "04.rmsnorm_backward")
SKELETON_NAMES = {"04.silu_amax": "silu_amax", "04.scaled_relu": "make_scaled_relu",
                  "04.fp8_matmul_amax": "fp8_matmul_amax", "04.rmsnorm_backward": "rmsnorm_backward"}
BF16 = torch.bfloat16


# ------------------------------------------------------------------ CPU: the checkers' inputs
@pytest.fixture(scope="module")
def silu_t():
    return nb04.silu_inputs(dtype=BF16, device="cpu")


@pytest.fixture
def relu_t():
    return nb04.relu_inputs(dtype=BF16, device="cpu")


@pytest.fixture(scope="module")
def fp8_t():
    return nb04.fp8_inputs(device="cpu")


def test_inputs_are_reproducible_and_shaped_as_the_tasks_say(silu_t, fp8_t):
    again = nb04.silu_inputs(dtype=BF16, device="cpu")
    assert all(torch.equal(silu_t[k], again[k]) for k in silu_t)
    batch, m, k, n = nb04.SILU_SHAPE
    assert silu_t["a"].shape == (batch, m, k) and silu_t["bias"].shape == (1, 1, n)
    assert torch.isnan(nb04.relu_inputs(dtype=BF16, device="cpu")["y"]).all()
    assert fp8_t["a8"].dtype == fp8_t["b8"].dtype == torch.float8_e4m3fn
    assert fp8_t["b8"].stride()[1] == 1, "b8 is column-major: K is its fastest dimension"
    da, db = fp8_t["descale_a"].item(), fp8_t["descale_b"].item()
    assert da < 0.1 and db < 0.1 and max(da, db) / min(da, db) > 2, "descales far from 1 and from each other"


def test_every_wrong_formula_is_far_from_the_right_one(silu_t, relu_t, fp8_t):
    """A check that cannot fail is a defect: each mistake is off by far more than the tolerance."""
    cases = [nb04.silu_references(silu_t), nb04.fp8_references(fp8_t)]
    cases += [nb04.relu_references(relu_t, alpha) for alpha in nb04.ALPHAS]
    for right, wrong in cases:
        for mistake, formula in wrong.items():
            assert rel_error(formula, right) > 4 * tolerance(BF16), mistake
    first = nb04.relu_references(relu_t, nb04.ALPHAS[0])[0]
    for alpha in nb04.ALPHAS[1:]:
        assert rel_error(first, nb04.relu_references(relu_t, alpha)[0]) > 10 * tolerance(BF16)


def _amax_per_entry(y):
    return y.float().abs().amax(dim=(1, 2), keepdim=True)


# ------------------------------------------------------------------ CPU: 04.silu_amax grading
def test_a_right_silu_answer_passes(silu_t):
    right, _ = nb04.silu_references(silu_t)
    y = right.to(BF16)
    assert nb04.grade_silu_amax(silu_t, (y, _amax_per_entry(y))).startswith("correct — y rel err")


@pytest.mark.parametrize("mistake", ["the activation is still GELU", "y misses the bias", "y has no activation",
                                     "ReLU"])
def test_a_wrong_silu_output_is_named(silu_t, mistake):
    right, wrong = nb04.silu_references(silu_t)
    (message, formula), = [(m, f) for m, f in wrong.items() if mistake in m]
    y = formula.to(BF16)
    with pytest.raises(X.Wrong) as caught:
        nb04.grade_silu_amax(silu_t, (y, _amax_per_entry(y)))
    assert str(caught.value).startswith(message + " (rel err "), str(caught.value)


def test_wrong_amax_layouts_and_sources_are_named(silu_t):
    right, _ = nb04.silu_references(silu_t)
    y = right.to(BF16)
    acc = silu_t["a"].float() @ silu_t["b"].float()
    pre = acc + silu_t["bias"].float()
    one_in_total = y.float().abs().amax().reshape(1, 1, 1)
    cases = [
        (_amax_per_entry(pre), "amax is taken on the pre-activation (a @ b + bias), not on the output"),
        (_amax_per_entry(acc), "amax is taken on the matmul result, before the bias"),
        (one_in_total, "amax is one number (shape (1, 1, 1)), the maximum over everything; the task wants one "
                       "per batch entry, shape (4, 1, 1)"),
        (one_in_total.expand(4, 1, 1).contiguous(), "every amax entry holds the maximum over the whole tensor"),
        (torch.zeros(4, 1, 1), "amax is all zeros: it was never written"),
        (torch.full((4, 1, 1), float("nan")), "amax holds NaN"),
        (torch.zeros(4, 128, 1), "amax has shape (4, 128, 1), want (4, 1, 1)"),
        (_amax_per_entry(y) * 1.1, "amax does not match max|y|: got ["),
    ]
    for amax, message in cases:
        with pytest.raises(X.Wrong) as caught:
            nb04.grade_silu_amax(silu_t, (y, amax))
        assert str(caught.value).startswith(message), str(caught.value)


def test_unwritten_wrong_dtype_and_malformed_results(silu_t):
    right, _ = nb04.silu_references(silu_t)
    y = right.to(BF16)
    amax = _amax_per_entry(y)
    with pytest.raises(X.NotDone, match=r"return \(y, amax\)"):
        nb04.grade_silu_amax(silu_t, None)
    with pytest.raises(X.Wrong, match=r"^return \(y, amax\): two tensors, got Tensor"):
        nb04.grade_silu_amax(silu_t, y)
    with pytest.raises(X.Wrong, match="y is still all NaN"):
        nb04.grade_silu_amax(silu_t, (torch.full_like(y, float("nan")), amax))
    partly = y.clone()
    partly[0, 0, :3] = float("nan")
    with pytest.raises(X.Wrong, match=r"^3 of \d+ elements of y were never written"):
        nb04.grade_silu_amax(silu_t, (partly, amax))
    with pytest.raises(X.Wrong, match="y is torch.float32; store it in the inputs' dtype"):
        nb04.grade_silu_amax(silu_t, (right, amax))
    with pytest.raises(X.Wrong, match=r"y has shape \(4, 128\), want \(4, 128, 128\)"):
        nb04.grade_silu_amax(silu_t, (y[:, :, 0], amax))
    one_bad = y.clone()
    one_bad[1, 2, 3] += 40.0  # far outside the element-wise bound, too small to move the norm much
    with pytest.raises(X.Wrong, match="y is wrong"):
        nb04.grade_silu_amax(silu_t, (one_bad, amax))


# ------------------------------------------------------------------ CPU: 04.scaled_relu grading
def test_scaled_relu_right_stale_and_ignored_alpha(relu_t):
    first, second = nb04.ALPHAS[:2]
    relu_t["y"].copy_(nb04.relu_references(relu_t, second)[0])
    assert nb04.grade_scaled_relu(relu_t, second, (first,)) < tolerance(BF16)
    relu_t["y"].copy_(nb04.relu_references(relu_t, first)[0])  # the first call's result again
    with pytest.raises(X.Wrong, match=rf"^run\({second}\) gave the result for alpha={first}, an earlier call's: "
                                      r"alpha is fixed in the graph"):
        nb04.grade_scaled_relu(relu_t, second, (first,))
    relu_t["y"].copy_(nb04.relu_references(relu_t, 1.0)[0])
    with pytest.raises(X.Wrong, match=r"^run\(alpha\) ignores alpha"):
        nb04.grade_scaled_relu(relu_t, second, (first,))
    relu_t["y"].copy_(F.gelu(first * (relu_t["a"].float() @ relu_t["b"].float()) + relu_t["bias"].float()))
    with pytest.raises(X.Wrong, match="the activation is still GELU"):
        nb04.grade_scaled_relu(relu_t, first)


# ------------------------------------------------------------------ CPU: 04.fp8_matmul_amax grading
def test_fp8_right_answer_missing_descales_and_early_amax(fp8_t):
    right, wrong = nb04.fp8_references(fp8_t)
    y = right.to(BF16)
    amax = y.float().abs().amax().reshape(1, 1, 1)
    assert nb04.grade_fp8_matmul_amax(fp8_t, (y, amax)).startswith("correct — y rel err")
    for message, formula in wrong.items():
        with pytest.raises(X.Wrong) as caught:
            nb04.grade_fp8_matmul_amax(fp8_t, (formula.to(BF16), formula.abs().amax().reshape(1, 1, 1)))
        assert str(caught.value).startswith(message), str(caught.value)
    raw = fp8_t["a8"].float() @ fp8_t["b8"].float()
    with pytest.raises(X.Wrong, match="^amax is taken before the descales"):
        nb04.grade_fp8_matmul_amax(fp8_t, (y, raw.abs().amax().reshape(1, 1, 1)))
    with pytest.raises(X.Wrong, match="y is torch.float32; store it in bfloat16"):
        nb04.grade_fp8_matmul_amax(fp8_t, (right, amax))


# ------------------------------------------------------------------ CPU: kernels and builds
def test_torch_kernels_next_to_the_graph_are_rejected_fills_are_not():
    cudnn_kernel = "cudnn_generated_fort_native_sm90_matMul_bf16_128x64"
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >"
    nb04.graph_only([fill, cudnn_kernel], "the AMAX")
    extra = ["void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<c10::BFloat16> >(int)",
             "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(int)", "triton_red_fused_abs_amax_0"]
    with pytest.raises(X.Wrong) as caught:
        nb04.graph_only([cudnn_kernel, *extra], "the AMAX")
    assert str(caught.value) == ("the result is right, but torch kernels ran next to the graph (vectorized_elementwise_"
                                 "kernel, reduce_kernel, triton_red_fused_abs_amax_0): compute the AMAX inside the "
                                 "cuDNN graph")
    with pytest.raises(X.Wrong, match="launched no GPU kernel"):
        nb04.graph_only([], "the AMAX")


# ------------------------------------------------------------------ CPU: the point of each exercise (graph_runs)
def _epilogue_stand_in(outputs=("y", "amax")):
    """A stand-in graph (torch inside) computing silu(a @ b + bias) and its per-entry AMAX, writing ``outputs``."""
    def fn(a, b, bias):
        y = F.silu(a.float() @ b.float() + bias.float())
        return {"y": y, "amax": y.abs().amax(dim=(1, 2), keepdim=True)}

    uids = {"y": 4, "amax": 5}
    return StandInGraph(lambda a, b, bias: {k: v for k, v in fn(a, b, bias).items() if k in outputs},
                        {"a": 1, "b": 2, "bias": 3}, {name: uids[name] for name in outputs})


def _silu_runs(silu_t, plan):
    """(y, amax, runs) after ``plan``: "one" graph, "two" graphs (the AMAX from the second), "extra" (one graph
    writes both, another runs too), "torch" (the AMAX by torch)."""
    batch, m, _, n = nb04.SILU_SHAPE
    y, amax = torch.empty(batch, m, n), torch.empty(batch, 1, 1)
    pack = {1: silu_t["a"], 2: silu_t["b"], 3: silu_t["bias"], 4: y, 5: amax}
    with graph_runs.recording(classes=(StandInGraph,)) as runs:
        if plan in ("one", "extra"):
            _epilogue_stand_in().execute(pack)
        if plan == "extra":
            _epilogue_stand_in().execute({**pack, 4: torch.empty_like(y), 5: torch.empty_like(amax)})
        if plan in ("two", "torch"):
            _epilogue_stand_in(("y",)).execute(pack)
        if plan == "two":
            _epilogue_stand_in(("amax",)).execute({**pack, 4: torch.empty_like(y)})
        if plan == "torch":
            amax.copy_(y.abs().amax(dim=(1, 2), keepdim=True))
    return y, amax, runs


@pytest.mark.parametrize("plan, message", [
    ("two", "y and amax come from 2 separate cuDNN graphs: the point is one graph — put the AMAX reduction in the "
            "graph that computes y"),
    ("extra", "the result is right, but one call executed 2 cuDNN graphs: the point is one graph that computes y "
              "and amax"),
    ("torch", "amax was not written by a cuDNN graph: no execute had amax as an output in its variant pack"),
])
def test_y_and_its_amax_must_come_from_one_execute_of_one_graph(silu_t, plan, message):
    """The loophole: an AMAX from a second cuDNN graph passes every kernel check (both graphs are cuDNN)."""
    y, amax, runs = _silu_runs(silu_t, "one")
    nb04.one_graph_wrote(runs, dict(y=y, amax=amax), "the AMAX reduction")
    y, amax, runs = _silu_runs(silu_t, plan)
    with pytest.raises(X.Wrong) as caught:
        nb04.one_graph_wrote(runs, dict(y=y, amax=amax), "the AMAX reduction")
    assert str(caught.value).startswith(message), str(caught.value)


def _scaled_relu_runs(relu_t, alpha, *, by_value=True, passed=None):
    """runs of one run(alpha): a stand-in graph whose alpha (uid 6) is pass-by-value (or a device tensor
    refreshed with fill_), bound to ``passed`` (default alpha)."""
    graph = StandInGraph(lambda a, b, bias, alpha: {"y": F.relu(alpha.item() * (a.float() @ b.float())
                                                                + bias.float())},
                         {"a": 1, "b": 2, "bias": 3, "alpha": 6}, {"y": 4}, pass_by_value=(6,) if by_value else ())
    value = alpha if passed is None else passed
    scalar = torch.full((1, 1, 1), value) if by_value else torch.empty(1, 1, 1).fill_(value)
    with graph_runs.recording(classes=(StandInGraph,)) as runs:
        graph.execute({1: relu_t["a"], 2: relu_t["b"], 3: relu_t["bias"], 4: relu_t["y"], 6: scalar})
    return runs


def test_alpha_must_be_passed_by_value_at_every_execute(relu_t):
    nb04.alpha_by_value(_scaled_relu_runs(relu_t, 0.5), relu_t["y"], 0.5)
    with pytest.raises(X.Wrong) as caught:   # the loophole: a device alpha refreshed with fill_
        nb04.alpha_by_value(_scaled_relu_runs(relu_t, 0.5, by_value=False), relu_t["y"], 0.5)
    assert str(caught.value).startswith("run(0.5) gives the right y, but alpha is not passed by value: the graph "
                                        "has no pass-by-value scalar"), str(caught.value)
    with pytest.raises(X.Wrong, match=r"^run\(-1.75\) gives the right y, but the graph's pass-by-value scalar held "
                                      r"1, not alpha"):
        nb04.alpha_by_value(_scaled_relu_runs(relu_t, -1.75, passed=1.0), relu_t["y"], -1.75)
    with pytest.raises(X.Wrong, match=r"^y was not written by a cuDNN graph"):
        nb04.alpha_by_value(graph_runs.GraphRuns(), relu_t["y"], 0.5)


def test_without_fp8_hardware_the_fp8_exercise_is_skipped_not_failed():
    if H.gate("fp8").ok:
        pytest.skip("this machine runs FP8")
    verdict = X.exercise("04.fp8_matmul_amax", X.solution("04.fp8_matmul_amax"), quiet=True)
    assert verdict.status == "skipped" and verdict.message.startswith("skipped on this machine — ")


# ------------------------------------------------------------------ CPU: contracts, the graph run again, later calls
class _Traced:
    """What ``epilogue_again`` and ``scaled_relu_again`` read of a trace: its ``runs``."""

    def __init__(self, runs):
        self.runs = runs


def _silu_stand_in(activation=True):
    """A stand-in epilogue graph: silu(a @ b + bias) (or, without ``activation``, a @ b + bias) and its AMAX."""
    def fn(a, b, bias):
        pre = a.float() @ b.float() + bias.float()
        y = F.silu(pre) if activation else pre
        return {"y": y, "amax": y.abs().amax(dim=(1, 2), keepdim=True)}
    return StandInGraph(fn, {"a": 1, "b": 2, "bias": 3}, {"y": 4, "amax": 5})


def _silu_traced(silu_t, graph, then=None):
    batch, m, _, n = nb04.SILU_SHAPE
    y, amax = torch.empty(batch, m, n), torch.zeros(batch, 1, 1)
    with graph_runs.recording(classes=(StandInGraph,)) as runs:
        graph.execute({1: silu_t["a"], 2: silu_t["b"], 3: silu_t["bias"], 4: y, 5: amax})
    if then is not None:
        then(y, amax)
    return _Traced(runs), (y, amax)


def test_the_epilogue_graph_run_again_must_compute_y_and_amax_by_itself():
    """The right (y, amax) after a step the tracer does not see (a worker thread): the graph run again alone gives
    a @ b + bias, and the line names it. AMAX buffers start at 0 in the run again (a reduction may max into them)."""
    t = nb04.silu_inputs(dtype=torch.float32, device="cpu")
    own = nb04.silu_inputs(dtype=torch.float32, device="cpu", seed=nb04.AGAIN_SEED)
    trace, result = _silu_traced(t, _silu_stand_in())
    nb04.epilogue_again(trace, t, ("a", "b", "bias"), result, own, nb04.grade_silu_amax)

    def silu_in_a_thread(y, amax):
        def work():
            y.copy_(F.silu(y))
            amax.copy_(y.abs().amax(dim=(1, 2), keepdim=True))
        _in_a_thread(work)

    trace, result = _silu_traced(t, _silu_stand_in(activation=False), then=silu_in_a_thread)
    nb04.grade_silu_amax(t, result)   # the numbers are right
    with pytest.raises(X.Wrong) as caught:
        nb04.epilogue_again(trace, t, ("a", "b", "bias"), result, own, nb04.grade_silu_amax)
    assert str(caught.value).startswith(SILU_AGAIN + "y has no activation: it is a @ b + bias"), str(caught.value)
    assert str(caught.value).endswith("work done after the graph ran (on the host, in another thread, by torch) does "
                                      "not count: do all of it inside the graph"), str(caught.value)


@pytest.mark.parametrize("change, message", [
    (lambda y, amax: (y, amax.to(BF16)), "amax is bfloat16, but the statement asks for float32 (the AMAX is kept in "
                                         "fp32, whatever y's dtype): store the output in that dtype — allocate it "
                                         "with torch.zeros(..., dtype=torch.float32)"),
    (lambda y, amax: (y.transpose(1, 2).contiguous().transpose(1, 2), amax),
     "y has strides (16384, 1, 128), want (16384, 128, 1) (a contiguous tensor) — allocate it with "
     "torch.empty(batch, M, N, ...) inside your function"),
    (lambda y, amax: (y.float(), amax), "y is float32, but the statement asks for bfloat16"),
], ids=["amax_bf16", "y_column_major", "y_fp32"])
def test_the_returned_outputs_keep_the_statements_contract(silu_t, change, message):
    right, _ = nb04.silu_references(silu_t)
    y, amax = right.to(BF16), _amax_per_entry(right.to(BF16))
    nb04.require_new_outputs(y, amax, silu_t, y_dtype=BF16, amax_shape=(4, 1, 1))
    y, amax = change(y, amax)
    with pytest.raises(X.Wrong) as caught:
        nb04.require_new_outputs(y, amax, silu_t, y_dtype=BF16, amax_shape=(4, 1, 1))
    assert str(caught.value).startswith(message), str(caught.value)


def _silu_by_torch(a, b, bias):
    y = F.silu(a.float() @ b.float() + bias.float())
    return y, y.abs().amax(dim=(1, 2), keepdim=True)


def _first_silu_call(answer):
    t = nb04.silu_inputs(dtype=torch.float32, device="cpu")
    first = nb04.private_copy(t)
    return first, answer(t["a"], t["b"], t["bias"])


def _silu_calls_again(answer):
    first, result = _first_silu_call(answer)
    makes = [lambda i=i, shape=shape: nb04.silu_inputs(dtype=torch.float32, device="cpu", seed=nb04.CALL_SEED + i,
                                                       shape=shape) for i, shape in enumerate(nb04.LATER_SILU_SHAPES)]
    nb04.calls_again(answer, ("a", "b", "bias"), makes, nb04.grade_silu_amax, first, result, nb04.silu_references)


def _keeps(what):
    kept = {}

    def answer(a, b, bias):
        if "first" not in kept:
            kept["first"] = (dict(a=a, b=b, bias=bias), _silu_by_torch(a, b, bias))
        given, (y, amax) = kept["first"]
        if what == "outputs":
            fresh = _silu_by_torch(a, b, bias)
            y.copy_(fresh[0]) if y.shape == fresh[0].shape else None
            return y, amax
        return _silu_by_torch(a, given["b"], given["bias"])   # b and bias of the first call
    return answer


@pytest.mark.parametrize("answer, message", [
    (_keeps("outputs"), "y shares memory with the y your first call returned: return a new tensor — allocate new "
                        "outputs at every call"),
    (_keeps("b and bias"), "called a second time with new a, b and bias, your y followed the new a but not the new b "
                           "and bias: it still reads the first call's b and bias"),
    (lambda a, b, bias: (lambda y: (y, y.reshape(4, -1).abs().amax(dim=1).reshape(4, 1, 1)))(   # batch 4 written in
        F.silu(a.float() @ b.float() + bias.float())), "called again with new a, b and bias (a 2x128x256): amax has "
                                                       "shape (4, 1, 1), want (2, 1, 1)"),
], ids=["same_outputs", "b_and_bias_kept", "batch_of_four_hard_coded"])
def test_later_calls_get_new_values_new_buffers_and_another_batch(answer, message):
    _silu_calls_again(_silu_by_torch)
    with pytest.raises(X.Wrong) as caught:
        _silu_calls_again(answer)
    assert str(caught.value).startswith(message), str(caught.value)


def test_scaled_relus_graph_run_again_with_another_alpha_must_compute_y(relu_t):
    """A graph whose ReLU a worker thread applies passes every run(alpha); run again by the checker with alpha
    -0.75 passed by value, it gives no activation."""
    nb04.scaled_relu_again(_Traced(_scaled_relu_runs(relu_t, 2.0)), relu_t, 2.0)
    graph = StandInGraph(lambda a, b, bias, alpha: {"y": alpha.item() * (a.float() @ b.float()) + bias.float()},
                         {"a": 1, "b": 2, "bias": 3, "alpha": 6}, {"y": 4}, pass_by_value=(6,))
    with graph_runs.recording(classes=(StandInGraph,)) as runs:
        graph.execute({1: relu_t["a"], 2: relu_t["b"], 3: relu_t["bias"], 4: relu_t["y"], 6: torch.full((1, 1, 1), 2.0)})
    _in_a_thread(lambda: relu_t["y"].relu_())
    with pytest.raises(X.Wrong) as caught:
        nb04.scaled_relu_again(_Traced(runs), relu_t, 2.0)
    assert str(caught.value).startswith(RELU_AGAIN + "y has no activation: it is alpha * a @ b + bias"), \
        str(caught.value)


def test_rmsnorm_backward_run_again_and_called_again():
    """The graph with dy and x swapped, fixed afterwards by a worker thread, fails when run again alone; a second
    call that still reads the first call's x, scale and inv_var is told so."""
    t = nb04.rmsnorm_backward_inputs(dtype=torch.float32, device="cpu")
    trace = nb04._traced_backward(one_execute, t, **STAND_IN_WATCH)
    nb04.rmsnorm_again(trace, t)

    def swapped_then_fixed(dy, x, scale, inv_var, dx, dscale):
        StandInGraph(lambda dy, x, scale, inv_var: _rms_bwd(x, dy, scale, inv_var),
                     {"dy": 1, "x": 2, "scale": 3, "inv_var": 4}, {"dx": 5, "dscale": 6}, kind="RMSNORM_BWD").execute(
            _pack(dy, x, scale, inv_var, dx, dscale))
        right = _rms_bwd(dy, x, scale, inv_var)
        _in_a_thread(lambda: (dx.copy_(right["dx"]), dscale.copy_(right["dscale"])))

    t = nb04.rmsnorm_backward_inputs(dtype=torch.float32, device="cpu")
    trace = nb04._traced_backward(swapped_then_fixed, t, **STAND_IN_WATCH)
    nb04.grade_rmsnorm_backward(t)
    nb04.require_one_backward_execute(trace, t)
    with pytest.raises(X.Wrong) as caught:
        nb04.rmsnorm_again(trace, t)
    assert str(caught.value).startswith(RMS_AGAIN + "dx comes from dy and x swapped"), str(caught.value)

    kept = {}

    def x_scale_and_inv_var_kept(dy, x, scale, inv_var, dx, dscale):
        held = kept.setdefault("first", (x, scale, inv_var))
        right = _rms_bwd(dy, *held)
        dx.copy_(right["dx"])
        dscale.copy_(right["dscale"])

    first = nb04.rmsnorm_backward_inputs(dtype=torch.float32, device="cpu")
    x_scale_and_inv_var_kept(*(first[n] for n in BACKWARD_ARGS))
    with pytest.raises(X.Wrong) as caught:
        nb04.rmsnorm_second_call(x_scale_and_inv_var_kept, nb04.private_copy(first), count=False)
    assert str(caught.value).startswith("called a second time with new dy, x, scale and inv_var, your dx followed the "
                                        "new dy but not the new x, scale and inv_var"), str(caught.value)


# ------------------------------------------------------------------ CPU: the notebook's cells


# ------------------------------------------------------------------ GPU: real answers through the checkers
def _graph(dtype):
    from helpers.recipes import new_graph

    g = new_graph(dtype)
    return g, H.GraphIO(g, dtype=dtype)


def _amax_node(g, tensor):
    cudnn = H.load_cudnn()
    return g.reduction(tensor, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32)


def _execute(g, io):
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())


def _epilogue(a, b, bias, activation, amax_shape):
    """act(a @ b + bias) and an AMAX of the output, reduced to ``amax_shape``, as one graph."""
    g, io = _graph(a.dtype)
    pre = g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                io.input("bias", bias))
    y = torch.empty(a.shape[0], a.shape[1], b.shape[-1], device="cuda", dtype=a.dtype)
    out = activation(g, pre)
    io.output("y", out, y)
    amax = torch.zeros(*amax_shape, device="cuda", dtype=torch.float32)
    io.output("amax", _amax_node(g, out), amax)
    _execute(g, io)
    return y, amax


def gelu_left_in(a, b, bias):
    return _epilogue(a, b, bias, lambda g, x: g.gelu(x), (a.shape[0], 1, 1))


def one_amax_in_total(a, b, bias):
    return _epilogue(a, b, bias, lambda g, x: g.swish(x, swish_beta=1.0), (1, 1, 1))


def amax_of_the_pre_activation(a, b, bias):
    """The right y; the AMAX of a @ b + bias instead of y's (computed by torch: the grade names it first)."""
    y, _ = X.solution("04.silu_amax")(a, b, bias)
    pre = torch.baddbmm(bias.float(), a.float(), b.float())
    return y, pre.abs().amax(dim=(1, 2), keepdim=True)


def amax_by_torch(a, b, bias):
    """Right numbers, but the AMAX is two torch kernels after the graph."""
    g, io = _graph(a.dtype)
    pre = g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                io.input("bias", bias))
    y = torch.empty(a.shape[0], a.shape[1], b.shape[-1], device="cuda", dtype=a.dtype)
    io.output("y", g.swish(pre, swish_beta=1.0), y)
    _execute(g, io)
    return y, y.abs().amax(dim=(1, 2), keepdim=True).float()


def _relu_graph(a, b, bias, y, alpha):
    g, io = _graph(a.dtype)
    scaled = g.mul(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                   io.scalar("alpha", alpha))
    io.output("y", g.relu(g.add(scaled, io.input("bias", bias))), y)
    H.build(g)
    return g, io, H.workspace_for(g)


def alpha_fixed_at_build(a, b, bias, y):
    g, io, ws = _relu_graph(a, b, bias, y, nb04.ALPHAS[0])

    def run(alpha):
        g.execute(io.pack(), ws, handle=H.get_handle())  # the alpha it was built with, every time

    return run


def rebuilt_every_call(a, b, bias, y):
    def run(alpha):
        g, io, ws = _relu_graph(a, b, bias, y, alpha)
        g.execute(io.pack(), ws, handle=H.get_handle())

    return run


def fp8_without_descales(a8, b8, descale_a, descale_b):
    from helpers.recipes import new_graph

    g = new_graph(torch.bfloat16)
    io = H.GraphIO(g)  # mixed dtypes
    y = torch.empty(1, a8.shape[1], b8.shape[-1], device="cuda", dtype=torch.bfloat16)
    out = g.matmul(io.input("a8", a8), io.input("b8", b8), compute_data_type=torch.float32)
    io.output("y", out, y)
    amax = torch.zeros(1, 1, 1, device="cuda")
    io.output("amax", _amax_node(g, out), amax)
    _execute(g, io)
    return y, amax


def amax_from_a_second_graph(a, b, bias):
    """Right numbers from two cuDNN graphs: y from the first, the AMAX from the second (which writes its own y)."""
    solution = X.solution("04.silu_amax")
    y, _ = solution(a, b, bias)
    _, amax = solution(a, b, bias)
    return y, amax


def alpha_on_the_device_refreshed_with_fill(a, b, bias, y):
    """alpha as a 1x1x1 device tensor in the graph, refreshed with fill_ (a kernel) before each execute."""
    from helpers.recipes import new_graph

    g = new_graph(a.dtype)
    io = H.GraphIO(g)                                    # mixed dtypes: alpha stays fp32
    alpha_dev = torch.ones(1, 1, 1, device="cuda", dtype=torch.float32)
    scaled = g.mul(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                   io.input("alpha", alpha_dev))
    io.output("y", g.relu(g.add(scaled, io.input("bias", bias))), y)
    H.build(g)
    ws = H.workspace_for(g)

    def run(alpha):
        alpha_dev.fill_(alpha)
        g.execute(io.pack(), ws, handle=H.get_handle())

    return run


def fp8_amax_from_a_second_graph(a8, b8, descale_a, descale_b):
    solution = X.solution("04.fp8_matmul_amax")
    y, _ = solution(a8, b8, descale_a, descale_b)
    _, amax = solution(a8, b8, descale_a, descale_b)
    return y, amax


# ---- who did the work: torch, a cuDNN result thrown away or copied, the GEMM outside the graph
def silu_by_torch(a, b, bias):
    y = F.silu(torch.baddbmm(bias, a, b))
    return y, y.float().abs().amax(dim=(1, 2), keepdim=True)


def gemm_by_cublas_epilogue_in_a_graph(a, b, bias):
    """The GEMM by torch (cuBLAS); only the bias, SiLU and AMAX in a cuDNN graph."""
    product = torch.bmm(a, b)
    g, io = _graph(a.dtype)
    out = g.swish(g.add(io.input("p", product), io.input("bias", bias)), swish_beta=1.0)
    y = torch.empty_like(product)
    io.output("y", out, y)
    amax = torch.zeros(a.shape[0], 1, 1, device="cuda", dtype=torch.float32)
    io.output("amax", _amax_node(g, out), amax)
    _execute(g, io)
    return y, amax


def cudnn_result_thrown_away(a, b, bias):
    X.solution("04.silu_amax")(a, b, bias)           # the graph runs, its y and amax are dropped
    return silu_by_torch(a, b, bias)


def cudnn_result_copied_out(a, b, bias):
    y, amax = X.solution("04.silu_amax")(a, b, bias)
    return y.clone(), amax.clone()


def scaled_relu_by_torch(a, b, bias, y):
    def run(alpha):
        y.copy_(F.relu(alpha * torch.bmm(a, b) + bias))
    return run


def scaled_relu_into_scratch_then_copied(a, b, bias, y):
    scratch = torch.empty_like(y)
    run_into_scratch = X.solution("04.scaled_relu")(a, b, bias, scratch)

    def run(alpha):
        run_into_scratch(alpha)
        y.copy_(scratch)
    return run


def scaled_relu_graph_then_torch(a, b, bias, y):
    run_graph = X.solution("04.scaled_relu")(a, b, bias, torch.empty_like(y))

    def run(alpha):
        run_graph(alpha)                                 # the cuDNN result is thrown away
        y.copy_(F.relu(alpha * torch.bmm(a, b) + bias))
    return run


def fp8_by_torch_scaled_mm(a8, b8, descale_a, descale_b):
    y = torch._scaled_mm(a8[0], b8[0], scale_a=descale_a.reshape(()), scale_b=descale_b.reshape(()),
                         out_dtype=torch.bfloat16).unsqueeze(0)
    return y, y.float().abs().amax().reshape(1, 1, 1)


def fp8_dequantized_by_torch(a8, b8, descale_a, descale_b):
    y = ((a8.float() @ b8.float()) * descale_a * descale_b).to(torch.bfloat16)
    return y, y.float().abs().amax().reshape(1, 1, 1)


def fp8_result_copied_out(a8, b8, descale_a, descale_b):
    y, amax = X.solution("04.fp8_matmul_amax")(a8, b8, descale_a, descale_b)
    return y.clone(), amax


# ---- work done where the tracer does not look, inputs read once, streams, the outputs' contract
def _host(t):
    return t.detach().cpu().double().numpy()   # to the host first: no cast kernel on the GPU


def _in_a_thread(work):
    """Run ``work()`` in a worker thread and wait for it: torch there is not seen by the checker's tracer."""
    import threading

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


def _written_in_a_thread(pairs):
    """Write each (tensor, host array) from a worker thread: copies to the GPU, no kernel."""
    def work():
        for out, values in pairs:
            out.copy_(torch.from_numpy(values).to(out.dtype).reshape(out.shape))
    _in_a_thread(work)


def _numpy_silu(pre):
    import numpy as np

    return pre / (1 + np.exp(-pre))


def _amax_of(values, dims):
    import numpy as np

    return np.abs(values).max(axis=dims, keepdims=True)


def silu_finished_on_the_host(a, b, bias):
    """The graph writes a @ b + bias and its AMAX; numpy applies SiLU and takes the AMAX again on the host, and a
    worker thread writes both into the graph's outputs."""
    g, io = _graph(a.dtype)
    pre = g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32), io.input("bias", bias))
    y = torch.empty(a.shape[0], a.shape[1], b.shape[-1], device="cuda", dtype=a.dtype)
    io.output("y", pre, y)
    amax = torch.zeros(a.shape[0], 1, 1, device="cuda")
    io.output("amax", _amax_node(g, pre), amax)
    _execute(g, io)
    out = _numpy_silu(_host(y))
    _written_in_a_thread([(y, out), (amax, _amax_of(out.astype("float32"), (1, 2)))])
    return y, amax


def silu_node_times_zero_plus_numpy(a, b, bias):
    """silu(a @ b + bias) from numpy, fed in as z; the graph's own SiLU multiplied by zero, then z added."""
    import numpy as np

    z = torch.from_numpy(_numpy_silu(np.matmul(_host(a), _host(b)) + _host(bias))).to(a.dtype).to("cuda")
    zero = torch.zeros(1, 1, 1, device="cuda", dtype=torch.float32)
    g, io = _graph(a.dtype)
    pre = g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32), io.input("bias", bias))
    out = g.add(g.mul(g.swish(pre, swish_beta=1.0), io.input("zero", zero, dtype=torch.float32)), io.input("z", z))
    y = torch.empty_like(z)
    io.output("y", out, y)
    amax = torch.zeros(a.shape[0], 1, 1, device="cuda")
    io.output("amax", _amax_node(g, out), amax)
    _execute(g, io)
    return y, amax


def _keeps_outputs():
    kept = {}

    def silu_amax_returns_the_same_tensors_every_call(a, b, bias):
        """One y and one amax, allocated on the first call, written again (and returned) at every call."""
        if "y" not in kept or kept["y"].shape[0] != a.shape[0]:
            kept["y"] = torch.empty(a.shape[0], a.shape[1], b.shape[-1], device="cuda", dtype=a.dtype)
            kept["amax"] = torch.zeros(a.shape[0], 1, 1, device="cuda")
        g, io = _graph(a.dtype)
        pre = g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                    io.input("bias", bias))
        out = g.swish(pre, swish_beta=1.0)
        io.output("y", out, kept["y"])
        io.output("amax", _amax_node(g, out), kept["amax"].zero_())
        _execute(g, io)
        return kept["y"], kept["amax"]
    return silu_amax_returns_the_same_tensors_every_call


def _cached_silu():
    kept = {}

    def silu_graph_cached_rebinding_a(a, b, bias):
        """The graph built on the first call; later calls rebind a and new outputs, but b and bias stay the first's."""
        y = torch.empty(a.shape[0], a.shape[1], b.shape[-1], device="cuda", dtype=a.dtype)
        amax = torch.zeros(a.shape[0], 1, 1, device="cuda")
        if "graph" not in kept:
            g, io = _graph(a.dtype)
            pre = g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                        io.input("bias", bias))
            out = g.swish(pre, swish_beta=1.0)
            io.output("y", out, y)
            io.output("amax", _amax_node(g, out), amax)
            H.build(g)
            kept["graph"] = g, io
        g, io = kept["graph"]
        g.execute(io.pack(a=a, y=y, amax=amax), H.workspace_for(g), handle=H.get_handle())
        return y, amax
    return silu_graph_cached_rebinding_a


def _on_a_side_stream(solution_key, name):
    """The reference answer run on a side stream (the handle bound to it), returned without the caller's stream
    waiting for it."""
    def answer(*args):
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            return X.solution(solution_key)(*args)
    answer.__name__ = name
    return answer


def _silu_into(a, b, bias, y, amax):
    """The right SiLU + AMAX graph, written into the buffers given (whatever their dtype and layout)."""
    g, io = _graph(a.dtype)
    out = g.swish(g.add(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                        io.input("bias", bias)), swish_beta=1.0)
    io.output("y", out, y)
    io.output("amax", _amax_node(g, out), amax)
    _execute(g, io)
    return y, amax


def silu_amax_in_bf16(a, b, bias):
    """The right graph, but the AMAX buffer in the inputs' dtype, not fp32."""
    return _silu_into(a, b, bias, torch.empty(a.shape[0], a.shape[1], b.shape[-1], device="cuda", dtype=a.dtype),
                      torch.zeros(a.shape[0], 1, 1, device="cuda", dtype=a.dtype))


def silu_y_column_major(a, b, bias):
    """The right values, but y laid out column-major (a transposed view): not the [batch, M, N] tensor asked for."""
    y = torch.empty(a.shape[0], b.shape[-1], a.shape[1], device="cuda", dtype=a.dtype).transpose(1, 2)
    return _silu_into(a, b, bias, y, torch.zeros(a.shape[0], 1, 1, device="cuda"))


def scaled_relu_activation_on_the_host(a, b, bias, y):
    """run(alpha) executes alpha * a @ b + bias; numpy takes the ReLU and a worker thread writes it into y."""
    g, io = _graph(a.dtype)
    scaled = g.mul(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                   io.scalar("alpha", 1.0))
    io.output("y", g.add(scaled, io.input("bias", bias)), y)
    H.build(g)
    ws = H.workspace_for(g)

    def run(alpha):
        g.execute(io.pack(alpha=torch.full((1, 1, 1), float(alpha))), ws, handle=H.get_handle())
        _written_in_a_thread([(y, _host(y).clip(min=0))])
    return run


def scaled_relu_node_times_zero_plus_numpy(a, b, bias, y):
    """The graph's ReLU times zero, plus z, the whole epilogue computed by numpy for this alpha and written into z."""
    import numpy as np

    z = torch.empty_like(y)
    g, io = _graph(a.dtype)
    scaled = g.mul(g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32),
                   io.scalar("alpha", 1.0))
    zeroed = g.mul(g.relu(g.add(scaled, io.input("bias", bias))), io.scalar("zero", 0.0))
    io.output("y", g.add(zeroed, io.input("z", z)), y)
    H.build(g)
    ws = H.workspace_for(g)

    def run(alpha):
        _written_in_a_thread([(z, (alpha * np.matmul(_host(a), _host(b)) + _host(bias)).clip(min=0))])
        g.execute(io.pack(alpha=torch.full((1, 1, 1), float(alpha)), zero=torch.zeros(1, 1, 1)), ws,
                  handle=H.get_handle())
    return run


def scaled_relu_graph_on_copies(a, b, bias, y):
    """The graph built on copies of a, b and bias taken at build time: new values in the given buffers never reach
    it."""
    return X.solution("04.scaled_relu")(a.clone(), b.clone(), bias.clone(), y)


def _cached_scaled_relu():
    kept = {}

    def scaled_relu_graph_cached_across_calls(a, b, bias, y):
        """One graph for every make_scaled_relu call, built on the first call's a, b and bias; y rebound."""
        if "graph" not in kept:
            kept["graph"] = _relu_graph(a, b, bias, y, 1.0)
        g, io, ws = kept["graph"]

        def run(alpha):
            g.execute(io.pack(alpha=torch.full((1, 1, 1), float(alpha)), y=y), ws, handle=H.get_handle())
        return run
    return scaled_relu_graph_cached_across_calls


def scaled_relu_on_a_side_stream(a, b, bias, y):
    run_graph = X.solution("04.scaled_relu")(a, b, bias, y)
    side = torch.cuda.Stream()

    def run(alpha):
        with torch.cuda.stream(side):
            run_graph(alpha)
    return run


def fp8_descaled_on_the_host(a8, b8, descale_a, descale_b):
    """The graph writes the raw e4m3 product and its AMAX; numpy applies the descales on the host, and a worker
    thread writes y and amax."""
    y, amax = fp8_without_descales(a8, b8, descale_a, descale_b)
    out = (_host(y) * descale_a.item() * descale_b.item()).astype("float32")
    out = torch.from_numpy(out).to(torch.bfloat16).float().numpy()
    _written_in_a_thread([(y, out), (amax, _amax_of(out, (0, 1, 2)))])
    return y, amax


def fp8_descales_read_once(a8, b8, descale_a, descale_b):
    """The descales' values read on the host (.item()) into tensors of the answer's own: a graph that ignores the
    descale tensors it was given."""
    own = [torch.full((1, 1, 1), d.item(), device="cuda") for d in (descale_a, descale_b)]
    return X.solution("04.fp8_matmul_amax")(a8, b8, *own)


def _fp8_keeps_outputs():
    kept = {}

    def fp8_returns_the_same_tensors_every_call(a8, b8, descale_a, descale_b):
        y, amax = X.solution("04.fp8_matmul_amax")(a8, b8, descale_a, descale_b)
        if "y" not in kept:
            kept["y"], kept["amax"] = y, amax
        else:
            kept["y"].copy_(y)
            kept["amax"].copy_(amax)
        return kept["y"], kept["amax"]
    return fp8_returns_the_same_tensors_every_call


def fp8_amax_in_bf16(a8, b8, descale_a, descale_b):
    from helpers.recipes import new_graph

    g = new_graph(torch.bfloat16)
    io = H.GraphIO(g)
    y = torch.empty(1, a8.shape[1], b8.shape[-1], device="cuda", dtype=torch.bfloat16)
    out = g.mul(g.mul(g.matmul(io.input("a8", a8), io.input("b8", b8), compute_data_type=torch.float32),
                      io.input("descale_a", descale_a)), io.input("descale_b", descale_b))
    io.output("y", out, y)
    amax = torch.zeros(1, 1, 1, device="cuda", dtype=torch.bfloat16)
    io.output("amax", _amax_node(g, out), amax)
    H.build(g, heuristics=("A", "B", "FALLBACK"))
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
    return y, amax


SILU_AGAIN = "your graph, run again by the checker on new a, b and bias (bound by UID, your code not called), " \
             "does not compute y and amax by itself: "
RELU_AGAIN = "your graph, run again by the checker on new a, b, bias and alpha (bound by UID, your code not " \
             "called), does not compute y by itself: "
FP8_AGAIN = "your graph, run again by the checker on new a8, b8, descale_a and descale_b (bound by UID, your code " \
            "not called), does not compute y and amax by itself: "
SIDE = "your graph ran on a side stream (stream "
HARDENED = [
    ("04.silu_amax", silu_finished_on_the_host, SILU_AGAIN + "y has no activation: it is a @ b + bias"),
    ("04.silu_amax", silu_node_times_zero_plus_numpy, SILU_AGAIN + "y is wrong: rel err "),
    ("04.silu_amax", _keeps_outputs(), "y shares memory with the y your first call returned: return a new tensor"),
    ("04.silu_amax", _cached_silu(), "called a second time with new a, b and bias, your y followed the new a but "
                                     "not the new b and bias: it still reads the first call's b and bias"),
    ("04.silu_amax", _on_a_side_stream("04.silu_amax", "silu_amax_on_a_side_stream"), SIDE),
    ("04.scaled_relu", scaled_relu_activation_on_the_host, RELU_AGAIN + "y has no activation: it is alpha * a @ b"),
    ("04.scaled_relu", scaled_relu_node_times_zero_plus_numpy, RELU_AGAIN + "y is wrong: rel err "),
    ("04.scaled_relu", scaled_relu_graph_on_copies,
     "run(2.0) gave y for the a, b and bias it was built with, not for the new values written into those same "
     "buffers: it reads copies taken at build time"),
    ("04.scaled_relu", _cached_scaled_relu(),
     "make_scaled_relu called a second time with new a, b and bias, your function wrote the first call's y again"),
    ("04.scaled_relu", scaled_relu_on_a_side_stream, SIDE),
    ("04.fp8_matmul_amax", fp8_descaled_on_the_host,
     "y does not depend on the descale_a and descale_b you were given"),   # seen first, on the H100
    ("04.fp8_matmul_amax", fp8_descales_read_once,
     "y does not depend on the descale_a and descale_b you were given: bind them in the graph's variant pack"),
    ("04.fp8_matmul_amax", _fp8_keeps_outputs(), "y shares memory with the y your first call returned"),
    ("04.fp8_matmul_amax", _on_a_side_stream("04.fp8_matmul_amax", "fp8_on_a_side_stream"), SIDE),
]
# the outputs' contract; where cuDNN refuses such an output, the learner's own exception in one line
CONTRACT = [
    ("04.silu_amax", silu_amax_in_bf16, "amax is bfloat16, but the statement asks for float32"),
    ("04.silu_amax", silu_y_column_major, "y has strides (16384, 1, 128), want (16384, 128, 1) (a contiguous tensor)"),
    ("04.fp8_matmul_amax", fp8_amax_in_bf16, "amax is bfloat16, but the statement asks for float32"),
]

test_an_answer_that_hides_work_reads_inputs_once_or_leaves_its_stream_fails = rejects_each(HARDENED)


@requires_gpu
@pytest.mark.parametrize("key, answer, message", CONTRACT, ids=[c[1].__name__ for c in CONTRACT])
def test_an_output_that_breaks_the_statements_contract_fails(key, answer, message):
    got = refused(key, answer)
    assert got.startswith((message, "your code raised")), got


WRONG = [
    ("04.silu_amax", silu_by_torch, "torch computed y (aten.baddbmm"),
    ("04.silu_amax", cudnn_result_thrown_away, "torch computed y (aten.baddbmm"),
    ("04.silu_amax", cudnn_result_copied_out, "y holds a copy of a cuDNN result (aten.clone)"),
    ("04.scaled_relu", scaled_relu_by_torch, "torch computed y (aten.bmm"),
    ("04.scaled_relu", scaled_relu_graph_then_torch, "torch computed y (aten.bmm"),
    ("04.scaled_relu", scaled_relu_into_scratch_then_copied, "y holds a copy of a cuDNN result (aten.copy_)"),
    ("04.fp8_matmul_amax", fp8_dequantized_by_torch, "torch computed y (aten."),
    ("04.fp8_matmul_amax", fp8_result_copied_out, "y holds a copy of a cuDNN result (aten.clone)"),
    ("04.silu_amax", gelu_left_in, "y is GELU(a @ b + bias): the activation is still GELU"),
    ("04.silu_amax", amax_from_a_second_graph, "y and amax come from 2 separate cuDNN graphs: the point is one graph"),
    ("04.scaled_relu", alpha_on_the_device_refreshed_with_fill,
     "run(0.5) gives the right y, but alpha is not passed by value"),
    ("04.fp8_matmul_amax", fp8_amax_from_a_second_graph,
     "y and amax come from 2 separate cuDNN graphs: the point is one graph"),
    ("04.silu_amax", one_amax_in_total, "amax is one number (shape (1, 1, 1))"),
    ("04.silu_amax", amax_of_the_pre_activation, "amax is taken on the pre-activation"),
    ("04.silu_amax", amax_by_torch, "torch computed part of amax (aten.abs, aten.amax)"),
    ("04.scaled_relu", alpha_fixed_at_build, "run(-1.75) gave the result for alpha=0.5"),
    ("04.scaled_relu", rebuilt_every_call, "run(-1.75) gives the right y but built a graph again"),
    ("04.fp8_matmul_amax", fp8_without_descales, "y is the raw e4m3 product a8 @ b8"),
]


test_the_checker_rejects_a_typical_wrong_answer = rejects_each(WRONG)


@requires_gpu
def test_a_gemm_by_cublas_under_an_epilogue_graph_is_refused():
    """The GEMM by torch, the epilogue and AMAX in a cuDNN graph: refused by name, or (cuDNN 9.19 proposes no engine
    for an epilogue without its matmul) the learner's own exception in one line, naming where it rose."""
    got = refused("04.silu_amax", gemm_by_cublas_epilogue_in_a_graph)
    assert got.startswith(("torch computed part of y (aten.bmm)",
                           "your code raised cudnnGraphNotSupportedError")), got
    assert got.endswith(")") and " (in " in got or got.startswith("torch")


@requires_gpu
def test_an_fp8_gemm_by_torchs_scaled_mm_is_named():
    """torch._scaled_mm is cuBLASLt's FP8 GEMM reached through torch: refused by name (or the learner's own
    exception, in one line, where this torch refuses those arguments)."""
    got = refused("04.fp8_matmul_amax", fp8_by_torch_scaled_mm)
    assert got.startswith(("y comes from torch's own kernel (aten._scaled_mm)", "your code raised")), got




# ================================================================== 04.rmsnorm_backward
# ------------------------------------------------------------------ CPU: its inputs and its grading
BACKWARD_ARGS = ("dy", "x", "scale", "inv_var", "dx", "dscale")


@pytest.fixture
def norm_t():
    return nb04.rmsnorm_backward_inputs(dtype=BF16, device="cpu")


def test_rmsnorm_backward_inputs_are_the_recipes_with_the_forwards_exact_inv_var(norm_t):
    from helpers.recipes.norms import rms_reference

    again = nb04.rmsnorm_backward_inputs(dtype=BF16, device="cpu")
    assert all(torch.equal(norm_t[k], again[k]) for k in ("dy", "x", "scale", "inv_var"))
    rows, hidden = nb04.NORM_SHAPE
    assert hidden % 8 == 0 and hidden >= 64, "a hidden size the norm engines take"
    assert norm_t["x"].shape == norm_t["dy"].shape == norm_t["dx"].shape == (rows, hidden, 1, 1)
    assert norm_t["scale"].shape == norm_t["dscale"].shape == (1, hidden, 1, 1)
    assert norm_t["dx"].dtype == norm_t["dscale"].dtype == norm_t["scale"].dtype == BF16
    assert norm_t["inv_var"].shape == (rows, 1, 1, 1) and norm_t["inv_var"].dtype == torch.float32
    assert torch.equal(norm_t["inv_var"], rms_reference(norm_t)["inv_var"]), "the exercise is the backward alone"
    assert norm_t["inv_var"].max() / norm_t["inv_var"].min() > 10, "rows of very different RMS"
    assert torch.isnan(norm_t["dx"]).all() and torch.isnan(norm_t["dscale"]).all()


def test_every_rmsnorm_backward_mistake_is_far_from_the_right_gradients(norm_t):
    """A check that cannot fail is a defect: on the checker's inputs each wrong dx or dscale is off by far more
    than the tolerance (the inputs are chosen for that: dy leans on x and has a mean per row)."""
    (dx, dscale), (wrong_dx, wrong_dscale) = nb04.rmsnorm_backward_references(norm_t)
    for right, wrong in ((dx, wrong_dx), (dscale, wrong_dscale)):
        for mistake, formula in wrong.items():
            assert formula.shape == right.shape, mistake
            assert rel_error(formula, right) > 10 * tolerance(BF16), mistake


def test_a_layernorm_gradient_by_autograd_is_named_as_one(norm_t):
    """x's rows are centred: F.layer_norm's own gradient (its own mean and variance) is the mean-centred formula."""
    from helpers.recipes.norms import layer_reference

    ln = layer_reference(dict(norm_t, bias=torch.zeros_like(norm_t["scale"])))
    norm_t["dx"], norm_t["dscale"] = ln["dx"].to(BF16), ln["dscale"].to(BF16)
    with pytest.raises(X.Wrong, match=r"^dx is a LayerNorm backward: it also subtracts the row mean of dy·scale"):
        nb04.grade_rmsnorm_backward(norm_t)


def _right_into(t):
    (dx, dscale), _ = nb04.rmsnorm_backward_references(t)
    t["dx"], t["dscale"] = dx.to(BF16), dscale.to(BF16)
    return t


def test_right_gradients_pass_and_each_mistake_gets_its_own_line(norm_t):
    dx_err, dscale_err = nb04.grade_rmsnorm_backward(_right_into(norm_t))
    assert dx_err < tolerance(BF16) and dscale_err < tolerance(BF16)
    _, (wrong_dx, wrong_dscale) = nb04.rmsnorm_backward_references(norm_t)
    cases = [({"dx": f}, m) for m, f in wrong_dx.items()] + [({"dscale": f}, m) for m, f in wrong_dscale.items()]
    assert len(cases) == 4
    for replaced, message in cases:
        t = dict(norm_t, **{k: v.to(BF16) for k, v in replaced.items()})
        with pytest.raises(X.Wrong) as caught:
            nb04.grade_rmsnorm_backward(t)
        assert str(caught.value).startswith(message + " (rel err "), str(caught.value)


def test_unwritten_gradients_are_named_each_on_its_own_line(norm_t):
    t = _right_into(norm_t)
    nan = float("nan")
    with pytest.raises(X.Wrong, match=r"^dscale is still all NaN: nothing was written into it — the node's second "
                                      r"output is dscale: mark it with the dscale you are given"):
        nb04.grade_rmsnorm_backward(dict(t, dscale=torch.full_like(t["dscale"], nan)))
    with pytest.raises(X.Wrong, match=r"^dx is still all NaN: nothing was written into it — mark the "
                                      r"rmsnorm_backward node's dx output"):
        nb04.grade_rmsnorm_backward(dict(t, dx=torch.full_like(t["dx"], nan)))
    partly = t["dx"].clone()
    partly[3, :8] = nan
    with pytest.raises(X.Wrong, match=r"^8 of \d+ elements of dx were never written"):
        nb04.grade_rmsnorm_backward(dict(t, dx=partly))
    with pytest.raises(X.Wrong, match=r"^dscale has shape \(256, 1024, 1, 1\), want \(1, 1024, 1, 1\)"):
        nb04.grade_rmsnorm_backward(dict(t, dscale=t["dx"]))   # a per-row dscale, not summed over the rows
    with pytest.raises(X.Wrong, match=r"^dx is wrong: rel err"):
        nb04.grade_rmsnorm_backward(dict(t, dx=-t["dx"]))


def test_without_the_norm_engines_the_rmsnorm_backward_is_skipped_not_failed():
    assert X.needs("04.rmsnorm_backward") == ("norm_graphs",)
    if H.gate("norm_graphs").ok:
        pytest.skip("this machine runs the norm graphs")
    verdict = X.exercise("04.rmsnorm_backward", X.solution("04.rmsnorm_backward"), quiet=True)
    assert verdict.status == "skipped" and verdict.message.startswith("skipped on this machine — norm_graphs"), \
        verdict.message


# ------------------------------------------------------------------ CPU: the point (one execute) and provenance
def _rms_bwd(dy, x, scale, inv_var):
    """The RMSNorm backward in fp32 on [rows, hidden, 1, 1] tensors: {"dx", "dscale"} (what a stand-in runs)."""
    g, xhat = dy.float() * scale.float(), x.float() * inv_var
    dx = inv_var * (g - xhat * (g * xhat).mean(dim=1, keepdim=True))
    return {"dx": dx, "dscale": (dy.float() * xhat).sum(dim=0, keepdim=True)}


def _norm_stand_in(kind="RMSNORM_BWD"):
    """A stand-in cuDNN graph with one ``kind`` node: dy, x, scale, inv_var in (uids 1-4), dx and dscale out (5, 6)."""
    return StandInGraph(_rms_bwd, {"dy": 1, "x": 2, "scale": 3, "inv_var": 4}, {"dx": 5, "dscale": 6}, kind=kind)


def _pack(dy, x, scale, inv_var, dx, dscale):
    return {1: dy, 2: x, 3: scale, 4: inv_var, 5: dx, 6: dscale}


def one_execute(*args):
    _norm_stand_in().execute(_pack(*args))


def two_executes_of_one_graph(dy, x, scale, inv_var, dx, dscale):
    graph = _norm_stand_in()
    graph.execute(_pack(dy, x, scale, inv_var, dx, torch.empty_like(dscale)))
    graph.execute(_pack(dy, x, scale, inv_var, torch.empty_like(dx), dscale))


def two_graphs(dy, x, scale, inv_var, dx, dscale):
    _norm_stand_in().execute(_pack(dy, x, scale, inv_var, dx, torch.empty_like(dscale)))
    _norm_stand_in().execute(_pack(dy, x, scale, inv_var, torch.empty_like(dx), dscale))


def statistics_recomputed_by_torch(dy, x, scale, inv_var, dx, dscale):
    again = torch.rsqrt(x.float().square().mean(dim=1, keepdim=True) + 1e-5)
    _norm_stand_in().execute(_pack(dy, x, scale, again, dx, dscale))


def a_layernorm_backward_node(*args):
    _norm_stand_in("LAYERNORM_BWD").execute(_pack(*args))


def copied_from_scratch(dy, x, scale, inv_var, dx, dscale):
    scratch = torch.empty_like(dx)
    _norm_stand_in().execute(_pack(dy, x, scale, inv_var, scratch, dscale))
    dx.copy_(scratch)


def dscale_by_torch(dy, x, scale, inv_var, dx, dscale):
    _norm_stand_in().execute(_pack(dy, x, scale, inv_var, dx, torch.empty_like(dscale)))
    dscale.copy_((dy * x * inv_var).sum(dim=0, keepdim=True))


STAND_IN_WATCH = dict(classes=(StandInGraph,), cuda_graph_classes=(), cache_classes=())


@pytest.mark.parametrize("answer, message", [
    (two_executes_of_one_graph, "dx and dscale come from 2 executes of your graph: the point is one execute that "
                                "writes both"),
    (two_graphs, "dx and dscale come from 2 separate cuDNN graphs: the point is one graph — put the dscale output"),
    (statistics_recomputed_by_torch, "dx does not use the inv_var you were given: the forward saved it so the "
                                     "backward need not recompute the statistics"),
    (a_layernorm_backward_node, "the cuDNN graph that wrote dx has no rmsnorm_bwd node (its nodes: LAYERNORM_BWD)"),
    (copied_from_scratch, "dx holds a copy of a cuDNN result (aten.copy_)"),
    (dscale_by_torch, "torch computed dscale (aten.mul, aten.sum)"),
], ids=lambda v: getattr(v, "__name__", "message"))
def test_dx_and_dscale_must_come_from_one_execute_of_an_rmsnorm_backward_graph(answer, message):
    """Each answer writes the right numbers (fp32, on the CPU): the refusal is about who wrote them, and how."""
    t = nb04.rmsnorm_backward_inputs(dtype=torch.float32, device="cpu")
    trace = nb04._traced_backward(one_execute, t, **STAND_IN_WATCH)
    nb04.grade_rmsnorm_backward(t)
    nb04.require_one_backward_execute(trace, t)   # the right answer passes
    t = nb04.rmsnorm_backward_inputs(dtype=torch.float32, device="cpu")
    trace = nb04._traced_backward(answer, t, **STAND_IN_WATCH)
    nb04.grade_rmsnorm_backward(t)
    with pytest.raises(X.Wrong) as caught:
        nb04.require_one_backward_execute(trace, t)
    assert str(caught.value).startswith(message), str(caught.value)


def test_torch_answers_are_refused_on_the_cpu_the_mistake_named_first():
    """Graded on the CPU (``grading_on("cpu")``): autograd through F.rms_norm, or the formula by hand, computes the
    right gradients and is refused for who computed them; a hand-derived dx with inv_var as a constant is named."""
    pytest.importorskip("cudnn")
    check = X.checker_for("04.rmsnorm_backward")

    def by_autograd(dy, x, scale, inv_var, dx, dscale):
        rows = x.flatten(1).requires_grad_(True)
        gamma = scale.flatten().requires_grad_(True)
        y = F.rms_norm(rows, (rows.shape[1],), gamma, 1e-5)
        grad_x, grad_scale = torch.autograd.grad(y, (rows, gamma), dy.flatten(1))
        dx.copy_(grad_x.reshape(dx.shape))
        dscale.copy_(grad_scale.reshape(dscale.shape))

    def by_hand(dy, x, scale, inv_var, dx, dscale):
        dx.copy_(_rms_bwd(dy, x, scale, inv_var)["dx"])
        dscale.copy_(_rms_bwd(dy, x, scale, inv_var)["dscale"])

    def inv_var_a_constant(dy, x, scale, inv_var, dx, dscale):
        dx.copy_(dy * scale * inv_var)
        dscale.copy_((dy * x * inv_var).sum(dim=0, keepdim=True))

    with X.grading_on("cpu"):
        for answer, message in [(by_autograd, "torch computed dx (aten."), (by_hand, "torch computed dx (aten."),
                                (inv_var_a_constant, "dx treats inv_var as a constant: it is dy·scale·inv_var")]:
            with pytest.raises(X.Wrong) as caught:
                check(answer)
            assert str(caught.value).startswith(message), (answer.__name__, str(caught.value))
        with pytest.raises(X.NotDone, match=r"returned \.\.\."):
            check(lambda *args: Ellipsis)


# ------------------------------------------------------------------ GPU: real answers through its checker
def _norm_graph(dtype):
    from helpers.recipes import new_graph

    g = new_graph(dtype)
    return g, H.GraphIO(g)   # mixed dtypes: the statistics stay fp32


def _rms_bwd_graph(dy, x, scale, inv_var, dx, dscale, *, swap=False, dbias=None):
    """The RMSNorm backward as one built graph: (graph, io). ``swap``: dy bound as input= and x as grad=;
    ``dbias``: has_dbias=True, its output bound to that buffer."""
    g, io = _norm_graph(x.dtype)
    first, second = (("x", x), ("dy", dy)) if swap else (("dy", dy), ("x", x))
    grad_x, grad_scale, grad_bias = g.rmsnorm_backward(
        grad=io.input(*first), input=io.input(*second), scale=io.input("scale", scale),
        inv_variance=io.input("inv_var", inv_var), has_dbias=dbias is not None)
    io.output("dx", grad_x, dx)
    io.output("dscale", grad_scale, dscale)
    if dbias is not None:
        io.output("dbias", grad_bias, dbias)
    H.build(g)
    return g, io


def _run(g, io, **replacements):
    g.execute(io.pack(**replacements), H.workspace_for(g), handle=H.get_handle())


def rms_backward_by_autograd(dy, x, scale, inv_var, dx, dscale):
    rows = x.float().flatten(1).requires_grad_(True)
    gamma = scale.float().flatten().requires_grad_(True)
    grad_x, grad_scale = torch.autograd.grad(F.rms_norm(rows, (rows.shape[1],), gamma, 1e-5), (rows, gamma),
                                             dy.float().flatten(1))
    dx.copy_(grad_x.reshape(dx.shape))
    dscale.copy_(grad_scale.reshape(dscale.shape))


def inv_var_taken_as_a_constant(dy, x, scale, inv_var, dx, dscale):
    """dscale from the graph; dx derived by hand with inv_var as a constant (torch: the grade names it first)."""
    X.solution("04.rmsnorm_backward")(dy, x, scale, inv_var, torch.empty_like(dx), dscale)
    dx.copy_(dy.float() * scale.float() * inv_var)


def layernorm_backward_instead(dy, x, scale, inv_var, dx, dscale):
    """cuDNN's LayerNorm backward, fed the RMS inv_var and a mean of zeros (the learner has no mean)."""
    g, io = _norm_graph(x.dtype)
    mean = torch.zeros_like(inv_var)
    grad_x, grad_scale, grad_bias = g.layernorm_backward(
        grad=io.input("dy", dy), input=io.input("x", x), scale=io.input("scale", scale),
        mean=io.input("mean", mean), inv_variance=io.input("inv_var", inv_var))
    io.output("dx", grad_x, dx)
    io.output("dscale", grad_scale, dscale)
    io.output("dbias", grad_bias, torch.empty_like(dscale))
    H.build(g)
    _run(g, io)


def dscale_left_unwritten(dy, x, scale, inv_var, dx, dscale):
    _run(*_rms_bwd_graph(dy, x, scale, inv_var, dx, torch.empty_like(dscale)))


def dbias_bound_as_dscale(dy, x, scale, inv_var, dx, dscale):
    _run(*_rms_bwd_graph(dy, x, scale, inv_var, dx, torch.empty_like(dscale), dbias=dscale))


def dy_and_x_swapped(dy, x, scale, inv_var, dx, dscale):
    _run(*_rms_bwd_graph(dy, x, scale, inv_var, dx, dscale, swap=True))


def inv_var_recomputed_by_torch(dy, x, scale, inv_var, dx, dscale):
    again = torch.rsqrt(x.float().square().mean(dim=1, keepdim=True) + 1e-5)
    X.solution("04.rmsnorm_backward")(dy, x, scale, again, dx, dscale)


def dscale_from_a_second_graph(dy, x, scale, inv_var, dx, dscale):
    solution = X.solution("04.rmsnorm_backward")
    solution(dy, x, scale, inv_var, dx, torch.empty_like(dscale))
    solution(dy, x, scale, inv_var, torch.empty_like(dx), dscale)


def dx_and_dscale_from_two_executes(dy, x, scale, inv_var, dx, dscale):
    g, io = _rms_bwd_graph(dy, x, scale, inv_var, dx, dscale)
    _run(g, io, dscale=torch.empty_like(dscale))
    _run(g, io, dx=torch.empty_like(dx))


def backward_copied_out(dy, x, scale, inv_var, dx, dscale):
    scratch = torch.empty_like(dx)
    X.solution("04.rmsnorm_backward")(dy, x, scale, inv_var, scratch, dscale)
    dx.copy_(scratch)


def rms_swapped_then_fixed_on_the_host(dy, x, scale, inv_var, dx, dscale):
    """The graph with dy and x swapped; numpy computes the right gradients on the host and a worker thread writes
    them over the graph's."""
    import numpy as np

    _run(*_rms_bwd_graph(dy, x, scale, inv_var, dx, dscale, swap=True))
    g_, xhat = _host(dy).reshape(dy.shape[0], -1) * _host(scale).reshape(1, -1), \
        _host(x).reshape(x.shape[0], -1) * _host(inv_var).reshape(-1, 1)
    inv = _host(inv_var).reshape(-1, 1)
    right_dx = inv * (g_ - xhat * (g_ * xhat).mean(axis=1, keepdims=True))
    right_dscale = (_host(dy).reshape(dy.shape[0], -1) * xhat).sum(axis=0)
    _written_in_a_thread([(dx, right_dx.astype(np.float32)), (dscale, right_dscale.astype(np.float32))])


def _cached_rms(name, rebound, copy_inv_var=False):
    kept = {}

    def answer(dy, x, scale, inv_var, dx, dscale):
        given = dict(dy=dy, x=x, scale=scale, inv_var=inv_var, dx=dx, dscale=dscale)
        if "graph" not in kept:
            bound = dict(given, inv_var=inv_var.clone() if copy_inv_var else inv_var)
            kept["graph"] = _rms_bwd_graph(*(bound[n] for n in ("dy", "x", "scale", "inv_var", "dx", "dscale")))
        _run(*kept["graph"], **{n: given[n] for n in rebound})
    answer.__name__ = name
    return answer


RMS_AGAIN = "your graph, run again by the checker on new dy, x, scale and inv_var (bound by UID, your code not " \
            "called), does not compute dx and dscale by itself: "
NORM_HARDENED = [
    (rms_swapped_then_fixed_on_the_host, RMS_AGAIN + "dx comes from dy and x swapped"),
    (_cached_rms("rms_graph_cached_rebinding_only_the_outputs", ("dx", "dscale")),
     "called a second time with new dy, x, scale and inv_var, your function wrote the first call's dx again"),
    (_cached_rms("rms_graph_on_a_copy_of_inv_var", ("dy", "x", "scale", "dx", "dscale"), copy_inv_var=True),
     RMS_AGAIN + "dx is wrong: rel err "),
    (_cached_rms("rms_graph_cached_rebinding_dy_and_the_outputs", ("dy", "dx", "dscale")),
     "called a second time with new dy, x, scale and inv_var, your dx followed the new dy but not the new x, scale "
     "and inv_var: it still reads the first call's x, scale and inv_var"),
    (_on_a_side_stream("04.rmsnorm_backward", "rms_backward_on_a_side_stream"), SIDE),
]


@requires_gpu
@pytest.mark.parametrize("answer, message", NORM_HARDENED, ids=[w[0].__name__ for w in NORM_HARDENED])
def test_the_rmsnorm_backward_checker_rejects_hidden_work_inputs_read_once_and_a_side_stream(answer, message):
    got = refused("04.rmsnorm_backward", answer)
    assert got.startswith(message), got


NORM_WRONG = [
    (rms_backward_by_autograd, "torch computed dx (aten."),
    (inv_var_taken_as_a_constant, "dx treats inv_var as a constant: it is dy·scale·inv_var"),
    (layernorm_backward_instead, "dx is a LayerNorm backward: it also subtracts the row mean of dy·scale"),
    (dscale_left_unwritten, "dscale is still all NaN: nothing was written into it"),
    (dbias_bound_as_dscale, "dscale is the sum of dy over the rows: that is dbias"),
    (dy_and_x_swapped, "dx comes from dy and x swapped"),
    (inv_var_recomputed_by_torch, "dx does not use the inv_var you were given"),
    (dscale_from_a_second_graph, "dx and dscale come from 2 separate cuDNN graphs: the point is one graph"),
    (dx_and_dscale_from_two_executes, "dx and dscale come from 2 executes of your graph"),
    (backward_copied_out, "dx holds a copy of a cuDNN result (aten.copy_)"),
]


@requires_gpu
@pytest.mark.parametrize("answer, message", NORM_WRONG, ids=[w[0].__name__ for w in NORM_WRONG])
def test_the_rmsnorm_backward_checker_rejects_a_typical_wrong_answer(answer, message):
    got = refused("04.rmsnorm_backward", answer)
    assert got.startswith(message), got


@requires_gpu
def test_the_rmsnorm_backward_checker_accepts_the_reference_and_the_recipe():
    """The reference solution, and the recipe deep dive G teaches (``recipes.norms.rmsnorm_backward_graph``)."""
    from helpers.recipes import norms

    verdict = graded("04.rmsnorm_backward", X.solution("04.rmsnorm_backward"))
    assert verdict.status == "passed" and verdict.message.startswith("correct — one execute wrote dx and dscale"), \
        verdict.message

    def by_the_recipe(dy, x, scale, inv_var, dx, dscale):
        g, io = norms.rmsnorm_backward_graph(dict(dy=dy, x=x, scale=scale, inv_var=inv_var, dx=dx, dscale=dscale))
        _run_built(g, io)

    assert graded("04.rmsnorm_backward", by_the_recipe).status == "passed"


def _run_built(g, io):
    H.build(g)
    _run(g, io)


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) torch computing the right numbers, which each checker refuses on the CPU
def _torch_rmsnorm_backward(dy, x, scale, inv_var, dx, dscale):
    """Autograd through torch's F.rms_norm, written into the buffers given."""
    rows, gamma = x.flatten(1).requires_grad_(True), scale.flatten().requires_grad_(True)
    grad_x, grad_scale = torch.autograd.grad(F.rms_norm(rows, (rows.shape[1],), gamma, 1e-5), (rows, gamma),
                                             dy.flatten(1))
    dx.copy_(grad_x.reshape(dx.shape))
    dscale.copy_(grad_scale.reshape(dscale.shape))


TORCH_ANSWERS = {
    "04.silu_amax": lambda a, b, bias: (lambda y: (y, y.float().abs().amax(dim=(1, 2), keepdim=True)))(
        F.silu(a @ b + bias)),
    "04.scaled_relu": lambda a, b, bias, y: (lambda alpha: y.copy_(F.relu(alpha * (a @ b) + bias))),
    "04.fp8_matmul_amax": lambda a8, b8, da, db: (lambda y: (y, y.float().abs().amax().reshape(1, 1, 1)))(
        ((a8.float() @ b8.float()) * da * db).to(torch.bfloat16)),
    "04.rmsnorm_backward": _torch_rmsnorm_backward,
}
