"""Correctness checks: poison outputs, relative error by norm, tolerance by dtype."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from .device import dtype_name

# Relative-error (by norm) tolerances for results stored in each dtype, with
# fp32 accumulation. Rounding the output alone costs about 2^-9 (bf16), 2^-12
# (fp16); the margin covers long reductions, not wrong answers (those land near 1).
TOLERANCE = {
    torch.float64: 1e-10,
    torch.float32: 2e-3,  # cuDNN/cuBLAS may use TF32 tensor cores for fp32
    torch.bfloat16: 1.5e-2,
    torch.float16: 3e-3,
}
if hasattr(torch, "float8_e4m3fn"):
    # e4m3 keeps 3 mantissa bits (relative spacing up to 2^-3), e5m2 keeps 2 (up to 2^-2). Quantizing both
    # operands of a matmul to e4m3 costs about 4 % by norm (measured on an H200): 2^-3 leaves a 3x margin,
    # while a wrong answer (error near 1) still fails.
    TOLERANCE[torch.float8_e4m3fn] = 2**-3
    TOLERANCE[torch.float8_e5m2] = 2**-2

# Element-wise bound, next to the norm: |out - ref| <= ELEMENT_ATOL * tol * scale + ELEMENT_RTOL[dtype] * |ref|,
# with scale = rms(ref). The norm averages over every element, so a handful of wrong ones (one bad row of a
# large output) hide in it; this bound catches them. Why these numbers: the rtol is one rounding step of the
# dtype (torch.testing's defaults for bf16/fp16); the absolute part is relative to the output's typical size
# (outputs range from 1e-2 to 1e2 across the course, so a fixed atol would be wrong for most of them), and 8x
# the norm tolerance sits above the largest of millions of legitimate rounding errors (about 5-6 sigma), while
# an element that is simply wrong is off by about its own size.
ELEMENT_ATOL = 8.0
ELEMENT_RTOL = {
    torch.float64: 1e-7,
    torch.float32: 1.3e-6,
    torch.bfloat16: 1.6e-2,
    torch.float16: 1e-3,
}
if hasattr(torch, "float8_e4m3fn"):
    ELEMENT_RTOL[torch.float8_e4m3fn] = 2**-3
    ELEMENT_RTOL[torch.float8_e5m2] = 2**-2


# Quantities that are not "an output stored in dtype X", each with its reason. The one table of the course:
# checkers, solutions and notebooks ask ``tolerance(...)`` and never write a number of their own.
TOLERANCE_FOR = {
    # An AMAX (fp32, reduced inside the graph before the output is rounded) against max|Y| of the rounded
    # output: they differ by at most one rounding of Y, 2^-8 relative for bf16 (and less for fp16).
    "amax": 2**-8,
    # An AMAX of an FP8 (e4m3) tensor against the fp32 reference's maximum: one e4m3 rounding step, 2^-3.
    "amax_fp8": 2**-3,
}


def tolerance(dtype, *, depth: int = 1) -> float:
    """The tolerance (relative error by norm) for an output stored in ``dtype``, or for a named quantity of
    ``TOLERANCE_FOR`` (``"amax"``, ``"amax_fp8"``).

    ``depth``: the output of a chain of ``depth`` ops, each rounding to ``dtype``. Where the kernel and the
    reference round an element differently, the difference travels on through the later ops; independent
    differences add up like a random walk, so the tolerance grows with sqrt(depth / 4) beyond 4 ops (2x at 16).
    A wrong op is still off by about 100 %."""
    table = TOLERANCE_FOR if isinstance(dtype, str) else TOLERANCE
    if dtype not in table:
        known = ", ".join(map(str, TOLERANCE_FOR)) if isinstance(dtype, str) else "torch float dtypes"
        raise ValueError(f"no tolerance defined for {dtype!r} (known: {known}); pass tol= explicitly")
    if int(depth) < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    return table[dtype] * max(1.0, (int(depth) / 4) ** 0.5)


def poison_(t: torch.Tensor) -> torch.Tensor:
    """Fill an output buffer with NaN (or the max value for integers) before a run,
    so an element the kernel never wrote cannot pass as correct."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"poison_ expects a torch.Tensor, got {type(t).__name__}")
    if t.dtype.is_floating_point and t.dtype.itemsize > 1:
        return t.fill_(float("nan"))
    if t.dtype.is_floating_point:  # fp8: 0x7f is NaN in both e4m3fn and e5m2
        t.view(torch.uint8).fill_(0x7F)
        return t
    return t.fill_(torch.iinfo(t.dtype).max)


