"""Checkers for notebook 02: conv epilogues that must stay ONE fused kernel.

    02.residual_block   relu(conv(x, w) + b + r)        a ResNet block's residual, added inside the graph
    02.folded_bn        relu(conv(x, w) * scale + shift) inference batch norm folded into the epilogue

Each checker runs the answer on its own NHWC inputs (3x3 filter, padding 1, stride 1) with a NaN-poisoned
output, compares the output with a float64 PyTorch reference, names the usual mistake when the output
matches a wrong formula instead, then traces who wrote y (``provenance``: a cuDNN graph with a convolution that
read every input, no torch compute on the way — torch's own cuDNN convolution ops included) and counts the GPU
kernels of one call: the point is one. Inside ``grading_on("cpu")`` it grades on the CPU up to the kernel count,
so a torch answer is refused there too.
torch and the GPU are touched only inside the functions, so this module imports on any machine.
"""
from __future__ import annotations

from . import NotDone, Wrong, checker, grade_output, grading_setup

# Small: each answer builds its graph per call, and a checker calls it twice. Channel counts are multiples
# of 8 (tensor-core kernels); N, C, H=W, K, filter, padding, stride.
SHAPE = dict(n=8, c=64, hw=28, k=64, rs=3, pad=1, stride=1)
SEED = 2


def tensors(*, dtype, device: str = "cuda", seed: int = SEED) -> dict:
    """The checkers' inputs: the recipe's x, w, b and poisoned y (NHWC), a residual r shaped like y, and a
    per-channel scale in [0.25, 2] and shift (1xKx1x1). Reproducible for a given seed."""
    import torch

    from ..recipes.conv_bias_relu import make_tensors

    t = make_tensors(**SHAPE, dtype=dtype, seed=seed, device=device)
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
    import torch.nn.functional as F

    return F.conv2d(t["x"].double(), t["w"].double(), padding=SHAPE["pad"], stride=SHAPE["stride"])


def residual_references(t) -> tuple:
    """The right answer and, by the mistake that gives it, the usual wrong ones (all float64)."""
    import torch

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
    import torch

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


def grade(out, right, wrong: dict) -> float:
    """The relative error of ``out`` (y) against ``right``, or ``Wrong`` in one line naming the mistake: the
    course's grading cascade, ``grade_output``."""
    return grade_output(out, right, wrong, what="the output",
                        all_nan_hint="mark the graph's output with the y you are given (io.output) and execute the graph")


def _short(kernel: str) -> str:
    """A kernel's name without its template arguments and parameter list, cut to 40 characters."""
    name = kernel.removeprefix("void ")
    for cut in ("<", "("):
        name = name.split(cut, 1)[0]
    return name[:40]


def one_kernel(names: list, fix: str) -> None:
    """Raise ``Wrong`` unless ``names`` (the kernels of one call) is exactly one kernel; ``fix`` says how."""
    if len(names) == 1:
        return
    if not names:
        raise Wrong("one call launched no GPU kernel: execute the graph inside the function, on "
                    "H.get_handle()")
    shown = ", ".join(_short(n) for n in names[:3]) + (", ..." if len(names) > 3 else "")
    raise Wrong(f"the output is correct but one call launched {len(names)} kernels ({shown}); the point is "
                f"one — {fix}")


def _run(answer, names: tuple, t: dict):
    """Call ``answer`` on the tensors ``names`` of ``t``; ``NotDone`` if it returns ``...``."""
    import torch

    returned = answer(*(t[name] for name in names))
    if returned is Ellipsis:
        raise NotDone(f"not done yet — {getattr(answer, '__name__', 'your answer')} returned ...")
    if t["y"].is_cuda:
        torch.cuda.synchronize()


def require_fused(trace, t: dict, names: tuple) -> None:
    """``Wrong`` in one line unless y was written last by a cuDNN graph with a convolution that read every input in
    ``names`` (y aside), with nothing torch computed on the way (``trace``: the ``provenance.Trace`` of the call)."""
    trace.require_graph_output(t["y"], "y", kinds=("CONV_FPROP",), inputs=tuple(n for n in names if n != "y"))


def _check_fused(answer, names: tuple, references, fix: str) -> str:
    """Run, grade against ``references(t)``, trace who wrote y, then count one call's kernels on a fresh poisoned
    output (GPU only)."""
    import torch

    from ..checking import poison_
    from ..timing.kernels import kernels_launched
    from .provenance import tracing

    device, dtype = grading_setup()   # needs a GPU unless grading on the CPU: one line if there is none
    t = tensors(dtype=dtype, device=device)
    with tracing() as trace:
        for name in names:
            trace.input(name, t[name])
        with trace.answer():
            _run(answer, names, t)
    right, wrong = references(t)
    err = grade(t["y"], right, wrong)
    require_fused(trace, t, names)
    if device == "cpu":
        return f"correct on the CPU — rel err {err:.1e} (the kernel count needs a GPU)"
    fresh = dict(t, y=poison_(torch.empty_like(t["y"])))
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
