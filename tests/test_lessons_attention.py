"""Notebook 05's benchmark plumbing (helpers/lessons/attention.py) and H.alternating_rounds: the pure parts, on CPU."""
import math

import pandas as pd
import pytest

import helpers as H
from helpers.lessons import attention as bench
from helpers.timing.per_call import Timing

GRAPH, TORCH = "cuDNN frontend graph", "torch CUDNN_ATTENTION"


def test_alternating_rounds_takes_turns_and_keeps_one_median_per_round():
    calls = []

    def timer(fn, *, warmup, iters):
        calls.append(fn())
        return Timing(float(len(calls)), 0.0, 0.0, iters)

    rounds = H.alternating_rounds({"a": lambda: "a", "b": lambda: "b"}, rounds=3, timer=timer)
    assert calls == ["a", "b"] * 3
    assert rounds == {"a": [1.0, 3.0, 5.0], "b": [2.0, 4.0, 6.0]}
    with pytest.raises(ValueError, match="rounds >= 1"):
        H.alternating_rounds({}, rounds=0)


def test_math_fits_counts_the_scores_bytes():
    assert bench.math_fits(1, 1, 1024, max_gib=2**21 / 2**30)          # 1024² scores of 2 bytes = 2 MiB
    assert not bench.math_fits(1, 2, 1024, max_gib=2**21 / 2**30)
    assert not bench.math_fits(1, 1, 1024, max_gib=2**21 / 2**30, itemsize=4)


def _sweep():
    return pd.DataFrame({"S": [1024, 1024, 2048], "path": [GRAPH, TORCH, GRAPH], "status": ["ok", "ok", "unavailable"],
                         "TFLOP/s": [400.0, 380.0, float("nan")], "% of peak": [50.0, 47.5, float("nan")],
                         "spread": [0.01, 0.02, float("nan")]})


def test_with_config_and_rate():
    df = bench.with_config(_sweep(), "forward", tokens=32768, datasheet_peak=800.0)
    assert list(df.columns[:3]) == ["config", "S", "B"] and list(df.B) == [32, 32, 16]
    assert "% of measured peak" in df and list(df["% of datasheet peak"][:2]) == [50.0, 47.5]
    assert bench.rate(df, "forward", 1024, TORCH) == 380.0
    assert bench.rate(df, "forward", 1024, GRAPH, "spread") == 0.01
    assert math.isnan(bench.rate(df, "forward", 2048, GRAPH))          # did not run
    assert math.isnan(bench.rate(df, "backward", 1024, GRAPH))


def test_log_agreement_skips_status_strings_and_failing_paths():
    import torch

    rows, ref = [], torch.ones(4)
    bench.log_agreement(rows, dict(S=1, path="a"), "not run", ref)
    bench.log_agreement(rows, dict(S=1, path="b"), lambda: 1 / 0, ref)
    bench.log_agreement(rows, dict(S=1, path="c"), lambda: ref * 1.5, ref)
    assert rows == [dict(S=1, path="c", rel_err=0.5)]


def _gap(graph_rounds, torch_rounds, *, plan_ms=(1.0, 1.0), same_kernel=True, graph_us=1000.0, torch_us=1000.0):
    rounds = {GRAPH: list(graph_rounds), TORCH: list(torch_rounds)}
    kernels = {GRAPH: {"flash_fprop_a": graph_us}, TORCH: {"flash_fprop_a" if same_kernel else "other": torch_us}}
    plans = pd.DataFrame({"name": [f"eng{i}" for i in range(len(plan_ms))], "result": "timed",
                          "median_ms": list(plan_ms)}).rename_axis("plan")
    return bench.gap_numbers(rounds, kernels, plans, graph_path=GRAPH, torch_path=TORCH)


@pytest.mark.parametrize("numbers, start", [
    (_gap([1.01] * 3, [1.0] * 3), "a tie: the 1.0% difference"),
    (_gap([0.90] * 3, [1.0] * 3), "in this run the graph is ahead"),
    (_gap([1.10] * 3, [1.0] * 3, plan_ms=(1.10, 1.00)), "plan choice: the heuristics' first plan"),
    (_gap([1.10] * 3, [1.0] * 3, plan_ms=(1.10, 1.09), same_kernel=False), "engine choice: torch's backend runs"),
    (_gap([1.10] * 3, [1.0] * 3, plan_ms=(1.10,)), "same kernel, same GPU time (+0.0%)"),
    (_gap([1.10] * 3, [1.0] * 3, plan_ms=(1.10,), graph_us=1100.0), "same kernel, but +10.0% GPU time"),
])
def test_gap_explanation_follows_the_numbers(numbers, start):
    assert bench.gap_explanation(numbers).startswith(start)


def test_gap_noise_is_the_rounds_drift_at_least_two_percent():
    assert _gap([1.0, 1.0, 1.0], [1.0] * 3)["noise"] == 0.02
    n = _gap([1.0, 1.1, 1.05], [1.0] * 3)
    assert n["noise"] == pytest.approx(0.1 / 1.05) and n["gap"] == pytest.approx(0.05)
    assert bench.gap_explanation(n).startswith("a tie")


def test_explain_gap_prints_the_numbers_and_names_the_point_when_no_plan_was_timed(capsys):
    rounds = {GRAPH: [1.0] * 3, TORCH: [1.0] * 3}
    kernels = {GRAPH: {"k": 1.0}, TORCH: {"k": 1.0}}
    plans = pd.DataFrame({"name": ["eng0"], "result": ["timed"], "median_ms": [1.0]})
    found = bench.explain_gap("S=8192", rounds, kernels, plans, graph_path=GRAPH, torch_path=TORCH)
    out = capsys.readouterr().out
    assert "median of 3 alternating rounds" in out and "→ a tie" in out and found["point"] == "S=8192"
    plans["median_ms"] = float("nan")
    with pytest.raises(RuntimeError, match="^S=8192: none of the graph's 1 plans could be timed"):
        bench.explain_gap("S=8192", rounds, kernels, plans, graph_path=GRAPH, torch_path=TORCH)
