"""Checkers for notebook 04: matmul epilogues, their AMAX output, an FP8 GEMM, and an RMSNorm backward.

    04.silu_amax          y = silu(a @ b + bias) and one AMAX per batch entry, [batch, 1, 1], from one graph
    04.scaled_relu        y = relu(alpha * a @ b + bias) built once; alpha changes per call, passed by value
    04.fp8_matmul_amax    y = (a8 @ b8) * descale_a * descale_b in bf16 and its AMAX, from e4m3 inputs
    04.rmsnorm_backward   dx and dscale of y = x * inv_rms(x) * scale from dy and the forward's saved inv_var,
                          both written by one execute of one graph with an RMSNORM_BWD node

Each checker runs the answer on its own small inputs, grades it against PyTorch in fp32 (``grade_output``, naming the
usual mistake), traces who wrote each graded output (a cuDNN graph with the exercise's operation that read its inputs,
nothing torch computed on the way: cuBLAS under an epilogue graph, ``torch._scaled_mm``, an AMAX by torch, autograd's
backward all fail by name), rejects torch kernels next to the graph, and requires the point of each exercise from the
executes: y and its AMAX from one execute of one graph, alpha passed by value at every execute, dx and dscale from one
execute that read the inv_var the forward saved. The ``grade_*`` functions take plain tensors, so they run, and are
tested, on the CPU too.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from helpers.checking import poison_, tolerance
from helpers.quantize import to_fp8
from helpers.timing.kernels import kernels_launched, short_kernel_name
from . import NotDone, Wrong, agrees, checker, grade_output, grading_setup, inputs
from .contracts import call_each, require_contract
from .graph_runs import StreamOrder, rerun, settle
from .nb02 import listed, rerun_why, stale_inputs, stale_message
from .provenance import tracing

# batch, M, K, N: small (each answer builds its graph per call), whole tiles for the tensor cores
SILU_SHAPE = (4, 128, 256, 128)
RELU_SHAPE = (2, 128, 256, 128)
FP8_SHAPE = (1, 128, 256, 128)
ALPHAS = (0.5, -1.75, 2.0)   # the values 04.scaled_relu's run(alpha) is called with, in this order
NORM_SHAPE = (256, 1024)     # rows, hidden: hidden a multiple of 8 and >= 64, as the norm engines want it
SEED = 4
AGAIN_SEED = SEED + 20       # the checker's own inputs for running the answer's graph again
CALL_SEED = SEED + 30        # the answer's later calls: new values at new addresses
LATER_SILU_SHAPES = (SILU_SHAPE, (2, 128, 256, 128))   # 04.silu_amax's later calls: new values, then another batch
AGAIN_ALPHA = -0.75          # the alpha 04.scaled_relu's graph is run again with (none of ALPHAS)
DESCALE_GAIN = (3.0, 0.25)   # 04.fp8_matmul_amax's graph runs again with its descales times these


# ------------------------------------------------------------------ inputs (made on the CPU: reproducible)
def silu_inputs(*, dtype, device: str = "cuda", seed: int = SEED, shape: tuple = SILU_SHAPE) -> dict:
    """a [B,M,K] with a different spread per batch entry (so the entries' maxima differ), b [B,K,N] scaled by
    1/sqrt(K), and a bias [1,1,N] around -1.5 (so the largest |pre-activation| is a negative value, which
    SiLU squashes: the AMAX of the pre-activation is far from the AMAX of y). ``shape``: (B, M, K, N)."""
    gen = torch.Generator().manual_seed(seed)
    batch, m, k, n = shape
    spread = torch.linspace(0.5, 2.0, batch).reshape(batch, 1, 1)
    t = dict(a=torch.randn(batch, m, k, generator=gen) * spread,
             b=torch.randn(batch, k, n, generator=gen) / k**0.5,
             bias=-1.5 + 0.25 * torch.randn(1, 1, n, generator=gen))
    return {name: x.to(device=device, dtype=dtype) for name, x in t.items()}


def relu_inputs(*, dtype, device: str = "cuda", seed: int = SEED) -> dict:
    """a [B,M,K], b [B,K,N] (1/sqrt(K)), bias [1,1,N], and a NaN-poisoned output y [B,M,N]."""
    gen = torch.Generator().manual_seed(seed + 1)
    batch, m, k, n = RELU_SHAPE
    t = dict(a=torch.randn(batch, m, k, generator=gen), b=torch.randn(batch, k, n, generator=gen) / k**0.5,
             bias=0.5 * torch.randn(1, 1, n, generator=gen))
    t = {name: x.to(device=device, dtype=dtype) for name, x in t.items()}
    t["y"] = poison_(torch.empty(batch, m, n, device=device, dtype=dtype))
    return t


def fp8_inputs(*, device: str = "cuda", seed: int = SEED) -> dict:
    """Per-tensor e4m3 quantization, as in notebook 04's section 8: a8 [1,M,K] row-major, b8 [1,K,N]
    column-major (the transpose view of a contiguous N x K tensor), and descale_a/descale_b as 1x1x1 fp32
    device tensors (1/scale, scale = 448/amax). The two descales differ, and neither is near 1."""
    gen = torch.Generator().manual_seed(seed + 2)
    batch, m, k, n = FP8_SHAPE
    a8, descale_a = to_fp8(torch.randn(batch, m, k, generator=gen))
    b8_nk, descale_b = to_fp8(torch.randn(batch, n, k, generator=gen) / k**0.5)
    return dict(a8=a8.to(device), b8=b8_nk.to(device).transpose(1, 2), descale_a=descale_a.to(device),
                descale_b=descale_b.to(device))


# ------------------------------------------------------------------ grading (any device)
def _pair(result, what: str):
    """``result`` as (y, amax): NotDone for None/..., Wrong for anything but two tensors."""
    if result is None or result is Ellipsis:
        raise NotDone(f"not done yet — return {what}")
    if not (isinstance(result, (tuple, list)) and len(result) == 2
            and all(isinstance(x, torch.Tensor) for x in result)):
        raise Wrong(f"return {what}: two tensors, got {type(result).__name__}")
    return result


def grade_amax(amax, y, want_shape: tuple, wrong: dict) -> None:
    """``amax`` must have ``want_shape`` and equal max|y| of the answer's own ``y`` over the reduced dims (by norm
    and element-wise, within ``H.tolerance("amax")``: the two differ only by y's final rounding when the engine
    reduces the fp32 value before the cast); otherwise ``Wrong`` naming the mistake it matches (``wrong``:
    message -> value)."""
    dims = tuple(i for i, size in enumerate(want_shape) if size == 1)
    want = y.detach().float().abs().amax(dim=dims, keepdim=True)
    if tuple(amax.shape) != tuple(want_shape):
        if amax.numel() == 1 and want.numel() > 1:
            raise Wrong(f"amax is one number (shape {tuple(amax.shape)}), the maximum over everything; the task "
                        f"wants one per batch entry, shape {tuple(want_shape)} — the AMAX buffer's shape says "
                        f"which dimensions the reduction collapses")
        raise Wrong(f"amax has shape {tuple(amax.shape)}, want {tuple(want_shape)}")
    got = amax.detach().float()
    if torch.isnan(got).any():
        raise Wrong("amax holds NaN: it was never written, or the reduction read unwritten values")
    tol = tolerance("amax")
    result = agrees(got, want, tol)
    if result.ok:
        return
    if not got.abs().any():
        raise Wrong("amax is all zeros: it was never written — mark the reduction's output with the amax buffer")
    for mistake, value in wrong.items():
        if agrees(got, value.float().reshape(got.shape), tol).ok:
            raise Wrong(mistake)
    shown = ", ".join(f"{v:.4g}" for v in got.flatten()[:4].tolist())
    wanted = ", ".join(f"{v:.4g}" for v in want.flatten()[:4].tolist())
    raise Wrong(f"amax does not match max|y|: got [{shown}], want [{wanted}] (rel err {result.rel_err:.2g})")


def silu_references(t) -> tuple:
    """silu(a @ b + bias) in fp32 and, by the mistake that gives it, the usual wrong outputs."""
    acc = t["a"].float() @ t["b"].float()
    pre = acc + t["bias"].float()
    wrong = {
        "y is GELU(a @ b + bias): the activation is still GELU — use graph.swish(..., swish_beta=1.0) for SiLU":
            F.gelu(pre),
        "y is ReLU(a @ b + bias), not SiLU — use graph.swish(..., swish_beta=1.0)": F.relu(pre),
        "y misses the bias: it is silu(a @ b) — add the bias before the activation": F.silu(acc),
        "y has no activation: it is a @ b + bias — add graph.swish after the bias": pre,
    }
    return F.silu(pre), wrong


def grade_silu_amax(t, result) -> str:
    """Grade ``(y, amax)`` for the inputs ``t`` of 04.silu_amax."""
    y, amax = _pair(result, "(y, amax)")
    if y.dtype != t["a"].dtype:
        raise Wrong(f"y is {y.dtype}; store it in the inputs' dtype, {t['a'].dtype}")
    right, wrong = silu_references(t)
    err = grade_output(y, right, wrong)
    acc = t["a"].float() @ t["b"].float()
    pre = acc + t["bias"].float()
    batch = t["a"].shape[0]
    per_entry = (1, 2)
    grade_amax(amax, y, (batch, 1, 1), {
        "amax is taken on the pre-activation (a @ b + bias), not on the output: reduce the swish node's output":
            pre.abs().amax(dim=per_entry, keepdim=True),
        "amax is taken on the matmul result, before the bias and the activation: reduce the output y":
            acc.abs().amax(dim=per_entry, keepdim=True),
        "every amax entry holds the maximum over the whole tensor, not its own batch entry's: the reduction must "
        "keep the batch dimension (output shape [batch, 1, 1])":
            y.float().abs().amax().expand(batch, 1, 1),
    })
    return f"correct — y rel err {err:.1e}, {batch} AMAX values (one per batch entry) match max|y|"


def relu_references(t, alpha: float) -> tuple:
    """relu(alpha * a @ b + bias) in fp32 and the usual wrong outputs (no earlier-alpha ones: see grade)."""
    acc = t["a"].float() @ t["b"].float()
    bias = t["bias"].float()
    wrong = {}
    if alpha != 1.0:
        wrong["run(alpha) ignores alpha: y is relu(a @ b + bias) — multiply by the alpha tensor in the graph"] = \
            F.relu(acc + bias)
    wrong.update({
        "y misses the bias: it is relu(alpha * a @ b) — add the bias before the activation": F.relu(alpha * acc),
        "y is GELU(alpha * a @ b + bias): the activation is still GELU — use graph.relu": F.gelu(alpha * acc + bias),
        "y has no activation: it is alpha * a @ b + bias — add graph.relu after the bias": alpha * acc + bias,
    })
    return F.relu(alpha * acc + bias), wrong


def grade_scaled_relu(t, alpha: float, earlier: tuple = ()) -> float:
    """Grade ``t["y"]`` after ``run(alpha)``; ``earlier`` are the alphas of the calls before (their results
    are the tell-tale of an alpha fixed at build time)."""
    right, wrong = relu_references(t, alpha)
    stale = {}
    for previous in earlier:
        stale[f"run({alpha}) gave the result for alpha={previous}, an earlier call's: alpha is fixed in the "
              f"graph — pass it by value in the variant pack at every execute (a 1x1x1 CPU tensor)"] = \
            relu_references(t, previous)[0]
    return grade_output(t["y"], right, {**stale, **wrong})


def fp8_references(t) -> tuple:
    """(a8 @ b8) * descale_a * descale_b in fp32 and the usual wrong outputs."""
    raw = t["a8"].float() @ t["b8"].float()
    da, db = t["descale_a"].float(), t["descale_b"].float()
    wrong = {
        "y is the raw e4m3 product a8 @ b8: multiply by descale_a and descale_b in the epilogue": raw,
        "only descale_a is applied: multiply by descale_b too": raw * da,
        "only descale_b is applied: multiply by descale_a too": raw * db,
    }
    return raw * da * db, wrong


def grade_fp8_matmul_amax(t, result) -> str:
    """Grade ``(y, amax)`` for the inputs ``t`` of 04.fp8_matmul_amax."""
    y, amax = _pair(result, "(y, amax)")
    if y.dtype != torch.bfloat16:
        raise Wrong(f"y is {y.dtype}; store it in bfloat16 (the output buffer's dtype)")
    right, wrong = fp8_references(t)
    err = grade_output(y, right, wrong)
    raw = t["a8"].float() @ t["b8"].float()
    grade_amax(amax, y, (1, 1, 1), {
        "amax is taken before the descales (on the raw e4m3 product): reduce the descaled output y":
            raw.abs().amax().reshape(1, 1, 1),
    })
    return f"correct — y rel err {err:.1e} against fp32 on the dequantized inputs, AMAX matches max|y|"


# ------------------------------------------------------------------ what ran on the GPU
def torch_kernels(names: list) -> list:
    """The kernels in ``names`` that are torch's element-wise/reduction kernels or Triton's (fills, which
    allocating and poisoning buffers launch, left out)."""
    return [n for n in names if ("at::native::" in n or n.startswith("triton")) and "FillFunctor" not in n]


def graph_only(names: list, what: str) -> None:
    """``Wrong`` unless ``names`` (the kernels of one call) ran something and none of it was torch's."""
    if not names:
        raise Wrong("one call launched no GPU kernel: execute the graph inside the function, on H.get_handle()")
    extra = torch_kernels(names)
    if extra:
        shown = ", ".join(dict.fromkeys(short_kernel_name(n.removeprefix("void ").removeprefix("at::native::"), 40)
                                        for n in extra))
        raise Wrong(f"the result is right, but torch kernels ran next to the graph ({shown}): compute {what} "
                    f"inside the cuDNN graph")


