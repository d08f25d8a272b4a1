"""Notebook 03's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the returned index is validated (type, range) before anything runs, and the notebook's own skeleton
cells. On a GPU: real answers, right and wrong, through the checkers (they time plans, so they need one).
"""
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch

import helpers as H
import grader as X
from grader import nb03
from tests.support import graded, refused, rejects_each, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("03.fastest_plan", "03.replay_choice")


# ------------------------------------------------------------------ CPU: the returned index
@pytest.mark.parametrize("value, message", [
    ("eng41_k2=0_k13=1", "return the plan's index (an int), not its name 'eng41_k2=0_k13=1'"),
    (2.0, "return the plan's index as an int, got float 2.0"),
    (True, "return the plan's index as an int, got bool True"),
    (35, "plan 35 does not exist: the graph has 35 plans (0 to 34)"),
    (-1, "plan -1 does not exist: the graph has 35 plans (0 to 34)"),
])
def test_an_index_that_is_not_a_plan_is_rejected(value, message):
    with pytest.raises(X.Wrong) as caught:
        nb03.plan_index(value, 35)
    assert str(caught.value) == message


def test_a_graph_left_without_plans_is_rejected():
    with pytest.raises(X.Wrong, match=r"^the graph has no plans: plan it first"):
        nb03.plan_index(0, 0)


@pytest.mark.parametrize("value", [None, ...])
def test_returning_nothing_is_not_done(value):
    with pytest.raises(X.NotDone):
        nb03.plan_index(value, 35)


def test_a_numpy_integer_is_an_index():
    assert nb03.plan_index(np.int64(3), 35) == 3


# ------------------------------------------------------------------ CPU: the pick must come from timing
def _table(results):
    """A ``time_plans``-shaped table: one row per plan with its result (and a median where it was timed)."""
    import pandas as pd

    rows = {i: dict(name=f"eng{i}", result=r, median_ms=0.02 if r in ("timed", "cut off") else float("nan"))
            for i, r in enumerate(results)}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("plan")


def test_an_index_returned_without_running_the_plans_fails_whatever_it_is():
    """The loophole: ``return 0`` passed whenever the heuristic's pick was within 5 % of the fastest. Now the
    plans the answer ran decide first: none run, none timed."""
    table = _table(["timed", "build failed: not supported", "timed", "cut off"])
    nb03.require_timed(0, table, {0, 2, 3})                    # every plan that builds ran: fine
    nb03.require_timed(2, table, {0, 1, 2, 3})
    with pytest.raises(X.Wrong) as caught:
        nb03.require_timed(0, table, set())
    assert str(caught.value) == ("it returned plan 0 without running any plan: time each plan that builds "
                                 "(execute_plan_at_index) and return the fastest by measurement")
    with pytest.raises(X.Wrong) as caught:
        nb03.require_timed(0, table, {0})
    assert str(caught.value) == ("it returned plan 0 after running 1 of the 3 plans that build here (not plan 2, 3): "
                                 "time every plan that builds, then pick")


def test_the_plans_an_answer_runs_are_recorded_with_their_indices():
    """What the checker records while the answer times plans (the stand-in takes the graph's place)."""
    import torch

    from grader.graph_runs import recording
    from tests.support import StandInGraph

    graph = StandInGraph(lambda x: {"y": x}, {"x": 1}, {"y": 2})
    pack = {1: torch.ones(2), 2: torch.zeros(2)}

    def times_plans_1_and_2(graph, pack):
        for index in (1, 2, 2):
            graph.execute_plan_at_index(pack, None, index=index)
        return 0

    with recording(detail=False, classes=(StandInGraph,)) as runs:
        returned = times_plans_1_and_2(graph, pack)
    assert runs.plans_of(graph) == {1, 2}
    with pytest.raises(X.Wrong, match=r"^it returned plan 0 after running 2 of the 3 plans that build here \(not "
                                      r"plan 0\)"):
        nb03.require_timed(returned, _table(["timed"] * 3), runs.plans_of(graph))


# ------------------------------------------------------------------ CPU: the race the checker sets (issue 50)
def _timed_table(medians, results=None):
    import pandas as pd

    results = results or ["timed"] * len(medians)
    return pd.DataFrame({"name": [f"eng{i}" for i in range(len(medians))], "result": results,
                         "check": ["PASS"] * len(medians), "median_ms": medians}).rename_axis("plan")


