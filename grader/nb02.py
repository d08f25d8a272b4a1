"""Checkers for notebook 02: conv epilogues that must stay ONE fused kernel.

    02.residual_block   relu(conv(x, w) + b + r)        a ResNet block's residual, added inside the graph
    02.folded_bn        relu(conv(x, w) * scale + shift) inference batch norm folded into the epilogue
    02.dgrad_drelu      relu_backward(conv_dgrad(dy, w), x)  the backward: dgrad with the previous ReLU's mask

Each runs the answer on its own NHWC inputs (3x3 filter, padding 1) with a NaN-poisoned output, grades it against
float64 PyTorch (naming the usual mistake), traces who wrote it (a cuDNN graph with the exercise's convolution that
read every input, no torch compute on the way, torch's own cuDNN convolutions included) and counts one call's GPU
kernels: the point is one. Inside ``grading_on("cpu")`` it grades up to the kernel count.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from helpers.checking import poison_
from helpers.timing.kernels import kernels_launched, short_kernel_name
from . import NotDone, Wrong, checker, grade_output, grading_setup, inputs
from .provenance import tracing

# Small: each answer builds its graph per call, and a checker calls it twice. Channel counts are multiples
# of 8 (tensor-core kernels); N, C, H=W, K, filter, padding, stride.
SHAPE = dict(n=8, c=64, hw=28, k=64, rs=3, pad=1, stride=1)
# The backward's: C != K, so a filter used as it is in a forward convolution of dy (k channels in, w expects c)
# cannot run, and only a transposed one fits: dy [n,k,h,w], w [k,c,3,3], x and dx [n,c,h,w]. Nor can x's mask
# (c channels) be applied to dy (k channels) before dgrad: that mistake fails to build, so it needs no formula.
DGRAD_SHAPE = dict(n=8, c=64, hw=28, k=32, rs=3, pad=1, stride=1)
SEED = 2


def tensors(*, dtype, device: str = "cuda", seed: int = SEED) -> dict:
    """Notebook 02's x, w, b and poisoned y (``inputs.conv_tensors``), a residual r like y, and a per-channel scale in
    [0.25, 2] and shift (1xKx1x1), all NHWC. Reproducible for a given seed."""
    t = inputs.conv_tensors(**SHAPE, dtype=dtype, seed=seed, device=device)
    gen = torch.Generator(device=device).manual_seed(seed + 1)
    k = SHAPE["k"]

    def nhwc(values):
        return values.to(dtype).to(memory_format=torch.channels_last)

    t["r"] = nhwc(torch.randn(t["y"].shape, generator=gen, device=device))
    t["scale"] = nhwc(0.25 + 1.75 * torch.rand(1, k, 1, 1, generator=gen, device=device))
    t["shift"] = nhwc(torch.randn(1, k, 1, 1, generator=gen, device=device))
    return t


def _conv64(t):
    """conv2d(x, w) in float64, no bias."""
    return F.conv2d(t["x"].double(), t["w"].double(), padding=SHAPE["pad"], stride=SHAPE["stride"])


def residual_references(t) -> tuple:
    """The right answer and, by the mistake that gives it, the usual wrong ones (all float64)."""
    conv, b, r = _conv64(t), t["b"].double(), t["r"].double()
    right = torch.relu(conv + b + r)
    wrong = {
        "the residual is added after the ReLU: a ResNet block adds it before, relu(conv + b + r)":
            torch.relu(conv + b) + r,
        "the output ignores the residual r: it is relu(conv + b)": torch.relu(conv + b),
        "the bias is missing: the output is relu(conv + r)": torch.relu(conv + r),
        "the ReLU is missing: the output is conv + b + r": conv + b + r,
    }
    return right, wrong


def folded_bn_references(t) -> tuple:
    """relu(conv * scale + shift) and, by the mistake that gives it, the usual wrong ones (all float64)."""
    conv, scale, shift = _conv64(t), t["scale"].double(), t["shift"].double()
    right = torch.relu(conv * scale + shift)
    wrong = {
        "scale and shift are applied in the wrong order: the output is relu((conv + shift) * scale)":
            torch.relu((conv + shift) * scale),
        "the scale is missing: the output is relu(conv + shift)": torch.relu(conv + shift),
        "the shift is missing: the output is relu(conv * scale)": torch.relu(conv * scale),
        "the ReLU is missing: the output is conv * scale + shift": conv * scale + shift,
    }
    return right, wrong


def dgrad_tensors(*, dtype, device: str = "cuda", seed: int = SEED) -> dict:
    """The dgrad checker's NHWC dy, w, x (a ReLU's output: about half exact zeros) and poisoned dx."""
    return inputs.dgrad_tensors(**DGRAD_SHAPE, dtype=dtype, seed=seed, device=device)


def dgrad_drelu_references(t) -> tuple:
    """dx = conv_dgrad(dy, w) * (x > 0) and, by the mistake that gives it, the usual wrong ones (all float64).
    dgrad is the transposed convolution: conv2d(dy, w with K and C swapped AND its 3x3 taps flipped)."""
    pad, stride = DGRAD_SHAPE["pad"], DGRAD_SHAPE["stride"]
    dy, w, x = (t[name].double() for name in ("dy", "w", "x"))
    dgrad = F.conv_transpose2d(dy, w, padding=pad, stride=stride)
    mask = x > 0
    right = dgrad * mask
    wrong = {
        "the ReLU backward is missing: dx is conv_dgrad(dy, w) alone, not masked where x > 0": dgrad,
        "the mask is inverted: dx is dgrad * (x <= 0); the gradient passes where x > 0": dgrad * ~mask,
        "the mask comes from dgrad's output, not from x: dx is relu(dgrad); use relu_backward(dgrad, x)":
            torch.relu(dgrad),
        "relu_backward's arguments are swapped: dx is x * (dgrad > 0); the gradient comes first, "
        "relu_backward(dgrad, x)": x * (dgrad > 0),
        "the filter is transposed but not flipped: conv_fprop(dy, w^T) is not dgrad, which also flips the 3x3 taps "
        "— use graph.conv_dgrad(dy, w)": F.conv2d(dy, w.transpose(0, 1), padding=pad, stride=stride) * mask,
    }
    return right, wrong


def grade(out, right, wrong: dict) -> float:
    """``grade_output`` of y: its relative error against ``right``, or ``Wrong`` in one line naming the mistake."""
    return grade_output(out, right, wrong, what="the output", all_nan_hint="mark the graph's output with the y you are "
                        "given (io.output) and execute the graph")


def grade_dx(out, right, wrong: dict) -> float:
    """``grade`` for the backward's output, dx."""
    return grade_output(out, right, wrong, name="dx", all_nan_hint="mark the graph's output with the dx you are "
                        "given (io.output) and execute the graph")