def one_graph_wrote(runs, outputs: dict, what: str) -> None:
    """``Wrong`` in one line unless one execute of one graph wrote every tensor in ``outputs`` (name -> tensor) and
    no other graph ran: the point of a fused epilogue (``runs``: the ``GraphRuns`` of one call; ``what`` names
    the fused work in the message)."""
    writers = {name: runs.require_written(tensor, name, how="make it an output of your graph")
               for name, tensor in outputs.items()}
    graphs = runs.graphs()
    writing = len({id(w.graph) for w in writers.values()})
    if writing > 1:
        raise Wrong(f"{' and '.join(outputs)} come from {writing} separate cuDNN graphs: the point is one graph "
                    f"— put {what} in the graph that computes {next(iter(outputs))}")
    if len(graphs) > 1:
        raise Wrong(f"the result is right, but one call executed {len(graphs)} cuDNN graphs: the point is one graph "
                    f"that computes {' and '.join(outputs)}")


def alpha_by_value(runs, y, alpha: float) -> None:
    """``Wrong`` in one line unless the execute that wrote ``y`` during ``run(alpha)`` passed ``alpha`` by value:
    a pass-by-value tensor of the graph, bound to a host value equal to ``alpha`` (``runs``: that call's runs)."""
    writer = runs.require_written(y, "y", how=f"run({alpha}) must execute the graph, with y as its output")
    scalars = writer.scalars()
    if not scalars:
        raise Wrong(f"run({alpha}) gives the right y, but alpha is not passed by value: the graph has no "
                    "pass-by-value scalar (a device tensor refreshed before each execute costs a kernel per call) "
                    "— declare alpha from a 1x1x1 CPU tensor and put this call's value in the variant pack")
    if not any(math.isclose(v, alpha, rel_tol=1e-6, abs_tol=1e-12) for v in scalars.values()):
        shown = ", ".join(f"{v:g}" for v in scalars.values())
        raise Wrong(f"run({alpha}) gives the right y, but the graph's pass-by-value scalar held {shown}, not "
                    f"alpha: pass this call's alpha by value in the variant pack")


