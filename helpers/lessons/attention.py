"""Notebook 05's attention benchmark: the plumbing around the cuDNN graphs it teaches.

PyTorch's attention paths as functions to time (a pinned SDPA backend or torch's own dispatch, the backward
alone, compiled FlexAttention with a causal mask, the FlashAttention-3 switch), the columns the sweep tables
gain, the look-up of one rate, and the analysis of a gap between the cuDNN graph and torch's cuDNN backend.
No cuDNN graph is built here: the notebook writes those out.
"""
from __future__ import annotations

import statistics
import time
import warnings
from typing import Callable

import torch

from ..checking import rel_error
from ..errors import first_line


# ------------------------------------------------------------------ PyTorch's paths
def torch_sdpa(q, k, v, *, causal: bool, scale: float, backend=None) -> Callable:
    """A function calling ``F.scaled_dot_product_attention(q, k, v)`` pinned to ``backend`` (an ``SDPBackend``),
    or with ``backend=None`` as torch dispatches it by itself (what model code gets)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    if backend is None:
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    def fn():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    return fn


def torch_sdpa_backward(q, k, v, do, *, causal: bool, scale: float, backend) -> Callable:
    """PyTorch's backward alone: the forward runs here, once, with autograd on (pinned to ``backend``); the
    returned function is ``torch.autograd.grad`` of it with incoming gradient ``do``."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    leaves = [t.detach().requires_grad_() for t in (q, k, v)]
    with warnings.catch_warnings(), sdpa_kernel(backend):
        warnings.simplefilter("ignore")
        out = F.scaled_dot_product_attention(*leaves, is_causal=causal, scale=scale)
    return lambda: torch.autograd.grad(out, leaves, do, retain_graph=True)


def causal_mask_mod(b, h, q_idx, kv_idx):
    """FlexAttention's causal mask: query i sees keys j <= i."""
    return q_idx >= kv_idx


class FlexCausal:
    """Compiled FlexAttention with a causal ``mask_mod``. ``torch.compile(flex_attention, dynamic=False)``
    compiles one kernel per shape, on its first call; ``forward`` makes that call untimed and keeps its
    seconds in ``first_call_s[S]``, so the compile stays out of the timings."""

    def __init__(self):
        from torch.nn.attention.flex_attention import flex_attention

        self.compiled = torch.compile(flex_attention, dynamic=False)
        self.first_call_s: dict = {}

    def forward(self, q, k, v, scale: float):
        """The function to time for q, k, v [B, H, S, D] (block mask built and kernel compiled here), or
        ``"unavailable: <why>"`` where it cannot run (no Triton, a compile error)."""
        from torch.nn.attention.flex_attention import create_block_mask

        S = q.shape[2]
        try:
            block_mask = create_block_mask(causal_mask_mod, None, None, S, S, device=q.device)
            fn = lambda: self.compiled(q, k, v, block_mask=block_mask, scale=scale)  # noqa: E731
            start = time.perf_counter()
            fn()
            torch.cuda.synchronize()
        except Exception as exc:  # reported in the sweep, not fatal
            return "unavailable: " + first_line(exc, 80)
        self.first_call_s[S] = time.perf_counter() - start
        return fn


def fa3_unavailable(sm_version: int) -> str | None:
    """Switch torch's FlashAttention-3 impl on for its flash backend: None when it is on, else why it cannot be
    (one line). The caller switches it off again with ``torch.nn.attention.restore_flash_attention_impl()``."""
    import torch.nn.attention as torch_attention

    if not hasattr(torch_attention, "activate_flash_attention_impl"):
        return f"torch {torch.__version__} has no activate_flash_attention_impl"
    impls = torch_attention.list_flash_attention_impls()
    if "FA3" not in impls:
        return f"torch {torch.__version__} registers no FA3 impl (it lists {impls})"
    if sm_version != 90:
        return f"FA3 is written for Hopper (sm90), this GPU is sm{sm_version}"
    try:
        torch_attention.activate_flash_attention_impl("FA3")
    except Exception as exc:  # typically the flash_attn_3 package (module flash_attn_interface) is missing
        return first_line(exc, 120)
    return None


def log_agreement(rows: list, point: dict, fn, reference) -> None:
    """One untimed call of ``fn`` (skipped where it is a status string or raises: the sweep shows that); its
    output's rel err against ``reference`` appended to ``rows`` as ``dict(**point, rel_err=...)``."""
    if not callable(fn):
        return
    try:
        out = fn()
    except Exception:
        return
    rows.append(dict(point, rel_err=rel_error(out, reference)))


# ------------------------------------------------------------------ the sweep tables
def math_fits(b: int, h: int, s: int, max_gib: float, itemsize: int = 2) -> bool:
    """Whether torch's math backend's B·H·S² scores (``itemsize`` bytes each) fit in ``max_gib`` GiB."""
    return b * h * s * s * itemsize <= max_gib * 2**30


