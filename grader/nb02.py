"""Checkers for notebook 02: conv epilogues that must stay ONE fused kernel.

    02.residual_block   relu(conv(x, w) + b + r)        a ResNet block's residual, added inside the graph
    02.folded_bn        relu(conv(x, w) * scale + shift) inference batch norm folded into the epilogue
    02.dgrad_drelu      relu_backward(conv_dgrad(dy, w), x)  the backward: dgrad with the previous ReLU's mask

Each runs the answer on its own NHWC inputs (3x3 filter, padding 1) with a NaN-poisoned output, grades it against
float64 PyTorch on a copy of the inputs the answer never sees (naming the usual mistake), traces who wrote it (a cuDNN
graph with the exercise's convolution that read every input, no torch compute on the way, torch's own cuDNN
convolutions included), then runs that graph again on inputs of the checker's own, with the pre-activation mostly
negative so that a leaky or shifted activation shows (work done outside the graph, on the host or in another thread,
then fails). It calls the answer a second time on new values at new addresses (a graph cached with the first call's
tensors fails, naming what it still reads) and counts that call's GPU kernels: the point is one. Inside
``grading_on("cpu")`` it grades up to the kernel count.
"""
from __future__ import annotations

from itertools import combinations

import torch
import torch.nn.functional as F

from helpers.checking import poison_
from helpers.timing.kernels import kernels_launched, short_kernel_name
from . import NotDone, Wrong, agrees, checker, grade_output, grading_setup, inputs
from .graph_runs import rerun, settle
from .provenance import tracing

# Small: each answer builds its graph per call, and a checker calls it twice. Channel counts are multiples
# of 8 (tensor-core kernels); N, C, H=W, K, filter, padding, stride.
SHAPE = dict(n=8, c=64, hw=28, k=64, rs=3, pad=1, stride=1)
# The backward's: C != K, so a filter used as it is in a forward convolution of dy (k channels in, w expects c)
# cannot run, and only a transposed one fits: dy [n,k,h,w], w [k,c,3,3], x and dx [n,c,h,w]. Nor can x's mask
# (c channels) be applied to dy (k channels) before dgrad: that mistake fails to build, so it needs no formula.
DGRAD_SHAPE = dict(n=8, c=64, hw=28, k=32, rs=3, pad=1, stride=1)
SEED = 2
SECOND_SEED = SEED + 1   # the answer's second call: new values at new addresses
RERUN_SEED = SEED + 2    # the checker's own inputs for running the answer's graph again
NEGATIVE_SHIFT = -3.0    # added to b (or shift) there: ~3 % of pre-activations positive, so the negative side shows


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


def rerun_tensors(*, dtype, device: str = "cuda", seed: int = RERUN_SEED) -> dict:
    """``tensors`` with b and shift moved by ``NEGATIVE_SHIFT``: most pre-activations negative, so an activation that
    lets 1 % of a negative input through (a leaky ReLU) is off by about 20 %, far outside bf16's tolerance."""
    t = tensors(dtype=dtype, device=device, seed=seed)
    for name in ("b", "shift"):
        t[name] = (t[name].float() + NEGATIVE_SHIFT).to(dtype).contiguous(memory_format=torch.channels_last)
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


def dgrad_rerun_tensors(*, dtype, device: str = "cuda", seed: int = RERUN_SEED) -> dict:
    """The checker's own dy, w, x and dx for running the answer's dgrad graph again."""
    return dgrad_tensors(dtype=dtype, device=device, seed=seed)


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


def leak(out, pre) -> float | None:
    """The slope an activation gave the negative pre-activations ``pre`` (float64) where ``out`` matches relu(pre)
    elsewhere and lets a small multiple of the negative side through (a leaky ReLU), or None."""
    negative = pre < 0
    if not negative.any():
        return None
    x, y = pre[negative], out.detach().double()[negative]
    slope = float((x * y).sum() / (x * x).sum())
    if not 1e-3 < slope < 0.5 or not agrees(out, torch.where(negative, slope * pre, pre)).ok:
        return None
    return slope


def pre_activations(key: str, t) -> torch.Tensor:
    """What the ReLU of exercise ``key`` reads, in float64: conv + b + r, or conv * scale + shift."""
    conv = _conv64(t)
    if key == "02.residual_block":
        return conv + t["b"].double() + t["r"].double()
    return conv * t["scale"].double() + t["shift"].double()


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
        settle()   # the caller's stream, not the device: the answer's work must be ordered on it