# ------------------------------------------------------------------ the checkers (GPU; on the CPU up to the kernels)
def require_from_graph(trace, outputs: dict, inputs: tuple) -> None:
    """``Wrong`` in one line unless each tensor in ``outputs`` (name -> tensor) was written last by a cuDNN graph
    with a matmul that read every input in ``inputs``, with nothing torch computed on the way."""
    for name, tensor in outputs.items():
        trace.require_graph_output(tensor, name, kinds=("MATMUL",), inputs=inputs)


def _sync(device: str) -> None:
    if device == "cuda":
        settle()   # the caller's stream only: work the answer left on a side stream is not waited for


def _caller_order(device: str):
    """A ``StreamOrder`` on the GPU (launches off the caller's stream are held, then checked), else None."""
    return StreamOrder() if device == "cuda" else None


def require_ordered(order, what: str) -> None:
    """``Wrong`` unless every launch the answer made off the caller's stream was ordered before it (GPU only)."""
    if order is not None:
        order.require_ordered(what, how="or simply execute on the caller's stream: H.get_handle() binds the "
                                        "handle to it")


def private_copy(t: dict) -> dict:
    """Clones of ``t``, taken before the answer runs: what the references are computed from."""
    return {name: value.clone() for name, value in t.items()}


def _call_traced(answer, names: tuple, t: dict, what: str):
    """The answer's result on ``t``'s tensors ``names`` and the trace of that call, its launches held where they are
    off the caller's stream (``Wrong`` naming ``what`` if the caller's stream would not wait for them)."""
    device = "cuda" if t[names[0]].is_cuda else "cpu"
    order = _caller_order(device)
    with tracing({name: t[name] for name in names}, order=order) as trace:
        with trace.answer():
            result = answer(*(t[name] for name in names))
    require_ordered(order, what)
    _sync(device)
    return result, trace


