"""Autotuning: build every candidate plan, time each one, keep the winner, hand the choice on.

Taught in notebook 03; reused by 04 (timing the FP8 GEMM's plans) and 06 (reloading 03's tuned plan
by name in a fresh process). The hand-off file lives in ``helpers.paths.artifacts_dir()`` (not in ``results/``,
which holds headline numbers only): ``autotune-<gpu>.json``.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from ..errors import first_line
from ..graphs import workspace_for
from ..handles import get_handle
from ..paths import artifacts_dir
from ..timing.per_call import call_time


def probe_plans(graph) -> dict:
    """``{index: "built" or "build failed: ..."}`` for every candidate (after ``create_execution_plans``).
    ``build_plan_at_index`` returns at once for a plan ``build_plans(ALL)`` already built."""
    status = {}
    for i in range(graph.get_execution_plan_count()):
        try:
            graph.build_plan_at_index(i)
            status[i] = "built"
        except Exception as exc:  # a decline (cudnnGraphNotSupportedError) or a backend error
            status[i] = "build failed: " + first_line(exc)
    return status


def plan_notes(graph, index: int) -> str:
    """The behaviour notes of candidate ``index`` by name, joined (``"CUBLASLT_DEPENDENCY"``,
    ``"RUNTIME_COMPILATION, SUPPORTS_CUDA_GRAPH_NATIVE_API"``); ``"-"`` for none, ``"?"`` where the frontend
    raises instead of answering for that plan."""
    try:
        notes = graph.get_behavior_notes_for_plan_at_index(index)
    except Exception:
        return "?"
    return ", ".join(getattr(note, "name", str(note)) for note in notes) or "-"


def time_plans(graph, pack: dict, *, check: Callable | None = None, warmup: int = 5, iters: int = 20,
               max_ms: float | None = None, budget_s: float | None = None):
    """Time every candidate plan with ``execute_plan_at_index``; one row per plan index (ranked order).

    Each plan is built first (``build_plan_at_index``; refusals are recorded, not raised) and gets a
    workspace of its own size. ``check(run)``, if given, runs the plan once and returns an ``H.check``
    result (the caller poisons and compares). ``max_ms`` cuts off a pathologically slow plan after one
    run; after ``budget_s`` seconds the remaining plans are not tried. Columns: name, behavior_notes
    (``plan_notes``), result, check, rel_err, median_ms, spread_pct, workspace.
    ``table.attrs["timing_wall_ms"]`` is the wall time spent.
    """
    import pandas as pd

    handle, rows, start = get_handle(), {}, time.perf_counter()
    for i in range(graph.get_execution_plan_count()):
        row = rows[i] = dict(name=graph.get_plan_name_at_index(i), behavior_notes=plan_notes(graph, i), check="-")
        if budget_s is not None and time.perf_counter() - start > budget_s:
            row["result"] = "not tried (time budget)"
            continue
        try:
            graph.build_plan_at_index(i)
        except Exception as exc:
            row["result"] = "build failed: " + first_line(exc)
            continue
        workspace = workspace_for(graph, plan=i)
        row["workspace"] = int(graph.get_workspace_size_plan_at_index(i))

        def run(i=i, workspace=workspace):
            graph.execute_plan_at_index(pack, workspace, index=i, handle=handle)

        try:
            verdict = check(run) if check is not None else None
            if check is None:
                run()
        except Exception as exc:
            row["result"] = "run failed: " + first_line(exc)
            continue
        if verdict is not None:
            row.update(check="PASS" if verdict.ok else "FAIL", rel_err=verdict.rel_err)
        timing = call_time(run, warmup=warmup, iters=iters, flush_l2=True, max_ms=max_ms)
        row.update(result="cut off" if timing.cut_off else "timed", median_ms=timing.median_ms,
                   spread_pct=100 * timing.spread if not timing.cut_off else float("nan"))
    table = pd.DataFrame.from_dict(rows, orient="index").rename_axis("plan")
    for column in ("rel_err", "median_ms", "spread_pct", "workspace"):
        if column not in table:
            table[column] = float("nan")
    table.attrs["timing_wall_ms"] = (time.perf_counter() - start) * 1e3
    return table


def check_with(out, ref) -> Callable:
    """``check=`` for ``time_plans``: ``check(run)`` poisons ``out``, runs the plan once, waits, and returns the
    ``H.check`` result of ``out`` against ``ref`` (by norm and element-wise; printed by no one, raised by no one)."""
    import torch

    from ..checking import check, poison_

    def run_and_check(run):
        poison_(out)
        run()
        if out.is_cuda:
            torch.cuda.synchronize()
        return check("plan", out, ref, quiet=True, raise_on_fail=False)

    return run_and_check


def fastest(table) -> int:
    """Index of the fastest timed plan whose check (if any) passed."""
    ok = table[table["median_ms"].notna() & (table["check"] != "FAIL")]
    if ok.empty:
        raise RuntimeError("no plan was timed successfully")
    return int(ok["median_ms"].idxmin())


# ---------------------------------------------------------------- the hand-off to later notebooks
def choice_path(gpu_slug: str) -> Path:
    return artifacts_dir() / f"autotune-{gpu_slug}.json"


def save_choice(choice: dict, gpu_slug: str) -> Path:
    """Write the tuned choice (JSON) where later notebooks look for it; returns the path."""
    path = choice_path(gpu_slug)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(choice, indent=2))
    tmp.replace(path)
    return path


def load_choice(gpu_slug: str) -> dict | None:
    """The saved choice for this GPU, or None when there is none or it is unreadable."""
    path = choice_path(gpu_slug)
    try:
        choice = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return choice if isinstance(choice, dict) else None


def choice_problem(saved: dict | None, *, gpu: str, cudnn_backend: int, shape: dict, dtype: str) -> str | None:
    """Why a saved choice must not be used here (one line), or None when it describes this very setup."""
    if saved is None:
        return "no saved autotune choice (run notebook 03 first)"
    if saved.get("gpu") != gpu:
        return f"the saved choice was tuned on {saved.get('gpu')}, not this {gpu}"
    if int(saved.get("cudnn_backend", -1)) != int(cudnn_backend):
        return f"the saved choice was tuned with cuDNN backend {saved.get('cudnn_backend')}, this is {cudnn_backend}"
    if saved.get("shape") != shape or saved.get("dtype") != dtype:
        return "the saved choice is for another shape or dtype"
    return None