def with_config(df, config: str, tokens: int, datasheet_peak: float):
    """A ``perf_sweep`` table over S with the config and the batch (``tokens // S``) as columns, and its rate as
    % of both peaks ("% of measured peak" from perf_sweep, "% of datasheet peak" added)."""
    df.insert(0, "config", config)
    df.insert(2, "B", tokens // df["S"])
    df = df.rename(columns={"% of peak": "% of measured peak"})
    if "TFLOP/s" in df:
        df["% of datasheet peak"] = 100 * df["TFLOP/s"] / datasheet_peak
    return df


def rate(df, config: str, s: int, path: str, column: str = "TFLOP/s") -> float:
    """``column`` of the row (config, S, path) of a sweep table where that path ran (status ok), else nan."""
    row = df[(df.config == config) & (df.S == s) & (df.path == path) & (df.status == "ok")]
    return float(row[column].iloc[0]) if len(row) else float("nan")


# ------------------------------------------------------------------ a gap to torch's cuDNN backend
def gap_numbers(rounds: dict, kernels: dict, plans, *, graph_path: str, torch_path: str) -> dict:
    """The numbers behind a gap at one point. ``rounds``: ``{path: [median ms per round]}`` (alternating
    rounds); ``kernels``: ``{path: {kernel: GPU µs}}`` longest first; ``plans``: ``autotune.time_plans``'s
    table of the graph's plans (index = plan, columns name, result, median_ms)."""
    graph_ms, torch_ms = (statistics.median(rounds[p]) for p in (graph_path, torch_path))
    drift = max((max(r) - min(r)) / statistics.median(r) for r in rounds.values())
    timed = plans[plans.median_ms.notna()]
    if timed.empty:
        raise RuntimeError(f"none of the graph's {len(plans)} plans could be timed: {list(plans.result)}")
    gpu_us = {p: sum(k.values()) for p, k in kernels.items()}
    longest = {p: next(iter(k), "none") for p, k in kernels.items()}
    pick, best = timed.index[0], timed.median_ms.idxmin()
    return dict(graph_ms=graph_ms, torch_ms=torch_ms, gap=graph_ms / torch_ms - 1, drift=drift,
                noise=max(0.02, drift), gpu_us=gpu_us, longest=longest,
                kernel_count={p: len(k) for p, k in kernels.items()},
                plans=len(plans), timed=len(timed), pick=pick, best=best,
                pick_name=timed.loc[pick, "name"], pick_ms=float(timed.loc[pick, "median_ms"]),
                best_name=timed.loc[best, "name"], best_ms=float(timed.loc[best, "median_ms"]),
                same_kernel=longest[graph_path] == longest[torch_path],
                kernel_gap=gpu_us[graph_path] / gpu_us[torch_path] - 1)


def gap_explanation(n: dict) -> str:
    """The explanation the numbers of ``gap_numbers`` support, in one sentence (pure: no GPU)."""
    gap, noise, torch_ms = n["gap"], n["noise"], n["torch_ms"]
    if abs(gap) <= noise:
        return f"a tie: the {abs(gap):.1%} difference is inside the rounds' noise ({noise:.1%})"
    if gap < 0:
        return f"in this run the graph is ahead here, by more than the noise ({noise:.1%}); torch's lead did not repeat"
    if n["best"] != n["pick"] and n["best_ms"] <= torch_ms * (1 + noise):
        return (f"plan choice: the heuristics' first plan is not the graph's fastest here; plan {n['best']} runs "
                "within noise of torch's backend, so timing the plans (notebook 03) closes the gap")
    if not n["same_kernel"]:
        return ("engine choice: torch's backend runs another kernel than the graph's pick, and none of the graph's "
                f"plans reaches torch's time (its fastest is {n['best_ms'] / torch_ms - 1:+.1%})")
    if abs(n["kernel_gap"]) <= noise:
        return (f"same kernel, same GPU time ({n['kernel_gap']:+.1%}): the {gap:.1%} lies outside the kernel, in "
                "what each call does around it")
    return (f"same kernel, but {n['kernel_gap']:+.1%} GPU time in the graph's launch: the same engine with other "
            "settings; the measurement shows the gap, not its cause")


def explain_gap(point: str, rounds: dict, kernels: dict, plans, *, graph_path: str, torch_path: str) -> dict:
    """Print what was measured at one point and the explanation it supports; return the numbers with ``why``."""
    try:
        n = gap_numbers(rounds, kernels, plans, graph_path=graph_path, torch_path=torch_path)
    except RuntimeError as exc:
        raise RuntimeError(f"{point}: {exc}") from None
    runs = len(next(iter(rounds.values())))
    print(f"{point}: the graph {n['graph_ms']:.3f} ms, torch's cuDNN backend {n['torch_ms']:.3f} ms per call (median "
          f"of {runs} alternating rounds, which differ by up to {n['drift']:.1%}): the graph is {abs(n['gap']):.1%} "
          f"{'slower' if n['gap'] > 0 else 'faster'}")
    for p in (graph_path, torch_path):
        print(f"  {p}: {n['kernel_count'][p]} kernel(s), {n['gpu_us'][p]:.0f} µs of GPU time; longest: "
              f"{n['longest'][p][:90]}")
    print(f"  the graph's {n['plans']} candidate plans, {n['timed']} timed: its pick, plan {n['pick']} "
          f"({n['pick_name']}), {n['pick_ms']:.3f} ms; the fastest, plan {n['best']} ({n['best_name']}), "
          f"{n['best_ms']:.3f} ms")
    n["why"] = gap_explanation(n)
    print("  → " + n["why"])
    return dict(n, point=point)


__all__ = ["FlexCausal", "causal_mask_mod", "explain_gap", "fa3_unavailable", "gap_explanation", "gap_numbers",
           "log_agreement", "math_fits", "rate", "torch_sdpa", "torch_sdpa_backward", "with_config"]