def require_new_outputs(y, amax, given: dict, *, y_dtype, amax_shape: tuple) -> None:
    """The statement's contract of a returned (y, amax): y contiguous, of ``y_dtype``; amax fp32 of ``amax_shape``;
    both new tensors (no memory shared with the inputs ``given`` or with each other)."""
    require_contract(y, "y", dtype=y_dtype, strides="contiguous", apart_from=given,
                     how="allocate it with torch.empty(batch, M, N, ...) inside your function")
    require_contract(amax, "amax", shape=amax_shape, dtype=torch.float32,
                     dtype_why="the AMAX is kept in fp32, whatever y's dtype", apart_from=dict(given, y=y),
                     how="allocate it with torch.zeros(..., dtype=torch.float32)")


def _again_line(changed, what: str, exc: Exception, done) -> str:
    return (f"your graph, run again by the checker on new {listed(changed)} (bound by UID, your code not called), "
            f"does not compute {what} by itself: {exc} — {rerun_why(done)}")


def _zero_amax(name, old):
    """A new output buffer for a run again: 0 for an AMAX (a reduction may max into it), NaN otherwise."""
    new = torch.empty_strided(old.size(), old.stride(), dtype=old.dtype, device=old.device)
    return new.zero_() if name == "amax" else new.fill_(float("nan"))


def epilogue_again(trace, t: dict, names: tuple, result, own: dict, grade_with, fresh=None) -> None:
    """Run the graph that wrote y and amax again (``graph_runs.rerun``), its inputs bound to ``own``'s tensors (or
    ``fresh``'s), and grade its (y, amax) with ``grade_with(inputs, (y, amax))``; ``Wrong`` naming what the graph
    alone computes, and why."""
    y, amax = result
    given = {name: t[name] for name in names}
    done = rerun(trace.runs.feeding(y), given, dict(y=y, amax=amax), fresh=fresh or (lambda name, old: own[name]),
                 blank=_zero_amax)
    _sync("cuda" if y.is_cuda else "cpu")
    try:
        grade_with(private_copy(done.inputs), (done.outputs.get("y", y), done.outputs.get("amax", amax)))
    except Wrong as exc:
        raise Wrong(_again_line(given, "y and amax", exc, done)) from None


def calls_again(answer, names: tuple, makes: list, grade_call, first: dict, first_result, references,
                what: str = "y") -> None:
    """Call ``answer`` once per maker in ``makes`` (new values at new addresses; ``grade_call(kept inputs, result)``
    grades each): ``Wrong`` where a call returned the same tensors as an earlier one (or the first call's), changed an
    earlier result, or still read the first call's inputs (``references(t)[0]``: the right y, to name them)."""
    kept = {}

    def make_args(i):
        t = makes[i]()
        kept[i] = private_copy(t)
        return {name: t[name] for name in names}

    def outputs(args, got):
        y, amax = _pair(got, "(y, amax)")
        return dict(y=y, amax=amax)

    def check(i, args, outs):
        _sync("cuda" if outs["y"].is_cuda else "cpu")
        earlier = {f"the {name} your first call returned": tensor for name, tensor in zip(("y", "amax"), first_result)}
        for name in ("y", "amax"):
            require_contract(outs[name], name, apart_from=earlier, how="allocate new outputs at every call")
        now = kept[i]
        if tuple(now[names[0]].shape) == tuple(first[names[0]].shape) and not agrees(outs["y"], references(now)[0]).ok:
            stale = stale_inputs(outs["y"], now, first, names, references)
            if stale:
                raise Wrong(stale_message(what, stale, names, verb="returned"))
        try:
            grade_call(now, (outs["y"], outs["amax"]))
        except Wrong as exc:
            shape = "x".join(map(str, now[names[0]].shape))
            raise Wrong(f"called again with new {listed(names)} ({names[0]} {shape}): {exc}") from None

    call_each(answer, make_args, outputs, check, times=len(makes))


@checker("04.silu_amax")
def check_silu_amax(answer) -> str:
    """``answer(a, b, bias)`` returns (y, amax): silu(a @ b + bias) and max|y| per batch entry, one graph; its graph,
    run again on the checker's inputs, computes both; later calls on new inputs (another batch size) too."""
    device, dtype = grading_setup()  # needs a GPU unless grading on the CPU: one line if there is none
    names = ("a", "b", "bias")
    t = silu_inputs(dtype=dtype, device=device)
    first = private_copy(t)
    result, trace = _call_traced(answer, names, t, "y and amax")
    message = grade_silu_amax(first, result)
    y, amax = result
    require_new_outputs(y, amax, t, y_dtype=t["a"].dtype, amax_shape=(t["a"].shape[0], 1, 1))
    require_from_graph(trace, dict(y=y, amax=amax), names)
    if device == "cuda":
        graph_only(kernels_launched(lambda: answer(*(t[name] for name in names))), "the activation and the AMAX")
    one_graph_wrote(trace.runs, dict(y=y, amax=amax), "the AMAX reduction")
    epilogue_again(trace, t, names, result, silu_inputs(dtype=dtype, device=device, seed=AGAIN_SEED),
                   grade_silu_amax)
    makes = [lambda i=i, shape=shape: silu_inputs(dtype=dtype, device=device, seed=CALL_SEED + i, shape=shape)
             for i, shape in enumerate(LATER_SILU_SHAPES)]
    calls_again(answer, names, makes, grade_silu_amax, first, result, lambda u: silu_references(u))
    return message