@pytest.mark.parametrize("seed", range(6))
def test_the_race_holds_every_plan_but_a_fast_one_that_an_untimed_pick_never_returns(seed):
    import random

    table = _timed_table([0.02, 0.03, 0.025, 0.04, 0.021, 2.0, 0.022, 0.05])
    refused = nb03.refused_plans(table)
    winner, holds = nb03.race_holds(table, refused, random.Random(seed))
    usable = [i for i in range(len(table)) if i not in refused]
    assert winner in usable and winner != usable[0]              # never the first plan that builds
    assert table.loc[winner, "median_ms"] <= nb03.WINNER_WITHIN * min(table.loc[usable[1:], "median_ms"])
    assert set(holds) == set(usable) - {winner}                  # every other plan is held
    base = max(nb03.HOLD_FACTOR * table.loc[winner, "median_ms"], nb03.HOLD_MIN_MS)
    assert all(base <= ms <= 2 * base for ms in holds.values())
    raced = {i: table.loc[i, "median_ms"] + holds.get(i, 0) for i in usable}
    assert min(raced, key=raced.get) == winner and sorted(raced.values())[1] >= 3 * raced[winner]


def test_a_graph_whose_only_timed_plan_is_the_first_has_no_race():
    import random

    assert nb03.race_holds(_timed_table([0.02]), [], random.Random(0)) == (None, {})


def test_rank_correlation():
    assert nb03.rank_correlation({0: 1, 1: 2, 2: 3}, {0: 10, 1: 20, 2: 30}) == pytest.approx(1.0)
    assert nb03.rank_correlation({0: 1, 1: 2, 2: 3}, {0: 30, 1: 20, 2: 10}) == pytest.approx(-1.0)
    assert np.isnan(nb03.rank_correlation({0: 1.0, 1: 1.0}, {0: 1, 1: 2}))


def _measured_table():
    return _timed_table([0.3, 0.02, 0.25, 0.32, 0.28, 9.0], ["timed"] * 5 + ["cut off"])


def _counts(runs=14):
    return Counter({i: runs for i in range(5)} | {5: 1}), Counter({i: 1 for i in range(6)})


def _benchmarked(table, noise=0.0):
    return [({i}, 0, float(table.loc[i, "median_ms"]) * (1 + noise * ((-1) ** i))) for i in range(6)]


def test_an_answer_that_timed_each_plans_executes_passes():
    table = _measured_table()
    executes, builds = _counts()
    nb03.require_measured(table, executes, builds, _benchmarked(table, noise=0.02))
    nb03.require_measured(table, executes, builds, [])     # its own timer: the counts still hold


@pytest.mark.parametrize("case, message", [
    ("benchmark of the build", "you timed the build: a timing call (H.gpu_time, H.benchmark) ran "
                               "build_plan_at_index (13 builds) and no plan — build each plan once, then time "
                               "execute_plan_at_index"),
    ("built more than run", "plan 0 was built 13 times and run 1: you timed the build — build each plan once, then "
                            "time execute_plan_at_index"),
    ("one run a plan", "plan 0 ran 1 time: that is not a timing — time each plan over several runs "
                       "(H.gpu_time's or H.benchmark's warm-up and iterations), then pick"),
    ("made-up times", "the times your timing calls gave you do not follow the plans' speeds: rank correlation -0.90 with "
                      "the checker's own timing of the same 5 plans (want at least 0.6) — time each plan's own "
                      "execute_plan_at_index"),
    ("constant times", "the times your timing calls gave you do not follow the plans' speeds: rank correlation undefined "
                       "(your times are all equal)"),
])
def test_an_answer_that_did_not_time_the_executes_is_refused_in_one_line(case, message):
    table = _measured_table()
    executes, builds = _counts()
    benchmarked = _benchmarked(table)
    if case == "benchmark of the build":
        benchmarked = [(set(), 13, 1.5)] + benchmarked
    elif case == "built more than run":
        builds[0], executes[0] = 13, 1
    elif case == "one run a plan":
        executes = Counter({i: 1 for i in range(6)})
    elif case == "made-up times":
        benchmarked = [({i}, 0, ms) for i, ms in enumerate([0.1, 0.5, 0.2, 0.05, 0.3, 9.0])]
    elif case == "constant times":
        benchmarked = [({i}, 0, 0.1) for i in range(6)]
    with pytest.raises(X.Wrong) as caught:
        nb03.require_measured(table, executes, builds, benchmarked)
    assert str(caught.value).startswith(message), str(caught.value)


