"""Checkers for notebook 03: autotuning with the per-plan API.

    03.fastest_plan    time every plan of a planned graph, return the index of the fastest
    03.replay_choice   rebuild a saved (name, engine id, knobs) choice on a fresh graph, return its index

Both use notebook 02's conv → bias → ReLU on the checkers' own shape. The fastest plan is judged against the
checker's own timing of every plan, made after the answer returned (nothing it judges by is in a frame the answer
can read): a pick within the timing noise of the fastest passes, a slower one fails with the measured gap. The
checker sets a race the answer cannot know: every plan but one, drawn at random among the fastest, is held behind a
GPU wait before it runs (``race_holds``), so only timing the executes finds the winner. The pick must come from
timing: every plan that builds must have run, several times, and built no more often than it ran (timing the build
fails); the medians the answer's timing calls gave must rank the plans as the checker's do. The checker's graph refuses
the first half of its ranked plans but one slow plan (as a GPU without those engines would: ``refuse_plans``), so a
plan's position among the plans that built, returned as an index, names a refused plan or the slow one. A saved
choice is replayed by building the saved plan alone: no build_plans, no other plan built or run.
"""
from __future__ import annotations

import math
import numbers
import operator
import random
import statistics
from collections import Counter
from contextlib import contextmanager

import pandas as pd
import torch

from helpers.checking import check, poison_
from helpers.device import require_gpu, working_dtype
from helpers.errors import first_line
from helpers.graphs import heuristic_modes, workspace_for
from helpers.handles import get_handle
from helpers.timing.per_call import benchmark
from . import NotDone, Wrong, checker, inputs, internals
from .graph_runs import recording

# N, C, H=W, K: big enough that the fast plans take some microseconds, small enough that the slowest
# (FALLBACK) plans stay in the milliseconds.
SHAPE = dict(N=8, C=128, H=56, K=128)
MODES = ("A", "B", "FALLBACK")
MAX_MS = 5.0             # the checker's cut-off for one run of a pathologically slow plan
ALLOWANCE_PCT = 5.0      # a pick this close to the fastest passes, or twice the measured p10–p90 spread if larger
ALLOWANCE_MS = 1e-3      # ... and never less than the resolution of CUDA-event timing
# The race the checker sets: every plan but one (the winner, drawn at random among the fastest that build) is held
# behind a GPU wait before it runs, of HOLD_FACTOR to twice that times the winner's own time (at least HOLD_MIN_MS,
# well above the host's cost of a launch, so that the race holds where per-call timing is host-bound), each plan its
# own. Only an answer that times the plans' executes finds the winner; a made-up or constant table,
# timing the builds, or the heuristic's order does not.
HOLD_FACTOR = 4.0
HOLD_MIN_MS = 0.2
WINNER_WITHIN = 1.2      # the winner is drawn among the plans within this factor of the fastest
MIN_RUNS = 3             # executes of a plan that make a timing (a plan cut off after one run aside)
MIN_RANK_CORRELATION = 0.6   # Spearman's rho between the answer's timed medians and the checker's own



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