def require_fused(trace, t: dict, names: tuple, *, out: str = "y", kinds: tuple = ("CONV_FPROP",)) -> None:
    """``Wrong`` in one line unless ``out`` was written last by a cuDNN graph with the convolution ``kinds`` that read
    every other input in ``names``, with nothing torch computed on the way (``trace``: the call's)."""
    trace.require_graph_output(t[out], out, kinds=kinds, inputs=tuple(n for n in names if n != out))


def private_copy(t: dict, out: str) -> dict:
    """Clones of ``t``'s inputs (``out`` left out), taken before the answer runs: the references are computed from
    these, so nothing the answer does to its arguments moves what it is compared with."""
    return {name: value.clone() for name, value in t.items() if name != out}


def listed(names) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def stale_inputs(out, now: dict, first: dict, inputs: tuple, references) -> tuple | None:
    """The inputs (names, in ``inputs``' order) whose FIRST-call values explain ``out``, which a second call wrote with
    ``now``'s: every input where ``out`` is the first call's result, else the fewest that do; None where none do."""
    def explains(stale) -> bool:
        mixed = {**now, **{name: first[name] for name in stale}}
        return agrees(out, references(mixed)[0]).ok

    if explains(inputs):
        return tuple(inputs)
    for size in range(1, len(inputs)):
        for stale in combinations(inputs, size):
            if explains(stale):
                return stale
    return None


def stale_message(out: str, stale: tuple, inputs: tuple, verb: str = "wrote") -> str:
    """The one line for a second call that still read the first call's ``stale`` inputs (``verb``: what the function
    did with ``out``, "wrote" or "returned")."""
    if set(stale) == set(inputs):
        return (f"called a second time with new {listed(inputs)}, your function {verb} the first call's {out} again: "
                f"it still reads the first call's inputs (a graph or copies kept from the first call) — bind the "
                f"tensors of each call in the variant pack")
    followed = [name for name in inputs if name not in stale]
    return (f"called a second time with new {listed(inputs)}, your {out} followed the new {listed(followed)} but "
            f"not the new {listed(stale)}: it still reads the first call's {listed(stale)} (kept from the first "
            f"call) — bind every tensor of each call in the variant pack")


def grade_fused(key: str, out, t: dict, references, grade_with) -> float:
    """``grade_with`` of ``out`` against ``references(t)``; first, for an output the activation leaked into (a
    leaky ReLU where relu belongs), one line saying so."""
    right, wrong = references(t)
    if key != "02.dgrad_drelu" and not agrees(out, right).ok:
        slope = leak(out, pre_activations(key, t))
        if slope is not None:
            raise Wrong(f"the ReLU lets negative values through: they come out times {slope:.2g} (a leaky ReLU) — "
                        "use graph.relu with no negative_slope")
    return grade_with(out, right, wrong)


def rerun_why(done) -> str:
    """Why a graph that ``rerun`` ran again (``done``) computed the wrong output, in the learner's terms."""
    if done.foreign:
        count = len(done.foreign)
        return (f"it reads {count} tensor{'s' if count > 1 else ''} you made yourself, which did not change with the "
                "inputs: a result computed outside the graph (on the host, in another thread), or a copy of an "
                "input, does not count")
    if done.unread:
        return f"it does not read the {listed(done.unread)} it was given"
    return ("work done after the graph ran (on the host, in another thread, by torch) does not count: do all of it "
            "inside the graph")


def graph_again(trace, key: str, t: dict, names: tuple, out: str, references, rerun_make, grade_with) -> float:
    """Run the graphs that wrote ``out`` again (``graph_runs.rerun``: the answer's code not called), their UIDs bound
    to ``rerun_make``'s new tensors, and grade what they wrote: its relative error, or ``Wrong`` naming what the
    graph alone computes and why (``trace``: the first call's)."""
    device, dtype = grading_setup()
    own = rerun_make(dtype=dtype, device=device)
    given = {name: t[name] for name in names if name != out}
    runs = trace.runs.feeding(t[out])
    if not runs:
        raise Wrong(f"no execute of your graph had {out} itself as its output (a view of part of it?): mark the "
                    f"{out} you are given as the graph's output")
    done = rerun(runs, given, {out: t[out]}, fresh=lambda name, old: own[name])
    if device == "cuda":
        settle()
    changed = listed(given)
    try:
        return grade_fused(key, done.outputs[out], dict(done.inputs), references, grade_with)
    except Wrong as exc:
        raise Wrong(f"your graph, run again by the checker on new {changed} (bound by UID, your code not called), "
                    f"does not compute {out} by itself: {exc} — {rerun_why(done)}") from None