def test_a_plan_near_the_cut_off_may_run_once():
    """A plan the answer's H.benchmark cut off after one run (max_ms) but the checker timed in full is not "one run"."""
    table = _timed_table([0.3, 0.02, 0.25, 0.32, 0.28, 4.0])
    executes, builds = _counts()
    executes[5] = 1
    nb03.require_measured(table, executes, builds, [])


def _stand_in_timer(monkeypatch, name, module, median_ms):
    """``helpers.<name>`` and ``module.<name>`` replaced by a CPU stand-in that calls ``fn`` once and reports
    ``median_ms``; a stand-in graph, its pack and an empty build counter."""
    from types import SimpleNamespace

    from tests.support import StandInGraph

    import helpers
    monkeypatch.setattr(helpers, name, lambda fn, **kw: (fn(), SimpleNamespace(median_ms=median_ms))[1])
    monkeypatch.setattr(module, name, getattr(helpers, name))
    graph = StandInGraph(lambda x: {"y": x}, {"x": 1}, {"y": 2})
    return graph, {1: torch.ones(2), 2: torch.zeros(2)}, Counter()


def test_what_h_benchmark_gave_the_answer_is_seen_plan_by_plan(monkeypatch):
    """``benchmarks_seen`` wraps H.benchmark (here a CPU stand-in) and notes the plans each call ran and its median."""
    from grader.graph_runs import recording
    from helpers.timing import per_call
    from tests.support import StandInGraph

    import helpers
    graph, pack, builds = _stand_in_timer(monkeypatch, "benchmark", per_call, 0.5)
    with recording(detail=False, classes=(StandInGraph,)) as runs, nb03.benchmarks_seen(graph, runs, builds) as seen:
        helpers.benchmark(lambda: graph.execute_plan_at_index(pack, None, index=3))
        per_call.benchmark(lambda: builds.update([4]))             # a "build" and no execute
    assert seen == [({3}, 0, 0.5), (set(), 1, 0.5)]
    assert helpers.benchmark.__name__ == "<lambda>"               # put back on leaving


def test_what_h_gpu_time_gave_the_answer_is_seen_too(monkeypatch):
    """The notebook teaches H.gpu_time: ``benchmarks_seen`` notes its calls as it notes H.benchmark's, under the
    surface's name and its module's."""
    from grader.graph_runs import recording
    from helpers.timing import gpu
    from tests.support import StandInGraph

    import helpers
    graph, pack, builds = _stand_in_timer(monkeypatch, "gpu_time", gpu, 0.25)
    with recording(detail=False, classes=(StandInGraph,)) as runs, nb03.benchmarks_seen(graph, runs, builds) as seen:
        helpers.gpu_time(lambda: graph.execute_plan_at_index(pack, None, index=5))
        gpu.gpu_time(lambda: graph.execute_plan_at_index(pack, None, index=6))
    assert seen == [({5}, 0, 0.25), ({6}, 0, 0.25)]
    assert helpers.gpu_time.__name__ == "<lambda>"                # put back on leaving


@pytest.mark.parametrize("builds, executes, message", [
    ({7: 1}, {}, None),
    ({"all": 1, 7: 1}, {}, "you called build_plans, which builds the heuristic's candidates: replaying a saved choice "
                           "builds the saved plan alone — build_plan_at_index(its index)"),
    ({0: 1, 1: 1, 7: 1}, {}, "you built 3 plans (plan 0, 1 besides plan 7): replaying a saved choice builds the saved "
                             "plan alone, not the candidates again"),
    ({7: 1}, {7: 5}, "you ran plan 7 while replaying: a saved choice is rebuilt as saved, without timing the "
                     "candidates again"),
])
def test_a_saved_choice_is_replayed_not_tuned_again(builds, executes, message):
    if message is None:
        nb03.require_replayed(7, Counter(builds), Counter(executes))
        return
    with pytest.raises(X.Wrong) as caught:
        nb03.require_replayed(7, Counter(builds), Counter(executes))
    assert str(caught.value) == message


