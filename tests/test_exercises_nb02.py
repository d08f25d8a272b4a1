"""Notebook 02's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the grading logic (which mistake a wrong output matches, unwritten outputs, the kernel count) and
the notebook's own skeleton cells. On a GPU: real answers, right and wrong, run through the checkers.
"""
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import helpers as H
import helpers.exercises as X
from helpers.checking import rel_error, tolerance
from helpers.exercises import nb02
from tests.support import graded, requires_gpu

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
]


@requires_gpu
@pytest.mark.parametrize("key, answer, message", WRONG, ids=[w[1].__name__ for w in WRONG])
def test_the_checker_rejects_a_typical_wrong_answer(key, answer, message):
    verdict = graded(key, answer)
    assert verdict.status == "failed" and verdict.message.startswith(message), verdict.message


@requires_gpu
def test_torchs_own_fused_cudnn_convolution_is_refused_by_name():
    """One kernel and the right numbers, so neither the formula nor the kernel count can tell: only who did the
    work (or, where this torch lacks the op for these tensors, the learner's own exception in one line)."""
    verdict = graded("02.residual_block", block_by_torchs_cudnn_op)
    assert verdict.status == "failed", verdict
    assert verdict.message.startswith(("y comes from torch's own kernel (aten.cudnn_convolution_add_relu)",
                                       "your code raised")), verdict.message


