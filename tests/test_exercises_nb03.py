"""Notebook 03's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the returned index is validated (type, range) before anything runs, and the notebook's own skeleton
cells. On a GPU: real answers, right and wrong, through the checkers (they time plans, so they need one).
"""
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


WRONG = [
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