# ------------------------------------------------------------------ CPU: the notebook's cells


# ------------------------------------------------------------------ GPU: real answers through the checkers
def _medians(graph, pack):
    """{index: median ms} for every plan that builds (as the reference solution times them)."""
    handle, medians = H.get_handle(), {}
    for i in range(graph.get_execution_plan_count()):
        try:
            graph.build_plan_at_index(i)
        except Exception:
            continue
        ws = H.workspace_for(graph, plan=i)
        medians[i] = H.benchmark(lambda i=i, ws=ws: graph.execute_plan_at_index(pack, ws, index=i, handle=handle),
                                 warmup=2, iters=5, max_ms=5.0).median_ms
    return medians


def slowest_plan(graph, pack):
    medians = _medians(graph, pack)
    return max(medians, key=medians.get)


def plan_name_instead_of_index(graph, pack):
    medians = _medians(graph, pack)
    return graph.get_plan_name_at_index(min(medians, key=medians.get))


def one_past_the_last(graph, pack):
    return graph.get_execution_plan_count()


def return_zero(graph, pack):
    """The heuristic's first choice, untimed: right only by luck."""
    return 0


def heuristics_first_choice(graph, pack):
    graph.build_plans()  # HEURISTICS_CHOICE: the first plan that builds, untimed
    return next(i for i in range(graph.get_execution_plan_count()) if _builds(graph, i))


def _builds(graph, i):
    try:
        graph.build_plan_at_index(i)
        return True
    except Exception:
        return False


def _plan_with_saved_modes(graph, choice):
    cudnn = H.load_cudnn()
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([getattr(cudnn.heur_mode, m) for m in choice["heuristic_modes"]])


def first_plan_instead(graph, choice):
    _plan_with_saved_modes(graph, choice)
    graph.build_plan_at_index(0)
    return 0


def found_by_name_not_built(graph, choice):
    _plan_with_saved_modes(graph, choice)
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    return names.index(choice["plan_name"])


def engine_without_its_knobs(graph, choice):
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plan(choice["engine_id"], {})
    last = graph.get_execution_plan_count() - 1
    graph.build_plan_at_index(last)
    return last


def position_among_built(graph, pack):
    """Times every plan that builds, then returns the fastest's position in that list (not its index)."""
    medians = _medians(graph, pack)
    built = sorted(medians)
    return built.index(min(medians, key=medians.get))


def torch_timed_instead(graph, pack):
    """Times torch's own convolution, runs no plan, and returns the first plan."""
    x = next(iter(pack.values()))
    H.benchmark(lambda: torch.relu(x * 2), warmup=1, iters=3)
    return 0


def first_built_after_timing_one(graph, pack):
    """Builds and times only the first plan that builds: the point (comparing every plan) missed."""
    handle = H.get_handle()
    for i in range(graph.get_execution_plan_count()):
        if _builds(graph, i):
            ws = H.workspace_for(graph, plan=i)
            H.benchmark(lambda: graph.execute_plan_at_index(pack, ws, index=i, handle=handle), warmup=1, iters=3)
            return i


def _each_plan_that_builds(graph):
    return [i for i in range(graph.get_execution_plan_count()) if _builds(graph, i)]


def constant_timings(graph, pack):
    """Runs every plan three times but times nothing: every plan "takes" 1 ms, so the first wins."""
    handle, medians = H.get_handle(), {}
    for i in _each_plan_that_builds(graph):
        ws = H.workspace_for(graph, plan=i)
        for _ in range(3):
            graph.execute_plan_at_index(pack, ws, index=i, handle=handle)
        medians[i] = 1.0
    return min(medians, key=medians.get)


def made_up_table(graph, pack):
    """Times every plan with H.benchmark, then picks from a table of its own making (rising with the index)."""
    _medians(graph, pack)
    made_up = {i: 0.01 * (1 + i) for i in _each_plan_that_builds(graph)}
    return min(made_up, key=made_up.get)