def _rewrite_inputs(t: dict, names: tuple, seed: int) -> dict:
    """New values written in place into ``t``'s tensors ``names`` (the same buffers); returns a private copy."""
    fresh = relu_inputs(dtype=t[names[0]].dtype, device=t[names[0]].device.type, seed=seed)
    for name in names:
        t[name].copy_(fresh[name])
    return private_copy({name: t[name] for name in names})


def scaled_relu_again(trace, t: dict, alpha: float) -> None:
    """Run the graph that last wrote y again on the checker's a, b, bias and y, with ``AGAIN_ALPHA`` passed by value
    in place of ``alpha``; ``Wrong`` unless it computes relu(AGAIN_ALPHA * a @ b + bias) by itself."""
    runs = trace.runs.feeding(t["y"])
    writer = runs[-1]
    given = {name: t[name] for name in ("a", "b", "bias")}
    alpha_uid = next((uid for uid, value in writer.scalars().items() if math.isclose(value, alpha, rel_tol=1e-6)),
                     None)
    own = relu_inputs(dtype=t["a"].dtype, device=t["a"].device.type, seed=AGAIN_SEED)
    if alpha_uid is not None:   # alpha_by_value found it; the graph runs again with another
        given["alpha"] = writer.buffers[alpha_uid]
        own["alpha"] = torch.full(tuple(given["alpha"].shape), AGAIN_ALPHA, dtype=given["alpha"].dtype)
    done = rerun(runs, given, dict(y=t["y"]), fresh=lambda name, old: own[name])
    _sync(t["a"].device.type)
    try:
        grade_scaled_relu(dict(private_copy(done.inputs), y=done.outputs["y"]), AGAIN_ALPHA, (alpha,))
    except Wrong as exc:
        raise Wrong(_again_line(("a", "b", "bias", "alpha"), "y", exc, done)) from None


def scaled_relu_made_again(answer, first: dict, alpha: float) -> None:
    """``make_scaled_relu`` called again on new buffers with new values; its run(alpha) must write the new y from the
    new a, b and bias (``Wrong`` naming the first call's inputs it still reads)."""
    device = first["a"].device.type
    t = relu_inputs(dtype=first["a"].dtype, device=device, seed=CALL_SEED)
    now = private_copy(t)
    run = answer(t["a"], t["b"], t["bias"], t["y"])
    if not callable(run):
        raise Wrong(f"return a function run(alpha), got {type(run).__name__}")
    run(alpha)
    _sync(device)
    names = ("a", "b", "bias")
    references = lambda u: relu_references(u, alpha)
    if not agrees(t["y"], references(now)[0]).ok:
        stale = stale_inputs(t["y"], now, first, names, references)
        if stale:
            raise Wrong(stale_message("y", stale, names).replace(
                "called a second time", "make_scaled_relu called a second time", 1))
        try:
            grade_scaled_relu(dict(now, y=t["y"]), alpha)
        except Wrong as exc:
            raise Wrong(f"make_scaled_relu called again with new a, b, bias and y: {exc}") from None


@checker("04.scaled_relu")
def check_scaled_relu(answer) -> str:
    """``answer(a, b, bias, y)`` builds once and returns run(alpha), which writes relu(alpha * a @ b + bias); run
    follows a, b and bias rewritten in place; its graph, run again with another alpha, computes y by itself; a
    second make_scaled_relu on new buffers reads them."""
    device, dtype = grading_setup()
    t = relu_inputs(dtype=dtype, device=device)
    first = private_copy(t)
    now = first
    order = _caller_order(device)
    with tracing({name: t[name] for name in ("a", "b", "bias")}, order=order) as trace:
        runs = trace.runs
        with trace.answer():
            run = answer(t["a"], t["b"], t["bias"], t["y"])
        if run is None or run is Ellipsis:
            raise NotDone("not done yet — return the function run(alpha)")
        if not callable(run):
            raise Wrong(f"return a function run(alpha), got {type(run).__name__}")
        worst = 0.0
        for i, alpha in enumerate(ALPHAS):
            poison_(t["y"])
            if i == len(ALPHAS) - 1:   # the same buffers, new values: run must read them, not copies made at build
                now = _rewrite_inputs(t, ("a", "b", "bias"), CALL_SEED + 1)
            before, mark = len(trace.builds), len(runs)
            with trace.answer():
                run(alpha)
            require_ordered(order, "y")
            _sync(device)
            graded = dict(now, y=t["y"])
            if now is not first and not agrees(t["y"], relu_references(now, alpha)[0]).ok and \
                    agrees(t["y"], relu_references(first, alpha)[0]).ok:
                raise Wrong(f"run({alpha}) gave y for the a, b and bias it was built with, not for the new values "
                            f"written into those same buffers: it reads copies taken at build time — bind the "
                            f"tensors you were given")
            worst = max(worst, grade_scaled_relu(graded, alpha, ALPHAS[:i]))
            require_from_graph(trace, dict(y=t["y"]), ("a", "b", "bias"))
            again = trace.validated(before)
            if i and again:  # the first call may build a graph left unbuilt; later ones must not
                raise Wrong(f"run({alpha}) gives the right y but built a graph again (validate() ran "
                            f"{len(again)} time(s)): build once, then only execute with a new alpha")
            alpha_by_value(runs.since(mark), t["y"], alpha)
    scaled_relu_again(trace, t, ALPHAS[-1])
    scaled_relu_made_again(answer, now, ALPHAS[0])
    if device == "cpu":
        return f"correct on the CPU — {len(ALPHAS)} alphas, worst rel err {worst:.1e} (the kernel count needs a GPU)"
    graph_only(kernels_launched(lambda: run(ALPHAS[0])), "the scale, the bias and the ReLU")
    return f"correct — {len(ALPHAS)} alphas, one graph, no rebuild; worst rel err {worst:.1e}"