def _float64(out: torch.Tensor, ref: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``out`` and ``ref`` of one shape, in float64 on ``out``'s device."""
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: out {tuple(out.shape)} vs ref {tuple(ref.shape)}")
    o = out.detach().to(torch.float64)
    return o, ref.detach().to(device=o.device, dtype=torch.float64)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf if ``out`` holds NaN/inf or shapes differ."""
    for name, t in (("out", out), ("ref", ref)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    o, r = _float64(out, ref)
    if not torch.isfinite(o).all():
        return math.inf
    denom = torch.linalg.vector_norm(r).item()
    num = torch.linalg.vector_norm(o - r).item()
    return num / denom if denom > 0 else num


@dataclass(frozen=True)
class ElementReport:
    """How many elements break the element-wise bound, and the worst of them."""
    n_bad: int
    n: int
    worst_index: tuple = ()
    worst_out: float = math.nan
    worst_ref: float = math.nan
    worst_ratio: float = 0.0  # |out - ref| / bound at the worst element (> 1 fails)

    def __str__(self) -> str:
        where = ", ".join(str(i) for i in self.worst_index)
        return (f"{self.n_bad} of {self.n} elements outside the element-wise bound, worst at ({where}): "
                f"got {self.worst_out:.4g}, want {self.worst_ref:.4g}")


def element_report(out: torch.Tensor, ref: torch.Tensor, tol: float, rtol: float) -> ElementReport:
    """Count elements with |out - ref| > ELEMENT_ATOL * tol * rms(ref) + rtol * |ref| (NaN counts as bad)."""
    o, r = _float64(out, ref)
    n = o.numel()
    if n == 0:
        return ElementReport(0, 0)
    scale = torch.linalg.vector_norm(r).item() / math.sqrt(n)
    bound = ELEMENT_ATOL * tol * scale + rtol * r.abs()
    diff = (o - r).abs()
    ratio = torch.where(torch.isfinite(diff), diff / bound.clamp_min(torch.finfo(torch.float64).tiny),
                        torch.full_like(diff, math.inf))
    bad = ratio > 1.0
    n_bad = int(bad.sum().item())
    flat = int(torch.argmax(torch.nan_to_num(ratio, nan=math.inf)).item())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), o.shape)) if o.dim() else ()
    return ElementReport(n_bad, n, index, float(o.reshape(-1)[flat].item()), float(r.reshape(-1)[flat].item()),
                         float(ratio.reshape(-1)[flat].item()))


@dataclass(frozen=True)
class CheckResult:
    case: str
    rel_err: float
    tol: float
    dtype: str
    unwritten: int  # elements still NaN after the run
    elements: ElementReport | None = None

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.rel_err <= self.tol and (self.elements is None or self.elements.n_bad == 0)

    def __str__(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        extra = f", {self.unwritten} elements never written" if self.unwritten else ""
        if self.elements is not None and self.elements.n_bad and not self.unwritten and self.rel_err <= self.tol:
            extra += f"; {self.elements}"  # only when the norm alone would have passed
        return f"{verdict} {self.case}: rel err {self.rel_err:.1e} (tol {self.tol:.2g}, {self.dtype}){extra}"


def check(case: str, out: torch.Tensor, ref: torch.Tensor, *, dtype: torch.dtype | None = None,
          tol: float | None = None, raise_on_fail: bool = True,
          quiet: bool = False) -> CheckResult:
    """Compare ``out`` with a higher-precision ``ref``; print one verdict line.

    Two bounds must hold: the relative error by norm (``tol``, from ``out``'s dtype unless
    ``dtype``/``tol`` say otherwise) and, for every element, ``|out - ref| <= 8 * tol * rms(ref) +
    rtol * |ref|`` (``rtol`` from the dtype, ``ELEMENT_RTOL``). A FAIL line says how many elements break the second
    bound and shows the worst one. Raises ``AssertionError`` naming ``case`` on failure (unless
    ``raise_on_fail=False``).
    """
    for name, t in (("out", out), ("ref", ref)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    dtype = dtype or out.dtype
    tol = tolerance(dtype) if tol is None else float(tol)
    rtol = ELEMENT_RTOL.get(dtype, tol)
    unwritten = int(torch.isnan(out.detach().float()).sum().item()) if out.dtype.is_floating_point else 0
    err = rel_error(out, ref)
    result = CheckResult(case, err, tol, dtype_name(dtype), unwritten,
                         element_report(out, ref, tol, rtol))
    if not quiet:
        print(result)
    if raise_on_fail and not result.ok:
        raise AssertionError(str(result))
    return result


def check_table(results: list):
    """pandas table of ``CheckResult`` s (case, rel err, tol, elements off, verdict)."""
    import pandas as pd

    return pd.DataFrame(
        [{"case": r.case, "rel err": r.rel_err, "tol": r.tol, "dtype": r.dtype, "unwritten": r.unwritten,
          "elements off": r.elements.n_bad if r.elements is not None else 0,
          "verdict": "PASS" if r.ok else "FAIL"} for r in results]
    ).set_index("case")