def build_timed_with_benchmark(graph, pack):
    """H.benchmark of build_plan_at_index, each plan then run once so that every plan "ran"."""
    handle, medians = H.get_handle(), {}
    for i in range(graph.get_execution_plan_count()):
        try:
            medians[i] = H.benchmark(lambda i=i: graph.build_plan_at_index(i), warmup=1, iters=3).median_ms
        except Exception:
            continue
        graph.execute_plan_at_index(pack, H.workspace_for(graph, plan=i), index=i, handle=handle)
    return min(medians, key=medians.get)


def build_timed_by_hand(graph, pack):
    """The host's clock around build_plan_at_index; each plan then run once."""
    import time

    handle, seconds = H.get_handle(), {}
    for i in range(graph.get_execution_plan_count()):
        t0 = time.perf_counter()
        if not _builds(graph, i):
            continue
        seconds[i] = time.perf_counter() - t0
        graph.execute_plan_at_index(pack, H.workspace_for(graph, plan=i), index=i, handle=handle)
    return min(seconds, key=seconds.get)


def rebuilds_every_candidate(graph, choice):
    """Plans with the saved modes and builds every candidate (policy ALL), then finds the saved one by name."""
    cudnn = H.load_cudnn()
    _plan_with_saved_modes(graph, choice)
    graph.build_plans(cudnn.build_plan_policy.ALL)
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    return names.index(choice["plan_name"])


def builds_each_candidate_to_find_it(graph, choice):
    _plan_with_saved_modes(graph, choice)
    _each_plan_that_builds(graph)
    names = [graph.get_plan_name_at_index(i) for i in range(graph.get_execution_plan_count())]
    return names.index(choice["plan_name"])


WRONG = [
    # issue 50: the race the checker sets, the executes it counts, the builds it counts
    ("03.fastest_plan", constant_timings, r"is the first plan that builds, but plan \d+ is|is the slowest plan|% more "
                                          r"than the fastest"),
    ("03.fastest_plan", made_up_table, r"is the first plan that builds, but plan \d+ is|is the slowest plan|% more "
                                       r"than the fastest"),
    ("03.fastest_plan", build_timed_with_benchmark,
     r"^you timed the build: a timing call \(H\.gpu_time, H\.benchmark\) ran build_plan_at_index"),
    ("03.fastest_plan", build_timed_by_hand, r"^plan \d+ ran 1 time: that is not a timing"),
    ("03.replay_choice", rebuilds_every_candidate, r"^you called build_plans, which builds the heuristic's candidates"),
    ("03.replay_choice", builds_each_candidate_to_find_it, r"^you built \d+ plans \(plan "),
    ("03.fastest_plan", position_among_built, r"^plan \d+ does not build on the checker's graph .* not its position "
                                              r"among the plans that built|% more than the fastest|is the first plan that builds, but"),
    ("03.fastest_plan", torch_timed_instead, r"^it returned plan 0 without running any plan"),
    ("03.fastest_plan", first_built_after_timing_one, r"^it returned plan \d+ after running 1 of the \d+ plans"),
    ("03.fastest_plan", slowest_plan, r"is the slowest plan|% more than the fastest, plan"),
    ("03.fastest_plan", plan_name_instead_of_index, r"return the plan's index \(an int\), not its name"),
    ("03.fastest_plan", one_past_the_last, r"does not exist: the graph has"),
    ("03.fastest_plan", return_zero, r"^it returned plan 0 without running any plan: time each plan that builds"),
    ("03.fastest_plan", heuristics_first_choice, r"^it returned plan \d+ without running any plan"),
    ("03.replay_choice", first_plan_instead, "plan 0 is "),
    ("03.replay_choice", found_by_name_not_built, "is the saved plan but it does not run"),
]


test_a_wrong_answer_fails_with_one_line_saying_why = rejects_each(WRONG, how="search")


@requires_gpu
def test_a_timed_pick_of_the_heuristics_first_choice_passes_only_within_the_noise():
    """Every plan timed, then the heuristic's first choice (the first plan that builds) returned anyway: the
    checker accepts it as within the allowance or names the measured gap."""
    def times_then_returns_the_first_that_builds(graph, pack):
        return min(_medians(graph, pack))

    verdict = graded("03.fastest_plan", times_then_returns_the_first_that_builds)
    if verdict:
        assert "is the fastest" in verdict.message or "within" in verdict.message, verdict.message
    else:   # the first choice named, or, where it is also the slowest plan, that
        assert ("is the first plan that builds, but plan" in verdict.message
                or "is the slowest plan" in verdict.message), verdict.message