def fp8_again_inputs(t: dict, seed: int) -> dict:
    """New a8 and b8 (``fp8_inputs`` for ``seed``, b8 column-major like the given one) and the given descales times
    ``DESCALE_GAIN``: a graph that baked the descales in as constants, or left one out, is off."""
    own = fp8_inputs(device=t["a8"].device.type, seed=seed)
    for name, gain in zip(("descale_a", "descale_b"), DESCALE_GAIN):
        own[name] = t[name] * gain
    return own


@checker("04.fp8_matmul_amax", needs=("fp8",))
def check_fp8_matmul_amax(answer) -> str:
    """``answer(a8, b8, descale_a, descale_b)`` returns (y bf16, amax [1,1,1]) from one FP8 graph; that graph, run
    again with new inputs and other descales, computes both; a later call on new inputs too."""
    device, _ = grading_setup()
    t = fp8_inputs(device=device)
    first = private_copy(t)
    names = ("a8", "b8", "descale_a", "descale_b")
    result, trace = _call_traced(answer, names, t, "y and amax")
    message = grade_fp8_matmul_amax(first, result)
    y, amax = result
    require_new_outputs(y, amax, t, y_dtype=torch.bfloat16, amax_shape=(1, 1, 1))
    require_from_graph(trace, dict(y=y, amax=amax), names)
    if device == "cuda":
        graph_only(kernels_launched(lambda: answer(*(t[name] for name in names))), "the descales and the AMAX")
    one_graph_wrote(trace.runs, dict(y=y, amax=amax), "the AMAX reduction")
    epilogue_again(trace, t, names, result, fp8_again_inputs(t, AGAIN_SEED), grade_fp8_matmul_amax)
    makes = [lambda: fp8_again_inputs(fp8_inputs(device=device, seed=CALL_SEED), CALL_SEED)]
    calls_again(answer, names, makes, grade_fp8_matmul_amax, first, result, lambda u: fp8_references(u))
    return message


# ------------------------------------------------------------------ 04.rmsnorm_backward (deep dive G's RMSNorm)
def rmsnorm_backward_inputs(*, dtype, device: str = "cuda", seed: int = SEED, descending: bool = False) -> dict:
    """Notebook 04's RMSNorm tensors (``inputs.norm_tensors``, made on the CPU: reproducible), shaped
    ``NORM_SHAPE``, with values chosen so that each usual mistake is far off: x's rows centred (mean 0, so a
    LayerNorm's statistics equal the RMSNorm's and only its centring of dy differs) with a spread from 1/4 to 4
    (inv_var from about 4 to 1/4); dy leaning on x (0.5 x / rms) plus noise plus an offset per row, as a loss
    gradient does (so dropping the term that comes from inv_var depending on x, or subtracting dy's row mean, moves
    dx by tens of percent). inv_var [rows, 1, 1, 1] fp32 is the exact reference 1/sqrt(mean(x^2) + eps) of x: the
    forward's saved statistic, so the exercise is the backward alone. dx and dscale are NaN-poisoned. ``descending``:
    the spread from 4 down to 1/4 (the checker's later inputs: a stale inv_var is off by up to 16x per row)."""
    rows, hidden = NORM_SHAPE
    t = inputs.norm_tensors(rows, hidden, dtype=dtype, seed=seed, device="cpu")
    gen = torch.Generator().manual_seed(seed + 3)
    unit = t["x"].float()
    unit = unit - unit.mean(dim=1, keepdim=True)
    ends = (2.0, -2.0) if descending else (-2.0, 2.0)   # descending: each row's RMS far from the default draw's
    spread = 2.0 ** torch.linspace(*ends, rows).reshape(rows, 1, 1, 1)
    t["x"] = (unit * spread).to(dtype)
    offset = 0.5 * torch.randn(rows, 1, 1, 1, generator=gen)
    t["dy"] = (0.5 * unit + t["dy"].float() + offset).to(dtype)
    t["inv_var"].copy_(inputs.rms_reference(t)["inv_var"])
    keep = ("dy", "x", "scale", "inv_var", "dx", "dscale")
    return {name: t[name].to(device) for name in keep}


def rmsnorm_backward_references(t) -> tuple:
    """``((dx, dscale), (wrong dx, wrong dscale))``: the right gradients in fp32 (``inputs.rms_reference``, autograd
    through ``F.rms_norm``) and, by the mistake that gives it, the usual wrong ones ({message: value}), computed from
    t's values and the given inv_var."""
    ref = inputs.rms_reference(t)
    shape, scale_shape = t["x"].shape, t["scale"].shape
    x, dy, gamma = t["x"].float().flatten(1), t["dy"].float().flatten(1), t["scale"].float().flatten(1)
    inv = t["inv_var"].float().flatten(1)
    g, xhat = dy * gamma, x * inv

    def rms_dx(grad, normed):   # the RMSNorm backward's formula: the projection of grad off the normalised input
        return inv * (grad - normed * (grad * normed).mean(dim=1, keepdim=True))

    wrong_dx = {
        "dx treats inv_var as a constant: it is dy·scale·inv_var, without the term from inv_var's own dependence "
        "on x (−x̂·mean(dy·scale·x̂)·inv_var) — g.rmsnorm_backward computes the whole gradient":
            (g * inv).reshape(shape),
        "dx is a LayerNorm backward: it also subtracts the row mean of dy·scale, which RMSNorm (no mean to centre "
        "on) does not — use g.rmsnorm_backward, not layernorm_backward":
            (rms_dx(g, xhat) - inv * g.mean(dim=1, keepdim=True)).reshape(shape),
        "dx comes from dy and x swapped: grad= takes the incoming gradient dy, input= the forward's input x":
            rms_dx(x * gamma, dy * inv).reshape(shape),
    }
    wrong_dscale = {
        "dscale is the sum of dy over the rows: that is dbias, the gradient of a bias this RMSNorm does not have — "
        "dscale is the node's second output (has_dbias=False)": dy.sum(dim=0).reshape(scale_shape),
    }
    return (ref["dx"], ref["dscale"]), (wrong_dx, wrong_dscale)


