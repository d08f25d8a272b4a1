"""Checkers for notebook 03: autotuning with the per-plan API.

    03.fastest_plan    time every plan of a planned graph, return the index of the fastest
    03.replay_choice   rebuild a saved (name, engine id, knobs) choice on a fresh graph, return its index

Both use notebook 02's conv → bias → ReLU on the checkers' own shape. The fastest plan is judged against the
checker's own timing of every plan: a pick within the timing noise of the fastest passes, a slower one fails with the
measured gap. The pick must come from timing: an answer that did not run every plan that builds fails, whatever it
returned (the checker records the plans it ran). The checker's graph refuses the first half of its ranked plans but
one slow plan (as a GPU without those engines would: ``refuse_plans``), so a plan's position among the plans that
built, returned as an index, names a refused plan or the slow one.
"""
from __future__ import annotations

import math
import numbers
import operator
import statistics

import pandas as pd
import torch

from helpers.checking import check, poison_
from helpers.device import require_gpu, working_dtype
from helpers.errors import first_line
from helpers.graphs import heuristic_modes, workspace_for
from helpers.handles import get_handle
from helpers.timing.per_call import benchmark
from . import NotDone, Wrong, checker, inputs
from .graph_runs import recording

# N, C, H=W, K: big enough that the fast plans take some microseconds, small enough that the slowest
# (FALLBACK) plans stay in the milliseconds.
SHAPE = dict(N=8, C=128, H=56, K=128)
MODES = ("A", "B", "FALLBACK")
MAX_MS = 5.0             # the checker's cut-off for one run of a pathologically slow plan
ALLOWANCE_PCT = 5.0      # a pick this close to the fastest passes, or twice the measured p10–p90 spread if larger
ALLOWANCE_MS = 1e-3      # ... and never less than the resolution of CUDA-event timing



def _problem(seed: int):
    """Notebook 02's conv tensors for SHAPE and the float64 reference."""
    t = inputs.conv_tensors(SHAPE["N"], SHAPE["C"], SHAPE["H"], SHAPE["K"], dtype=working_dtype(), seed=seed)
    return t, inputs.conv_reference(t)


def _planned_graph(t):
    """A fresh graph for ``t``, planned with A, B and FALLBACK (one ranked list) and support-checked; not built."""
    g, io = inputs.conv_graph(t)
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans(heuristic_modes(MODES))
    g.check_support()
    return g, io


def plan_index(value, count: int) -> int:
    """The learner's returned index as an int inside ``range(count)``, or one line saying why not (no GPU)."""
    if value is None or value is Ellipsis:
        raise NotDone("not done yet — return the index of a plan")
    if isinstance(value, str):
        raise Wrong(f"return the plan's index (an int), not its name {value!r}")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise Wrong(f"return the plan's index as an int, got {type(value).__name__} {value!r}")
    if count == 0:
        raise Wrong("the graph has no plans: plan it first (create_execution_plans, or create_execution_plan)")
    if not 0 <= int(value) < count:
        raise Wrong(f"plan {int(value)} does not exist: the graph has {count} plans (0 to {count - 1})")
    return int(value)


class PlanRefused(RuntimeError):
    """What a refused plan's build (or run) raises on the checker's graph."""


def refuse_plans(graph, refused) -> None:
    """Make ``graph`` (this one object) refuse to build, size or run the plans in ``refused``, as a GPU without
    their engines does; every other plan behaves as before (and is still recorded when it runs)."""
    refused, cls = frozenset(int(i) for i in refused), type(graph)

    def refuse(index) -> None:
        if _as_index(index) in refused:
            raise PlanRefused(f"plan {index} ({cls.get_plan_name_at_index(graph, index)}) is not supported on this "
                              "graph here")

    def build_plan_at_index(index, *args, **kwargs):
        refuse(index)
        return cls.build_plan_at_index(graph, index, *args, **kwargs)

    def get_workspace_size_plan_at_index(index, *args, **kwargs):
        refuse(index)
        return cls.get_workspace_size_plan_at_index(graph, index, *args, **kwargs)

    def execute_plan_at_index(tensor_dict, workspace=None, index=0, *args, **kwargs):
        refuse(index)
        return cls.execute_plan_at_index(graph, tensor_dict, workspace, index, *args, **kwargs)

    graph.build_plan_at_index = build_plan_at_index
    graph.get_workspace_size_plan_at_index = get_workspace_size_plan_at_index
    graph.execute_plan_at_index = execute_plan_at_index