def one_kernel(names: list, fix: str) -> None:
    """Raise ``Wrong`` unless ``names`` (the kernels of one call) is exactly one kernel; ``fix`` says how."""
    if len(names) == 1:
        return
    if not names:
        raise Wrong("one call launched no GPU kernel: execute the graph inside the function, on H.get_handle()")
    shown = ", ".join([short_kernel_name(n.removeprefix("void "), 40) for n in names[:3]] + ["..."] * (len(names) > 3))
    raise Wrong(f"the output is correct but one call launched {len(names)} kernels ({shown}); the point is "
                f"one — {fix}")


def _run(answer, names: tuple, t: dict):
    """Call ``answer`` on the tensors ``names`` of ``t``; ``NotDone`` if it returns ``...``."""
    returned = answer(*(t[name] for name in names))
    if returned is Ellipsis:
        raise NotDone(f"not done yet — {getattr(answer, '__name__', 'your answer')} returned ...")
    if any(value.is_cuda for value in t.values()):
        torch.cuda.synchronize()


def require_fused(trace, t: dict, names: tuple, *, out: str = "y", kinds: tuple = ("CONV_FPROP",)) -> None:
    """``Wrong`` in one line unless ``out`` was written last by a cuDNN graph with the convolution ``kinds`` that read
    every other input in ``names``, with nothing torch computed on the way (``trace``: the call's)."""
    trace.require_graph_output(t[out], out, kinds=kinds, inputs=tuple(n for n in names if n != out))


def _check_fused(answer, names: tuple, references, fix: str, *, out: str = "y", kinds: tuple = ("CONV_FPROP",),
                 make=tensors, grade_with=grade) -> str:
    """Run on ``make``'s tensors, grade ``out`` with ``grade_with`` against ``references(t)``, trace who wrote it (a graph
    with ``kinds``), then count one call's kernels on a fresh poisoned output (GPU only)."""
    device, dtype = grading_setup()   # needs a GPU unless grading on the CPU: one line if there is none
    t = make(dtype=dtype, device=device)
    with tracing({name: t[name] for name in names}) as trace, trace.answer():
        _run(answer, names, t)
    right, wrong = references(t)
    err = grade_with(t[out], right, wrong)
    require_fused(trace, t, names, out=out, kinds=kinds)
    if device == "cpu":
        return f"correct on the CPU — rel err {err:.1e} (the kernel count needs a GPU)"
    fresh = dict(t, **{out: poison_(torch.empty_like(t[out]))})
    one_kernel(kernels_launched(lambda: answer(*(fresh[name] for name in names))), fix)
    return f"correct — one kernel, rel err {err:.1e}"