def grade_rmsnorm_backward(t) -> tuple:
    """``(dx rel err, dscale rel err)`` of ``t["dx"]`` and ``t["dscale"]`` after an answer ran, or ``Wrong`` in one
    line (``grade_output``'s cascade, dx first): an output left unwritten, a named mistake, how far off."""
    (dx, dscale), (wrong_dx, wrong_dscale) = rmsnorm_backward_references(t)
    dx_err = grade_output(t["dx"], dx, wrong_dx, name="dx",
                          all_nan_hint="mark the rmsnorm_backward node's dx output with the dx you are given and "
                                       "execute the graph")
    dscale_err = grade_output(t["dscale"], dscale, wrong_dscale, name="dscale",
                              all_nan_hint="the node's second output is dscale: mark it with the dscale you are given "
                                           "(io.output), in the same graph as dx")
    return dx_err, dscale_err


BACKWARD_INPUTS = ("dy", "x", "scale", "inv_var")


def require_one_backward_execute(trace, t) -> None:
    """``Wrong`` in one line unless dx and dscale were both written by one execute of one cuDNN graph with an
    RMSNORM_BWD node that read dy, x, scale and the inv_var given (the forward's: not statistics torch recomputed),
    with nothing torch computed on the way (``trace``: the ``provenance.Trace`` of the call)."""
    outputs = dict(dx=t["dx"], dscale=t["dscale"])
    for name, tensor in outputs.items():
        writer = trace.last_writer(tensor)
        if writer is not None and writer.is_graph and writer.learner and not trace.reaches(tensor, "inv_var"):
            raise Wrong(f"{name} does not use the inv_var you were given: the forward saved it so the backward need "
                        f"not recompute the statistics — bind it as the node's inv_variance")
        trace.require_graph_output(tensor, name, kinds=("RMSNORM_BWD",), inputs=BACKWARD_INPUTS,
                                   how="one graph with g.rmsnorm_backward writes dx and dscale")
    runs = trace.runs
    one_graph_wrote(runs, outputs, "the dscale output (the rmsnorm_backward node's second)")
    if runs.writer(t["dx"]) is not runs.writer(t["dscale"]):
        raise Wrong("dx and dscale come from 2 executes of your graph: the point is one execute that writes both "
                    "(the node computes dscale from the same pass over dy and x) — bind dx and dscale in one variant "
                    "pack")


def _traced_backward(answer, t: dict, **watch):
    """Run ``answer(dy, x, scale, inv_var, dx, dscale)`` as the learner's code inside ``tracing(**watch)``; the
    trace. ``NotDone`` if it returns ``...``. Nothing is synchronized here: the caller settles its stream."""
    with tracing({name: t[name] for name in BACKWARD_INPUTS}, **watch) as trace:
        with trace.answer():
            returned = answer(*(t[name] for name in (*BACKWARD_INPUTS, "dx", "dscale")))
    if returned is Ellipsis:
        raise NotDone(f"not done yet — {getattr(answer, '__name__', 'your answer')} returned ...")
    return trace


def rms_dx_given(t) -> tuple:
    """``(dx,)``: the RMSNorm backward's dx in fp32 from t's dy, x, scale and the inv_var given (not recomputed):
    what an answer that read those tensors writes (to name the first call's inputs a later call still reads)."""
    x, dy, gamma = t["x"].float().flatten(1), t["dy"].float().flatten(1), t["scale"].float().flatten(1)
    inv = t["inv_var"].float().flatten(1)
    g, xhat = dy * gamma, x * inv
    return ((inv * (g - xhat * (g * xhat).mean(dim=1, keepdim=True))).reshape(t["x"].shape),)


def rmsnorm_again(trace, t: dict) -> None:
    """Run the graph that wrote dx and dscale again on the checker's own dy, x, scale and inv_var (new rows: their
    inv_var the exact statistic of the new x) and grade both; ``Wrong`` naming what the graph alone computes."""
    given = {name: t[name] for name in BACKWARD_INPUTS}
    own = rmsnorm_backward_inputs(dtype=t["x"].dtype, device=t["x"].device.type, seed=AGAIN_SEED, descending=True)
    done = rerun(trace.runs.feeding(t["dx"]), given, dict(dx=t["dx"], dscale=t["dscale"]),
                 fresh=lambda name, old: own[name])
    _sync(t["x"].device.type)
    try:
        grade_rmsnorm_backward(dict(private_copy(done.inputs), dx=done.outputs.get("dx", t["dx"]),
                                    dscale=done.outputs.get("dscale", t["dscale"])))
    except Wrong as exc:
        raise Wrong(_again_line(BACKWARD_INPUTS, "dx and dscale", exc, done)) from None


def rmsnorm_second_call(answer, first: dict, count: bool):
    """Call the answer again on new dy, x, scale, inv_var and new poisoned dx, dscale and grade what it wrote
    (``Wrong`` naming the first call's inputs it still reads); the kernels of one such call where ``count``."""
    t = rmsnorm_backward_inputs(dtype=first["x"].dtype, device=first["x"].device.type, seed=CALL_SEED,
                                descending=True)
    now = private_copy({name: t[name] for name in BACKWARD_INPUTS})

    def call():
        answer(*(t[name] for name in (*BACKWARD_INPUTS, "dx", "dscale")))
        _sync(t["x"].device.type)

    launched = kernels_launched(call) if count else call()
    if not agrees(t["dx"], rms_dx_given(now)[0]).ok:
        stale = stale_inputs(t["dx"], now, first, BACKWARD_INPUTS, rms_dx_given)
        if stale:
            raise Wrong(stale_message("dx", stale, BACKWARD_INPUTS))
    try:
        grade_rmsnorm_backward(dict(now, dx=t["dx"], dscale=t["dscale"]))
    except Wrong as exc:
        raise Wrong(f"on a second call with new {listed(BACKWARD_INPUTS)}: {exc}") from None
    return launched