def refuse_plans(graph, refused, holds: dict | None = None, cycles_per_ms: float = 0.0,
                 builds: Counter | None = None) -> None:
    """Make ``graph`` (this one object) refuse to build, size or run the plans in ``refused``, as a GPU without
    their engines does; every other plan behaves as before (and is still recorded when it runs). ``holds``
    (plan -> ms): before such a plan runs (``execute_plan_at_index``, or ``execute`` of it as the selected plan), the
    stream of the handle it runs on is held behind a GPU wait that long (``cycles_per_ms`` GPU cycles a ms).
    ``builds``: counts each ``build_plan_at_index`` by plan (and ``build_plans`` under "all")."""
    refused, cls = frozenset(int(i) for i in refused), type(graph)
    holds = dict(holds or {})

    def refuse(index) -> None:
        if _as_index(index) in refused:
            raise PlanRefused(f"plan {index} ({cls.get_plan_name_at_index(graph, index)}) is not supported on this "
                              "graph here")

    def hold(index, handle) -> None:
        ms = holds.get(_as_index(index))
        if ms and cycles_per_ms:
            with torch.cuda.stream(_launch_stream(graph, handle)):
                internals.gpu_sleep(int(ms * cycles_per_ms))

    def build_plan_at_index(index, *args, **kwargs):
        if builds is not None:
            builds[_as_index(index)] += 1
        refuse(index)
        return cls.build_plan_at_index(graph, index, *args, **kwargs)

    def build_plans(*args, **kwargs):
        if builds is not None:
            builds["all"] += 1
        return cls.build_plans(graph, *args, **kwargs)

    def get_workspace_size_plan_at_index(index, *args, **kwargs):
        refuse(index)
        return cls.get_workspace_size_plan_at_index(graph, index, *args, **kwargs)

    def execute_plan_at_index(tensor_dict, workspace=None, index=0, handle=None, *args, **kwargs):
        refuse(index)
        hold(index, handle)
        return cls.execute_plan_at_index(graph, tensor_dict, workspace, index, handle, *args, **kwargs)

    def execute(tensor_dict, workspace=None, handle=None, *args, **kwargs):
        hold(internals.selected_plan(graph), handle)
        return cls.execute(graph, tensor_dict, workspace, handle, *args, **kwargs)

    graph.build_plan_at_index = build_plan_at_index
    graph.build_plans = build_plans
    graph.get_workspace_size_plan_at_index = get_workspace_size_plan_at_index
    graph.execute_plan_at_index = execute_plan_at_index
    graph.execute = execute


def _launch_stream(graph, handle):
    """The torch stream an execute given ``handle`` launches on (cuDNN's backend's word; torch's current if unknown)."""
    stream = internals.execute_stream(graph, handle)
    if stream is None or stream in (0, 1) or stream == torch.cuda.default_stream().cuda_stream:
        return torch.cuda.default_stream() if stream is not None else torch.cuda.current_stream()
    return torch.cuda.ExternalStream(stream)


def race_holds(table, refused, rng: random.Random) -> tuple[int | None, dict]:
    """``(winner, holds)`` for the checker's ``table`` (``time_plans``'s) once ``refused`` are refused: the winner
    drawn by ``rng`` among the plans that time and pass, but the first of them (the one an untimed pick returns),
    within ``WINNER_WITHIN`` of the fastest of them; every other plan that times is held before it runs, for
    ``HOLD_FACTOR`` to twice that times the winner's time (at least ``HOLD_MIN_MS``), in an order drawn by ``rng``.
    ``(None, {})`` where no plan but the first times."""
    usable = table[table["median_ms"].notna() & (table.get("check", "PASS") != "FAIL")
                   & ~table.index.isin(list(refused))]
    timed = [int(i) for i in usable.index if usable.loc[i, "result"] == "timed"]
    candidates = timed[1:] if timed and timed[0] == int(usable.index[0]) else timed
    if not candidates:
        return None, {}
    fastest = min(float(usable.loc[i, "median_ms"]) for i in candidates)
    winner = rng.choice(sorted(i for i in candidates if float(usable.loc[i, "median_ms"]) <= WINNER_WITHIN * fastest))
    base = max(HOLD_FACTOR * float(usable.loc[winner, "median_ms"]), HOLD_MIN_MS)
    others = [int(i) for i in usable.index if int(i) != winner]
    order = rng.sample(others, len(others))
    return winner, {i: base * (1 + rank / max(len(others), 1)) for rank, i in enumerate(order)}


def cycles_per_ms() -> float:
    """GPU clock cycles of ``internals.gpu_sleep`` per millisecond, measured here (after a warm-up)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    internals.gpu_sleep(100_000)
    cycles = 4_000_000
    start.record()
    internals.gpu_sleep(cycles)
    end.record()
    end.synchronize()
    return cycles / max(start.elapsed_time(end), 1e-3)


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


def rank_correlation(a: dict, b: dict) -> float:
    """Spearman's rho of two ``{plan: ms}`` over their common plans (NaN for fewer than two, or a constant side)."""
    common = sorted(set(a) & set(b))
    if len(common) < 2:
        return float("nan")
    ra = pd.Series([a[i] for i in common]).rank()
    rb = pd.Series([b[i] for i in common]).rank()
    return float(ra.corr(rb)) if ra.std() and rb.std() else float("nan")


