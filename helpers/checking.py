"""Correctness checks: poison outputs, relative error by norm, tolerance by dtype."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

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
    TOLERANCE[torch.float8_e4m3fn] = 8e-2
    TOLERANCE[torch.float8_e5m2] = 1.5e-1


def tolerance(dtype: torch.dtype) -> float:
    if dtype not in TOLERANCE:
        raise ValueError(f"no tolerance defined for dtype {dtype}; pass tol= explicitly")
    return TOLERANCE[dtype]


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


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; inf if ``out`` holds NaN/inf or shapes differ."""
    for name, t in (("out", out), ("ref", ref)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch: out {tuple(out.shape)} vs ref {tuple(ref.shape)}")
    o = out.detach().to(torch.float64)
    r = ref.detach().to(device=o.device, dtype=torch.float64)
    if not torch.isfinite(o).all():
        return math.inf
    denom = torch.linalg.vector_norm(r).item()
    num = torch.linalg.vector_norm(o - r).item()
    return num / denom if denom > 0 else num


@dataclass(frozen=True)
class CheckResult:
    case: str
    rel_err: float
    tol: float
    dtype: str
    unwritten: int  # elements still NaN after the run

    @property
    def ok(self) -> bool:
        return self.unwritten == 0 and self.rel_err <= self.tol

    def __str__(self) -> str:
        verdict = "PASS" if self.ok else "FAIL"
        extra = f", {self.unwritten} elements never written" if self.unwritten else ""
        return f"{verdict} {self.case}: rel err {self.rel_err:.1e} (tol {self.tol:.2g}, {self.dtype}){extra}"


def check(case: str, out: torch.Tensor, ref: torch.Tensor, *, dtype: torch.dtype | None = None,
          tol: float | None = None, raise_on_fail: bool = True, quiet: bool = False) -> CheckResult:
    """Compare ``out`` with a higher-precision ``ref``; print one verdict line.

    The tolerance comes from ``out``'s dtype unless ``dtype``/``tol`` say otherwise.
    Raises ``AssertionError`` naming ``case`` on failure (unless ``raise_on_fail=False``).
    """
    dtype = dtype or out.dtype
    tol = tolerance(dtype) if tol is None else float(tol)
    unwritten = int(torch.isnan(out.detach().float()).sum().item()) if out.dtype.is_floating_point else 0
    result = CheckResult(case, rel_error(out, ref), tol, str(dtype).replace("torch.", ""), unwritten)
    if not quiet:
        print(result)
    if raise_on_fail and not result.ok:
        raise AssertionError(str(result))
    return result


def check_table(results: list):
    """pandas table of ``CheckResult`` s (case, rel err, tol, verdict)."""
    import pandas as pd

    return pd.DataFrame(
        [{"case": r.case, "rel err": r.rel_err, "tol": r.tol, "dtype": r.dtype,
          "unwritten": r.unwritten, "verdict": "PASS" if r.ok else "FAIL"} for r in results]
    ).set_index("case")