def _second_call(answer, key: str, names: tuple, out: str, first: dict, references, make, grade_with, count: bool):
    """Call ``answer`` again on ``make``'s tensors for ``SECOND_SEED`` (new values at new addresses, a poisoned
    output) and grade what it wrote: ``Wrong`` naming the first call's inputs it still reads. The kernels of one such
    call where ``count`` (``kernels_launched`` calls it twice), else None."""
    device, dtype = grading_setup()
    second = make(dtype=dtype, device=device, seed=SECOND_SEED)
    kept = private_copy(second, out)

    def call():
        _run(answer, names, second)

    launched = kernels_launched(call) if count else call()
    inputs = tuple(name for name in names if name != out)
    right, _ = references(kept)
    if not agrees(second[out], right).ok:
        stale = stale_inputs(second[out], kept, first, inputs, references)
        if stale:
            raise Wrong(stale_message(out, stale, inputs))
        try:
            grade_fused(key, second[out], kept, references, grade_with)
        except Wrong as exc:
            raise Wrong(f"on a second call with new {listed(inputs)}: {exc}") from None
    return launched


def _check_fused(answer, key: str, names: tuple, references, fix: str, *, out: str = "y",
                 kinds: tuple = ("CONV_FPROP",), make=tensors, rerun_make=rerun_tensors, grade_with=grade) -> str:
    """Run on ``make``'s tensors, grade ``out`` with ``grade_with`` against ``references`` of a private copy of them,
    trace who wrote it (a graph with ``kinds``), run that graph again on ``rerun_make``'s tensors, then call the
    answer again on new tensors, graded, and count that call's kernels (GPU only)."""
    device, dtype = grading_setup()   # needs a GPU unless grading on the CPU: one line if there is none
    t = make(dtype=dtype, device=device)
    first = private_copy(t, out)
    with tracing({name: t[name] for name in names}) as trace, trace.answer():
        _run(answer, names, t)
    err = grade_fused(key, t[out], first, references, grade_with)
    require_fused(trace, t, names, out=out, kinds=kinds)
    graph_again(trace, key, t, names, out, references, rerun_make, grade_with)
    launched = _second_call(answer, key, names, out, first, references, make, grade_with, count=device != "cpu")
    if device == "cpu":
        return f"correct on the CPU — rel err {err:.1e} (the kernel count needs a GPU)"
    one_kernel(launched, fix)
    return f"correct — one kernel, rel err {err:.1e}"


@checker("02.residual_block")
def check_residual_block(answer) -> str:
    """``answer(x, w, b, r, y)`` writes relu(conv(x, w) + b + r) into y with one kernel."""
    return _check_fused(answer, "02.residual_block", ("x", "w", "b", "r", "y"), residual_references,
                        "add the residual inside the graph (graph.add), before the ReLU")


@checker("02.folded_bn")
def check_folded_bn(answer) -> str:
    """``answer(x, w, scale, shift, y)`` writes relu(conv(x, w) * scale + shift) into y with one kernel."""
    return _check_fused(answer, "02.folded_bn", ("x", "w", "scale", "shift", "y"), folded_bn_references,
                        "multiply and add inside the graph (graph.scale or graph.mul, graph.bias), not in torch")


@checker("02.dgrad_drelu")
def check_dgrad_drelu(answer) -> str:
    """``answer(dy, w, x, dx)`` writes relu_backward(conv_dgrad(dy, w), x) into dx with one kernel: a graph with a
    CONV_DGRAD node that read dy, w and x."""
    return _check_fused(answer, "02.dgrad_drelu", ("dy", "w", "x", "dx"), dgrad_drelu_references,
                        "put the ReLU backward in the dgrad graph (graph.relu_backward(dgrad, x)), not a second one",
                        out="dx", kinds=("CONV_DGRAD",), make=dgrad_tensors, rerun_make=dgrad_rerun_tensors,
                        grade_with=grade_dx)


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