def require_measured(table, executes: Counter, builds: Counter, benchmarked: list) -> None:
    """``Wrong`` in one line unless the answer timed the plans' executes, as the checker saw it while the answer ran:
    ``executes`` and ``builds`` count its ``execute_plan_at_index`` and ``build_plan_at_index`` calls by plan;
    ``benchmarked`` holds one ``(plans run inside, builds inside, median ms)`` per timing call. No
    timing call timed builds instead of executes; no plan was built more often than it ran; each plan the
    checker times in full ran at least ``MIN_RUNS`` times; and the medians the timing calls gave the answer, plan by
    plan, rank the plans as the checker's own timing (``table``) does."""
    for plans, built, _ in benchmarked:
        if built and not plans:
            raise Wrong(f"you timed the build: a timing call (H.gpu_time, H.benchmark) ran build_plan_at_index ({built} builds) and no "
                        f"plan — build each plan once, then time execute_plan_at_index")
    for plan, built in sorted((p, n) for p, n in builds.items() if p != "all"):
        ran = executes.get(plan, 0)
        if built >= MIN_RUNS and built > ran:
            raise Wrong(f"plan {plan} was built {built} times and run {ran}: you timed the build — build each plan "
                        f"once, then time execute_plan_at_index")
    full = [int(i) for i in table.index[table["result"] == "timed"]]
    well_below_cut = [i for i in full if float(table.loc[i, "median_ms"]) < MAX_MS / 2]   # never cut off by the answer
    short = [(i, executes.get(i, 0)) for i in well_below_cut if 0 < executes.get(i, 0) < MIN_RUNS]
    if short:
        plan, ran = short[0]
        raise Wrong(f"plan {plan} ran {ran} time{'s' if ran > 1 else ''}: that is not a timing — time each plan over "
                    f"several runs (H.gpu_time's or H.benchmark's warm-up and iterations), then pick")
    reported = {next(iter(plans)): ms for plans, _, ms in benchmarked if len(plans) == 1 and not math.isnan(ms)}
    own = {i: float(table.loc[i, "median_ms"]) for i in full}
    common = set(reported) & set(own)
    if len(common) >= 4:
        rho = rank_correlation(reported, own)
        if not rho >= MIN_RANK_CORRELATION:
            shown = "undefined (your times are all equal)" if math.isnan(rho) else f"{rho:.2f}"
            raise Wrong(f"the times your timing calls gave you do not follow the plans' speeds: rank correlation {shown} "
                        f"with the checker's own timing of the same {len(common)} plans (want at least "
                        f"{MIN_RANK_CORRELATION}) — time each plan's own execute_plan_at_index")


@contextmanager
def benchmarks_seen(graph, runs, builds: Counter):
    """For the block, each call of a timer of the toolbox (``H.gpu_time``, ``H.benchmark``, ``H.call_time``: the
    surface's names and their modules') appends ``(plans of graph run inside it, builds inside it, its median ms)`` to
    the list yielded."""
    import helpers
    from helpers.timing import gpu, per_call

    seen = []

    def make(original):
        def timed(fn, *args, **kwargs):
            mark, built = len(runs), sum(builds.values())
            result = original(fn, *args, **kwargs)
            seen.append((runs.since(mark).plans_of(graph), sum(builds.values()) - built,
                         float(getattr(result, "median_ms", float("nan")))))
            return result
        return timed

    timers = [(module, name) for module in (helpers, per_call) for name in ("benchmark", "call_time")]
    timers += [(helpers, "gpu_time"), (gpu, "gpu_time")]
    with internals.wrapped([(module, name, make) for module, name in timers]):
        yield seen


def _set_up_race(seed: int, builds: Counter):
    """The checker's graph and pack, and the plans it refuses, with its race set (``race_holds``): the checker's
    first pass over every plan, its reference and table stay in this function, gone before the answer runs."""
    t, ref = _problem(seed)
    graph, io = _planned_graph(t)
    table = time_plans(graph, io.pack(), t["y"], ref)
    refused = refused_plans(table)
    _, holds = race_holds(table, refused, random.Random())
    refuse_plans(graph, refused, holds, cycles_per_ms() if holds else 0.0, builds)
    return t, graph, io.pack(), refused