@requires_gpu
def test_an_engine_replayed_without_its_knobs_is_not_the_saved_plan():
    got = refused("03.replay_choice", engine_without_its_knobs)
    assert "the same engine with other knobs" in got or "your code raised" in got, got


_FOUND: list = []


def _what_the_checkers_frames_hold() -> list:
    """Names of what a learner's code could read up the call stack, in the grader's frames: a table (DataFrame, a
    dict of floats) or a float64 tensor (a reference), also one level inside a dict or list."""
    import inspect

    import pandas as pd

    def suspicious(value):
        return (isinstance(value, pd.DataFrame) or (isinstance(value, torch.Tensor) and value.dtype == torch.float64)
                or (isinstance(value, dict) and value and all(isinstance(v, float) for v in value.values())))

    found = []
    for info in inspect.stack()[2:]:
        if "/grader/" not in info.filename.replace("\\", "/"):
            continue
        for name, value in info.frame.f_locals.items():
            inner = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(value, (list, tuple)) else []
            if suspicious(value) or any(suspicious(v) for v in inner):
                found.append(f"{info.function}.{name}")
    return found


def reads_the_checkers_frames(graph, pack):
    _FOUND[:] = _what_the_checkers_frames_hold()
    return 0


def reads_the_checkers_frames_on_replay(graph, choice):
    _FOUND[:] = _what_the_checkers_frames_hold()
    return 0


@requires_gpu
@pytest.mark.parametrize("key, spy", [("03.fastest_plan", reads_the_checkers_frames),
                                      ("03.replay_choice", reads_the_checkers_frames_on_replay)])
def test_nothing_the_checker_judges_by_is_in_the_answers_frames(key, spy):
    """The checker's timing table and its reference are made after the answer returns: an answer that reads the
    call stack finds neither (and fails)."""
    _FOUND[:] = ["not run"]
    verdict = graded(key, spy)
    assert verdict.status == "failed" and _FOUND == [], (_FOUND, verdict.message)


def test_the_frame_reader_finds_a_table_and_a_reference_where_they_are():
    """The spy above is not blind: in a grader frame holding a table and a float64 reference, it names both."""
    import pandas as pd

    namespace = {"pd": pd, "torch": torch, "look": _what_the_checkers_frames_hold}
    code = compile("def checker():\n    table = pd.DataFrame({'median_ms': [1.0]})\n"
                   "    ref = {'y': torch.zeros(2, dtype=torch.float64)}\n    return answer()\n"
                   "def answer():\n    return look()\n", str(ROOT / "grader" / "fake.py"), "exec")
    exec(code, namespace)
    assert namespace["checker"]() == ["checker.table", "checker.ref"]


@pytest.mark.parametrize("count", [2, 3, 8, 33])
def test_a_position_among_the_plans_that_build_names_a_refused_or_the_slow_plan(count):
    """Whatever plan an answer finds fastest, its position among the plans that build, returned as an index, is a
    plan the checker's graph refuses or the one slow plan it keeps ahead of the rest."""
    import pandas as pd

    medians = [1.0 + 0.1 * ((7 * i) % 5) for i in range(count)]
    table = pd.DataFrame({"median_ms": medians, "check": ["PASS"] * count})
    refused = set(nb03.refused_plans(table))
    assert refused and 0 in refused | {int(table["median_ms"].idxmax())}
    builds = [i for i in range(count) if i not in refused]
    ahead = count // 2 + 1 if count > 2 else 1          # the refused region, the kept slow plan included
    kept = [i for i in builds if i < ahead]
    assert len(kept) <= 1 and len(refused) + len(kept) == ahead
    for fastest in builds:
        position = builds.index(fastest)
        assert position in refused or position in kept, (fastest, position)


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) 03's checkers build cuDNN graphs before they call the answer
DECIDED_BY = {
    "03.fastest_plan": "test_an_index_returned_without_running_the_plans_fails_whatever_it_is",
    "03.replay_choice": "test_an_index_that_is_not_a_plan_is_rejected",
}