def _as_index(value):
    try:
        return operator.index(value)
    except TypeError:
        return value


def refused_plans(table) -> list[int]:
    """The plans to refuse, from the checker's timing ``table``: the first half of the ranked list and one more
    (``n // 2 + 1`` plans), except the slowest of them that timed (kept, so the first plan that builds is a slow
    one). Every plan that builds after them has a position among the plans that build below ``n // 2 + 1``: that
    position, returned as an index, is a refused plan or the slow one. Empty for a graph with one plan."""
    count = len(table)
    if count < 2:
        return []
    ahead = list(range(count // 2 + 1 if count > 2 else 1))
    timed = table.loc[ahead]
    timed = timed[timed["median_ms"].notna()]
    kept = {int(timed["median_ms"].idxmax())} if len(timed) and len(ahead) > 1 else set()
    return [i for i in ahead if i not in kept]


def _ms(value: float) -> str:
    return f"{value * 1e3:.1f} µs" if value < 1 else f"{value:.2f} ms"


def head_to_head(graph, pack, a: int, b: int, rounds: int = 3, iters: int = 20) -> dict:
    """Plans ``a`` and ``b`` timed in alternation (L2 flushed): ``{index: (median_ms, p10_ms, p90_ms)}``."""
    handle = get_handle()
    runs = {}
    for i in (a, b):
        workspace = workspace_for(graph, plan=i)
        runs[i] = lambda i=i, workspace=workspace: graph.execute_plan_at_index(pack, workspace, index=i, handle=handle)
    times = {a: [], b: []}
    for _ in range(rounds):
        for i in (a, b):
            times[i] += benchmark(runs[i], warmup=2, iters=iters, flush_l2=True).times_ms
    out = {}
    for i, ts in times.items():
        ts = sorted(ts)
        out[i] = (statistics.median(ts), ts[int(0.1 * (len(ts) - 1))], ts[int(round(0.9 * (len(ts) - 1)))])
    return out


def time_plans(graph, pack: dict, out, ref, *, warmup: int = 3, iters: int = 15):
    """The checker's pass over every plan, as notebook 03 times them (``autotune.time_plans``): one row per plan,
    ranked; each plan built (a refusal recorded), run once and checked (``out`` poisoned, then compared with ``ref``),
    then timed with the L2 flushed, a plan slower than ``MAX_MS`` cut off after one run. Columns: name, result
    ("timed", "cut off", "build failed: …" or "run failed: …"), check ("PASS", "FAIL"), rel_err, median_ms."""
    handle, rows = get_handle(), {}
    for i in range(graph.get_execution_plan_count()):
        row = rows[i] = dict(name=graph.get_plan_name_at_index(i), check="-")
        try:
            graph.build_plan_at_index(i)
        except Exception as exc:
            row["result"] = "build failed: " + first_line(exc)
            continue
        workspace = workspace_for(graph, plan=i)

        def run(i=i, workspace=workspace):
            graph.execute_plan_at_index(pack, workspace, index=i, handle=handle)

        try:
            poison_(out)
            run()
            if out.is_cuda:
                torch.cuda.synchronize()
            verdict = check("plan", out, ref, quiet=True, raise_on_fail=False)
        except Exception as exc:
            row["result"] = "run failed: " + first_line(exc)
            continue
        timing = benchmark(run, warmup=warmup, iters=iters, flush_l2=True, max_ms=MAX_MS)
        row.update(check="PASS" if verdict.ok else "FAIL", rel_err=verdict.rel_err,
                   result="cut off" if timing.cut_off else "timed", median_ms=timing.median_ms)
    table = pd.DataFrame.from_dict(rows, orient="index").rename_axis("plan")
    for column in ("rel_err", "median_ms"):
        if column not in table:
            table[column] = float("nan")
    return table


def require_timed(index: int, table, ran: set) -> None:
    """``Wrong`` in one line unless the answer executed every plan that the checker could time (``table``, as
    ``time_plans`` returns it: a "timed" or "cut off" result) — ``ran``: the plan indices the answer
    executed. The point of the exercise is the plan chosen by timing: an index returned without running the
    plans is a guess, right or not."""
    runnable = [int(i) for i in table.index[table["result"].isin(("timed", "cut off"))]]
    missing = [i for i in runnable if i not in ran]
    if not missing:
        return
    if not ran:
        raise Wrong(f"it returned plan {index} without running any plan: time each plan that builds "
                    f"(execute_plan_at_index) and return the fastest by measurement")
    shown = ", ".join(map(str, missing[:5])) + (", ..." if len(missing) > 5 else "")
    raise Wrong(f"it returned plan {index} after running {len(runnable) - len(missing)} of the {len(runnable)} "
                f"plans that build here (not plan {shown}): time every plan that builds, then pick")


# ------------------------------------------------------------------ 03.fastest_plan
@checker("03.fastest_plan")
def check_fastest_plan(answer):
    require_gpu()
    t, ref = _problem(seed=3)
    graph, io = _planned_graph(t)
    count = graph.get_execution_plan_count()
    # The checker's own pass over every plan, as section 5 does it (each plan checked against the reference);
    # then every plan ahead of the fastest is refused, so the answer's plan list holds failures before the winner.
    table = time_plans(graph, io.pack(), t["y"], ref)
    refused = refused_plans(table)
    refuse_plans(graph, refused)
    for i in refused:
        table.loc[i, ["result", "median_ms"]] = ["build failed: refused on the checker's graph", float("nan")]
    with recording(detail=False) as runs:   # the plan indices only: no cost on the answer's timing
        returned = answer(graph, io.pack())
    index = plan_index(returned, count)
    require_timed(index, table, runs.plans_of(graph))
    if index in refused:
        raise Wrong(f"plan {index} does not build on the checker's graph (build_plan_at_index raises): a plan keeps "
                    f"its index whether or not the plans before it build — return the index of the fastest, not its "
                    f"position among the plans that built")
    row = table.loc[index]
    if math.isnan(row["median_ms"]):  # not timed
        raise Wrong(f"plan {index} cannot be used here ({row['result']}): time only the plans that build and run")
    if row["check"] == "FAIL":
        raise Wrong(f"plan {index} computes a wrong result here (rel err {row['rel_err']:.2g}); pick a plan that passes")
    timed = table[table["median_ms"].notna() & (table["check"] != "FAIL")]
    best, slowest = int(timed["median_ms"].idxmin()), int(timed["median_ms"].idxmax())
    first = int(timed.index[0])  # ranked order: the first plan that builds here (refused ones aside)
    name = table.loc[index, "name"]
    if index == best:
        return (f"correct — plan {index} ({name}) is the fastest of {len(timed)} that build here "
                f"({len(refused)} refused ahead of it): {_ms(row['median_ms'])}")

    ms, best_ms = float(row["median_ms"]), float(timed.loc[best, "median_ms"])
    allowed_pct, noise_pct = ALLOWANCE_PCT, float("nan")
    if row["result"] == "timed" and ms < 3 * best_ms:  # a close call: time the two again, side by side
        both = head_to_head(graph, io.pack(), index, best)
        (ms, p10, p90), (best_ms, best_p10, best_p90) = both[index], both[best]
        noise_pct = 100 * max((p90 - p10) / ms, (best_p90 - best_p10) / best_ms)
        allowed_pct = max(ALLOWANCE_PCT, 2 * noise_pct)
    slower_pct = 100 * (ms / best_ms - 1)
    if ms <= best_ms * (1 + allowed_pct / 100) or ms - best_ms <= ALLOWANCE_MS:
        return (f"correct — plan {index} ({name}) is within {max(slower_pct, 0):.1f}% of the fastest, plan {best} "
                f"({_ms(best_ms)}); the allowance for timing noise is {allowed_pct:.0f}%")
    cut = " (cut off after one run)" if row["result"] == "cut off" else ""
    if index == slowest:
        raise Wrong(f"plan {index} is the slowest plan: {_ms(ms)}{cut}, {ms / best_ms:.0f}× the fastest "
                    f"(plan {best}, {_ms(best_ms)}); return the minimum, not the maximum")
    if index == first:
        raise Wrong(f"plan {index} is the first plan that builds, but plan {best} is {slower_pct:.0f}% faster "
                    f"({_ms(best_ms)} against {_ms(ms)}; allowance {allowed_pct:.0f}%): time every plan")
    raise Wrong(f"plan {index} takes {_ms(ms)}{cut}, {slower_pct:.0f}% more than the fastest, plan {best} "
                f"({_ms(best_ms)}); the allowance for timing noise is {allowed_pct:.0f}%")


# ------------------------------------------------------------------ 03.replay_choice
def saved_choice(graph) -> tuple[int, dict]:
    """A plan of the planned ``graph`` to save, as notebook 03 saves one: not the first plan (so "return 0"
    is wrong), one with knobs (so forgetting them is wrong), and one that builds here."""
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    for i in range(1, len(names)):
        engine_id, knobs = graph.get_engine_and_knobs_at_index(i)
        if names[i] == names[0] or not knobs:
            continue
        try:
            graph.build_plan_at_index(i)
        except Exception:  # this plan does not build here: try the next
            continue
        return i, {"plan_name": names[i], "engine_id": int(engine_id),
                   "knobs": {getattr(k, "name", str(k)): int(v) for k, v in knobs.items()},
                   "heuristic_modes": list(MODES)}
    raise RuntimeError("no plan with knobs besides the first builds for the checker's graph on this GPU")


@checker("03.replay_choice")
def check_replay_choice(answer):
    require_gpu()
    t, ref = _problem(seed=4)
    tuned, _ = _planned_graph(t)
    _, choice = saved_choice(tuned)
    fresh, io = inputs.conv_graph(t)  # constructed only: not validated, not planned
    index = plan_index(answer(fresh, dict(choice, knobs=dict(choice["knobs"]))), fresh.get_execution_plan_count())

    name = fresh.get_plan_name_at_index(index)
    if name != choice["plan_name"]:
        engine_id, _ = fresh.get_engine_and_knobs_at_index(index)
        if int(engine_id) == choice["engine_id"]:
            hint = "the same engine with other knobs: pass the saved knobs as {cudnn.knob_type[name]: value}"
        elif index == 0:
            hint = "that is the heuristic's first plan, not the saved one"
        else:
            hint = "find the saved name among the plans, or append it with create_execution_plan(engine_id, knobs)"
        raise Wrong(f"plan {index} is {name}, not the saved {choice['plan_name']}: {hint}")

    poison_(t["y"])
    try:
        fresh.execute_plan_at_index(io.pack(), workspace_for(fresh, plan=index), index=index, handle=get_handle())
        torch.cuda.synchronize()
    except Exception as exc:
        raise Wrong(f"plan {index} is the saved plan but it does not run — is it built (build_plan_at_index)? "
                    f"{first_line(exc, 100)}") from None
    result = check("03.replay_choice", t["y"], ref, quiet=True, raise_on_fail=False)
    if not result.ok:
        raise Wrong(f"plan {index} ran, but y is wrong: {result}")
    return "correct — your index names the saved plan, it is built, and it computes y"


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H


def fastest_plan(graph, pack):
    """Build each candidate, time it in a workspace of its own size, keep the index with the lowest median."""
    on_stream = H.get_handle()
    median_by_plan = {}
    for plan in range(graph.get_execution_plan_count()):
        try:
            graph.build_plan_at_index(plan)
        except Exception:  # declined on this GPU: not a candidate
            continue
        own_workspace = H.workspace_for(graph, plan=plan)

        def launch(plan=plan, own_workspace=own_workspace):
            graph.execute_plan_at_index(pack, own_workspace, index=plan, handle=on_stream)

        median_by_plan[plan] = H.benchmark(launch, warmup=3, iters=10, max_ms=5.0).median_ms
    return min(median_by_plan, key=median_by_plan.get)


def replay_choice(graph, choice):
    """Append the saved (engine id, knobs) to the fresh graph's plan list and build exactly that entry."""
    cudnn = H.load_cudnn()
    graph.validate(); graph.build_operation_graph()   # the operation graph that the plan is appended to
    knob_values = {cudnn.knob_type[name]: value for name, value in choice["knobs"].items()}
    graph.create_execution_plan(choice["engine_id"], knob_values)
    replayed = graph.get_execution_plan_count() - 1
    graph.build_plan_at_index(replayed)
    return replayed