# ------------------------------------------------------------------ 03.fastest_plan
@checker("03.fastest_plan")
def check_fastest_plan(answer):
    require_gpu()
    builds = Counter()
    # The checker's own pass over every plan, as section 5 does it: every plan ahead of the fastest is refused, so
    # the answer's plan list holds failures before the winner, and the race is set (all but one plan held).
    t, graph, pack, refused = _set_up_race(3, builds)
    count = graph.get_execution_plan_count()
    with recording(detail=False) as runs, benchmarks_seen(graph, runs, builds) as benchmarked:
        returned = answer(graph, pack)   # the plan indices only: no cost on the answer's timing
    executes, builds = Counter(run.plan for run in runs.of_graph(graph)), Counter(builds)
    index = plan_index(returned, count)
    # Everything the checker judges by is made now, after the answer returned: its reference and its timing table.
    table = time_plans(graph, pack, t["y"], inputs.conv_reference(t))
    for i in refused:
        table.loc[i, ["result", "median_ms"]] = ["build failed: refused on the checker's graph", float("nan")]
    require_timed(index, table, set(executes))
    require_measured(table, executes, builds, benchmarked)
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
        both = head_to_head(graph, pack, index, best)
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


def require_replayed(index: int, builds: Counter, executes: Counter) -> None:
    """``Wrong`` in one line unless the answer built the saved plan alone (``builds``: its ``build_plan_at_index``
    calls by plan, ``build_plans`` under "all") and ran no plan (``executes``): a saved choice is replayed, not
    tuned again."""
    if builds.get("all"):
        raise Wrong("you called build_plans, which builds the heuristic's candidates: replaying a saved choice "
                    "builds the saved plan alone — build_plan_at_index(its index)")
    others = sorted(p for p, n in builds.items() if p not in (index, "all") and n)
    if others:
        shown = ", ".join(map(str, others[:5])) + (", ..." if len(others) > 5 else "")
        raise Wrong(f"you built {len(others) + (index in builds)} plans (plan {shown} besides plan {index}): replaying "
                    f"a saved choice builds the saved plan alone, not the candidates again")
    ran = sorted(p for p, n in executes.items() if n and p is not None)
    if ran:
        raise Wrong(f"you ran plan {', '.join(map(str, ran[:5]))} while replaying: a saved choice is rebuilt as "
                    f"saved, without timing the candidates again")


@checker("03.replay_choice")
def check_replay_choice(answer):
    require_gpu()
    t = inputs.conv_tensors(SHAPE["N"], SHAPE["C"], SHAPE["H"], SHAPE["K"], dtype=working_dtype(), seed=4)
    choice = _saved_choice_for(t)
    fresh, io = inputs.conv_graph(t)  # constructed only: not validated, not planned
    builds = Counter()
    refuse_plans(fresh, (), builds=builds)   # refuses nothing: counts the builds
    with recording(detail=False) as runs:
        returned = answer(fresh, dict(choice, knobs=dict(choice["knobs"])))
    executes, builds = Counter(run.plan for run in runs.of_graph(fresh)), Counter(builds)
    index = plan_index(returned, fresh.get_execution_plan_count())

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
    require_replayed(index, builds, executes)

    poison_(t["y"])
    try:
        fresh.execute_plan_at_index(io.pack(), workspace_for(fresh, plan=index), index=index, handle=get_handle())
        torch.cuda.synchronize()
    except Exception as exc:
        raise Wrong(f"plan {index} is the saved plan but it does not run — is it built (build_plan_at_index)? "
                    f"{first_line(exc, 100)}") from None
    ref = inputs.conv_reference(t)   # made now, after the answer returned
    result = check("03.replay_choice", t["y"], ref, quiet=True, raise_on_fail=False)
    if not result.ok:
        raise Wrong(f"plan {index} ran, but y is wrong: {result}")
    return "correct — your index names the saved plan, it is built, and it computes y"


def _saved_choice_for(t) -> dict:
    """The saved choice, made on a graph of its own in this function (gone before the answer runs)."""
    tuned, _ = _planned_graph(t)
    return saved_choice(tuned)[1]


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

        try:
            median_by_plan[plan] = H.gpu_time(launch).median_ms   # as the notebook times plans
        except H.NotCapturable:  # cannot be captured in a CUDA graph here: not a candidate
            continue
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