@checker("02.residual_block")
def check_residual_block(answer) -> str:
    """``answer(x, w, b, r, y)`` writes relu(conv(x, w) + b + r) into y with one kernel."""
    return _check_fused(answer, ("x", "w", "b", "r", "y"), residual_references,
                        "add the residual inside the graph (graph.add), before the ReLU")


@checker("02.folded_bn")
def check_folded_bn(answer) -> str:
    """``answer(x, w, scale, shift, y)`` writes relu(conv(x, w) * scale + shift) into y with one kernel."""
    return _check_fused(answer, ("x", "w", "scale", "shift", "y"), folded_bn_references,
                        "multiply and add inside the graph (graph.scale or graph.mul, graph.bias), not in torch")


@checker("02.dgrad_drelu")
def check_dgrad_drelu(answer) -> str:
    """``answer(dy, w, x, dx)`` writes relu_backward(conv_dgrad(dy, w), x) into dx with one kernel: a graph with a
    CONV_DGRAD node that read dy, w and x."""
    return _check_fused(answer, ("dy", "w", "x", "dx"), dgrad_drelu_references,
                        "put the ReLU backward in the dgrad graph (graph.relu_backward(dgrad, x)), not a second one",
                        out="dx", kinds=("CONV_DGRAD",), make=dgrad_tensors, grade_with=grade_dx)


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H

NHWC = torch.channels_last
FP32_INSIDE = dict(intermediate_data_type=torch.float32, compute_data_type=torch.float32)


def _new_graph(dtype):
    """An empty graph: ``dtype`` in memory, fp32 for the math and for the virtual tensors between ops."""
    return H.load_cudnn().pygraph(io_data_type=dtype, handle=H.get_handle(), **FP32_INSIDE)


def _conv3x3(g, named, x, w):
    """The convolution node: x and w become graph inputs, its output stays virtual."""
    image, weight = named.input("x", x, layout=NHWC), named.input("w", w, layout=NHWC)
    return g.conv_fprop(image, weight, padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="conv")


def _build_and_run(g, named):
    H.build(g)
    g.execute(named.pack(), H.workspace_for(g), handle=H.get_handle())


def residual_block(x, w, b, r, y):
    """y = relu(conv(x, w) + b + r): the residual is one more graph input, added before the ReLU."""
    g = _new_graph(x.dtype)
    named = H.GraphIO(g, dtype=x.dtype)
    with_bias = g.bias(_conv3x3(g, named, x, w), named.input("b", b, layout=NHWC), name="bias")
    with_residual = g.add(with_bias, named.input("r", r, layout=NHWC), name="residual")
    named.output("y", g.relu(with_residual, name="relu"), y)
    _build_and_run(g, named)


def folded_bn(x, w, scale, shift, y):
    """y = relu(conv(x, w) * scale + shift): batch norm's per-channel affine map in the epilogue."""
    g = _new_graph(x.dtype)
    named = H.GraphIO(g, dtype=x.dtype)
    scaled = g.scale(_conv3x3(g, named, x, w), named.input("scale", scale, layout=NHWC), name="scale")
    shifted = g.bias(scaled, named.input("shift", shift, layout=NHWC), name="shift")
    named.output("y", g.relu(shifted, name="relu"), y)
    _build_and_run(g, named)


def dgrad_drelu(dy, w, x, dx):
    """dx = relu_backward(conv_dgrad(dy, w), x): the convolution's data gradient, masked in its epilogue by the
    ReLU that produced x (the gradient passes where x > 0). conv_dgrad takes w as the forward used it."""
    g = _new_graph(dy.dtype)
    named = H.GraphIO(g, dtype=dy.dtype)
    dgrad = g.conv_dgrad(named.input("dy", dy, layout=NHWC), named.input("w", w, layout=NHWC),
                         padding=[1, 1], stride=[1, 1], dilation=[1, 1], name="dgrad")
    named.output("dx", g.relu_backward(dgrad, named.input("x", x, layout=NHWC), name="drelu"), dx)
    _build_and_run(g, named)