@checker("04.rmsnorm_backward", needs=("norm_graphs",))   # the fused norm engines: sm80+ (a T4 skips it)
def check_rmsnorm_backward(answer) -> str:
    """``answer(dy, x, scale, inv_var, dx, dscale)`` writes the RMSNorm backward's dx and dscale into the buffers
    given, both from one execute of one graph, on the caller's stream; that graph, run again on the checker's own
    inputs, computes both; a second call on new inputs too."""
    device, dtype = grading_setup()  # needs a GPU unless grading on the CPU: one line if there is none
    t = rmsnorm_backward_inputs(dtype=dtype, device=device)
    first = private_copy({name: t[name] for name in BACKWARD_INPUTS})
    order = _caller_order(device)
    trace = _traced_backward(answer, t, order=order)
    require_ordered(order, "dx and dscale")
    _sync(device)
    dx_err, dscale_err = grade_rmsnorm_backward(dict(first, dx=t["dx"], dscale=t["dscale"]))
    require_one_backward_execute(trace, t)
    rmsnorm_again(trace, t)
    launched = rmsnorm_second_call(answer, first, count=device == "cuda")
    errors = f"dx rel err {dx_err:.1e}, dscale rel err {dscale_err:.1e}"
    if device == "cpu":
        return f"correct on the CPU — {errors} (the kernel count needs a GPU)"
    graph_only(launched, "dx and dscale")
    return f"correct — one execute wrote dx and dscale; {errors}"


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H


def silu_amax(a, b, bias):
    """SiLU epilogue with a per-batch-entry AMAX: the reduction's output keeps dim 0 and collapses M and N."""
    cudnn = H.load_cudnn()
    batch, rows, _ = a.shape
    cols = b.shape[-1]
    out = torch.empty(batch, rows, cols, device=a.device, dtype=a.dtype)
    peaks = torch.zeros(batch, 1, 1, device=a.device, dtype=torch.float32)   # one max per batch entry

    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=a.dtype,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g, dtype=a.dtype)
    product = g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32, name="product")
    shifted = g.add(product, io.input("bias", bias), name="plus_bias")
    activated = g.swish(shifted, swish_beta=1.0, name="silu_node")
    io.output("y", activated, out)
    peak = g.reduction(activated, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32,
                       name="amax_per_entry")
    io.output("amax", peak, peaks)                # [batch, 1, 1]: the shape asks for one value per entry
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
    return out, peaks


def scaled_relu(a, b, bias, y):
    """Build relu(alpha * a @ b + bias) once with alpha as a pass-by-value scalar; run(alpha) only executes."""
    cudnn = H.load_cudnn()
    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=a.dtype,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g, dtype=a.dtype)
    scale = io.scalar("alpha", 1.0)                  # a CPU 1x1x1 fp32 tensor: its value travels per execute
    product = g.matmul(io.input("a", a), io.input("b", b), compute_data_type=torch.float32, name="product")
    scaled = g.mul(product, scale, name="times_alpha")
    io.output("y", g.relu(g.add(scaled, io.input("bias", bias), name="plus_bias"), name="relu_node"), y)
    H.build(g)
    scratch = H.workspace_for(g)

    def run(alpha):
        by_value = torch.full((1, 1, 1), float(alpha), dtype=torch.float32)   # host tensor, no copy to the GPU
        g.execute(io.pack(alpha=by_value), scratch, handle=H.get_handle())

    return run


def fp8_matmul_amax(a8, b8, descale_a, descale_b):
    """e4m3 GEMM, both descales in the epilogue, bf16 output and its AMAX, as one graph."""
    cudnn = H.load_cudnn()
    batch, rows, _ = a8.shape
    cols = b8.shape[-1]
    out = torch.empty(batch, rows, cols, device=a8.device, dtype=torch.bfloat16)
    peak_buf = torch.zeros(1, 1, 1, device=a8.device, dtype=torch.float32)

    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=torch.bfloat16,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g)                                # mixed dtypes: each tensor keeps its own
    product = g.matmul(io.input("a8", a8), io.input("b8", b8), compute_data_type=torch.float32, name="fp8_product")
    undo_a = g.mul(product, io.input("descale_a", descale_a), name="undo_scale_a")
    descaled = g.mul(undo_a, io.input("descale_b", descale_b), name="undo_scale_b")
    io.output("y", descaled, out)
    io.output("amax", g.reduction(descaled, mode=cudnn.reduction_mode.AMAX, compute_data_type=torch.float32,
                                  name="amax_of_y"), peak_buf)
    H.build(g, heuristics=("A", "B", "FALLBACK"))
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
    return out, peak_buf


def rmsnorm_backward(dy, x, scale, inv_var, dx, dscale):
    """RMSNorm's backward as one graph: dx and dscale (summed over the rows) from dy, x, scale and the inv_var
    the forward saved; one execute writes both."""
    cudnn = H.load_cudnn()
    g = cudnn.pygraph(handle=H.get_handle(), io_data_type=x.dtype,
                      intermediate_data_type=torch.float32, compute_data_type=torch.float32)
    io = H.GraphIO(g)                                # mixed dtypes: inv_var stays fp32
    grad_x, grad_scale, _ = g.rmsnorm_backward(grad=io.input("dy", dy), input=io.input("x", x),
                                               scale=io.input("scale", scale),
                                               inv_variance=io.input("inv_var", inv_var),   # no statistics recomputed
                                               has_dbias=False, name="rms_bwd")
    io.output("dx", grad_x, dx)
    io.output("dscale", grad_scale, dscale)          # [1, hidden, 1, 1]: the node sums over the rows
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
