"""grader/graph_runs.py: the record of the graphs an answer executed, on CPU.

With ``StandInGraph`` (tests/support.py) the recorder watches stand-ins that compute with torch, so every rule
a checker builds on it (written by the graph, nothing after it, one graph, pass-by-value) is exercised without a
GPU; the last tests read a real ``cudnn.pygraph`` (constructed on meta tensors, never executed) the same way.
"""
import pytest
import torch

import grader as X
from grader import internals
from grader.graph_runs import GraphRun, bound_buffers, recording
from tests.support import StandInGraph

WATCH = dict(classes=(StandInGraph,))


def doubler():
    """y = 2 x, x uid 1, y uid 2."""
    return StandInGraph(lambda x: {"y": 2 * x}, {"x": 1}, {"y": 2})


def test_every_execute_is_recorded_with_its_plan_and_buffers_and_the_methods_come_back():
    original = StandInGraph.__dict__["execute"], StandInGraph.__dict__["execute_plan_at_index"]
    g, x, y = doubler(), torch.ones(4), torch.zeros(4)
    with recording(**WATCH) as runs:
        g.execute({1: x, 2: y})
        g.execute_plan_at_index({1: x, 2: y}, None, index=3)
        g.execute_plan_at_index({1: x, 2: y}, None, 5)
    assert [r.plan for r in runs] == [None, 3, 5] and runs.plans_of(g) == {3, 5}
    assert runs[0].buffers == {1: x, 2: y} and runs.graphs() == [g]
    assert torch.equal(y, 2 * x)
    assert (StandInGraph.__dict__["execute"], StandInGraph.__dict__["execute_plan_at_index"]) == original


def test_the_methods_come_back_when_the_block_raises():
    original = StandInGraph.__dict__["execute"]
    with pytest.raises(RuntimeError):
        with recording(**WATCH):
            raise RuntimeError("the answer failed")
    assert StandInGraph.__dict__["execute"] is original


def test_without_detail_only_the_graph_and_the_plan_are_kept():
    g = doubler()
    with recording(detail=False, **WATCH) as runs:
        g.execute_plan_at_index({1: torch.ones(2), 2: torch.zeros(2)}, None, index=7)
    assert runs[0].graph is g and runs[0].plan == 7 and runs[0].buffers == {}


def test_an_output_written_by_the_graph_passes():
    g, x, y = doubler(), torch.ones(4), torch.full((4,), float("nan"))
    with recording(snapshot=True, **WATCH) as runs:
        g.execute({1: x, 2: y})
    assert runs.require_written(y, "y", by=g).graph is g


@pytest.mark.parametrize("case, message", [
    ("torch only", "y was not written by a cuDNN graph: no execute had y as an output in its variant pack — fix it"),
    ("unexecuted graph", "y was not written by a cuDNN graph: the graph you returned never ran — fix it"),
    ("into a scratch buffer", "y was not written by a cuDNN graph: no execute had y as an output"),
    ("y as an input", "y was not written by a cuDNN graph: no execute had y as an output"),
    ("another graph", "y was written by another cuDNN graph, not the one you returned — fix it"),
    ("torch after the graph", "y changed after your cuDNN graph wrote it: something else wrote y last"),
    ("a view bound, torch after", "y changed after your cuDNN graph wrote it: something else wrote y last"),
])
def test_an_output_not_left_by_the_graph_is_refused_in_one_line(case, message):
    g, other, x, y = doubler(), doubler(), torch.ones(4), torch.full((4,), float("nan"))
    with recording(snapshot=True, **WATCH) as runs:
        if case == "into a scratch buffer":
            g.execute({1: x, 2: torch.empty(4)})
        elif case == "y as an input":
            y.copy_(2 * x)
            StandInGraph(lambda x: {"z": x}, {"x": 1}, {"z": 2}).execute({1: y, 2: torch.empty(4)})
        elif case == "another graph":
            other.execute({1: x, 2: y})
        elif case == "torch after the graph":
            g.execute({1: x, 2: y})
            y.mul_(3)
        elif case == "a view bound, torch after":   # the snapshot has the view's shape, not y's
            g.execute({1: x.view(2, 2), 2: y.view(2, 2)})
            y.mul_(3)
        if case in ("torch only", "unexecuted graph", "into a scratch buffer"):
            y.copy_(2 * x)
    by = None if case in ("torch only", "into a scratch buffer", "y as an input", "torch after the graph",
                          "a view bound, torch after") else g
    with pytest.raises(X.Wrong) as caught:
        runs.require_written(y, "y", by=by, how="fix it")
    assert str(caught.value).startswith(message), str(caught.value)
    assert "\n" not in str(caught.value)


def test_recording_with_no_execute_method_to_watch_raises_instead_of_recording_nothing():
    class NoExecute:   # a frontend that moved execute elsewhere: every right answer would fail as "not written"
        pass

    with pytest.raises(RuntimeError, match="no execute method to watch"):
        with recording(classes=(NoExecute,)):
            pass


def test_a_graph_run_twice_into_the_same_output_is_judged_by_its_last_write():
    g, x, y = doubler(), torch.ones(4), torch.zeros(4)
    with recording(snapshot=True, **WATCH) as runs:
        g.execute({1: x, 2: y})
        y.zero_()
        g.execute({1: 3 * x, 2: y})   # another value: judged by the first write, y would look overwritten
    assert runs.require_written(y, "y", by=g) is runs[1]


def test_since_splits_the_runs_of_one_call():
    g, x, y = doubler(), torch.ones(4), torch.zeros(4)
    with recording(**WATCH) as runs:
        g.execute({1: x, 2: torch.zeros(4)})
        mark = len(runs)
        g.execute({1: x, 2: y})
    assert len(runs.since(mark)) == 1 and runs.since(mark).writer(y) is runs[1]
    assert runs[:mark][0].uid_of(y) is None


def test_host_scalars_are_read_at_the_execute_and_pass_by_value_only_where_the_graph_says_so():
    scaled = StandInGraph(lambda x, alpha: {"y": alpha.item() * x}, {"x": 1, "alpha": 3}, {"y": 2},
                          pass_by_value=(3,))
    on_device = StandInGraph(lambda x, alpha: {"y": alpha.item() * x}, {"x": 1, "alpha": 3}, {"y": 2})
    host, x, y = torch.full((1, 1, 1), 0.5), torch.ones(4), torch.zeros(4)
    with recording(**WATCH) as runs:
        scaled.execute({1: x, 2: y, 3: host})
        host.fill_(2.0)  # the next call's value: the first execute must still read 0.5
        on_device.execute({1: x, 2: y, 3: host})
    assert runs[0].scalars() == {3: 0.5}
    assert runs[1].values == {3: 2.0} and runs[1].scalars() == {}


def test_bound_buffers_follow_the_frontends_keys():
    class Keyed(StandInGraph):
        def find_tensor(self, key):
            return self._tensors.get({"x": 1, "y": 2}.get(key, key))

    g = Keyed(lambda x: {"y": x}, {"x": 1}, {"y": 2})
    g._data_bindings = {1: "auto-bound x", 5: "auto-bound w"}
    handle = type("GraphTensor", (), {"uid": 2})()
    assert bound_buffers(g, {"x": "mine", handle: "out"}) == {1: "mine", 2: "out", 5: "auto-bound w"}
    assert bound_buffers(g, ["a", "b"], tensor_uids=[2, 1]) == {1: "b", 2: "a", 5: "auto-bound w"}


# ------------------------------------------------------------------ a real cudnn.pygraph (constructed only)
cudnn = pytest.importorskip("cudnn")


def test_by_default_the_frontends_pygraph_is_watched_and_restored():
    assert internals.graph_classes() == (cudnn.pygraph,)
    original = cudnn.pygraph.execute, cudnn.pygraph.execute_plan_at_index
    with recording():
        assert cudnn.pygraph.execute is not original[0]
    assert (cudnn.pygraph.execute, cudnn.pygraph.execute_plan_at_index) == original


def test_a_real_graph_names_its_outputs_its_scalars_and_its_sdpa_stats():
    """What a checker reads from a pygraph: its outputs' UIDs, its pass-by-value tensors, its nodes' kinds."""
    g = cudnn.pygraph(io_data_type=torch.bfloat16, intermediate_data_type=torch.float32,
                      compute_data_type=torch.float32)
    q = torch.empty(1, 2, 64, 32, dtype=torch.bfloat16, device="meta")
    tq, tk, tv = (g.tensor_like(q) for _ in range(3))
    alpha = g.tensor_like(torch.full((1, 1, 1), 1.0))         # a CPU tensor: pass by value
    o, stats = g.sdpa(tq, tk, tv, attn_scale=0.1, generate_stats=True)
    o.set_output(True)
    stats.set_output(True)
    buffers = {t.uid: torch.zeros(2) for t in (tq, tk, tv, o, stats)}
    run = GraphRun(g, buffers=buffers, values={alpha.uid: 0.25, tq.uid: 9.0})
    assert run.output_uids() == {o.uid, stats.uid}
    assert run.uid_of(buffers[o.uid]) == o.uid and run.uid_of(buffers[tq.uid]) is None
    assert run.reads(buffers[tq.uid]) and run.scalars() == {alpha.uid: 0.25}
    assert run.node_kinds() == ["SDPA"] and g.nodes[0].outputs["Stats"] is stats


def test_a_graph_without_ops_binds_any_uid_as_its_output():
    """A deserialized graph holds no ops: the recorder cannot tell its outputs, so any bound buffer counts."""
    run = GraphRun(cudnn.pygraph(), buffers={13: torch.zeros(3)})
    assert run.output_uids() is None and run.uid_of(run.buffers[13]) == 13


# ------------------------------------------------------------------ grading the graph: run again on fresh inputs
from grader.graph_runs import (Rerun, StreamOrder, permuted, regrade, require_on_stream, rerun,  # noqa: E402
                               stream_slip)


def _matmul_like():
    """y = x * w + b, element-wise (uids x 1, w 2, b 3, y 4): a stand-in with three inputs."""
    return StandInGraph(lambda x, w, b: {"y": x * w + b}, {"x": 1, "w": 2, "b": 3}, {"y": 4})


def _given(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.randn(6, generator=gen) for n in "xwb"}, torch.full((6,), float("nan"))


def _reference(x, w, b):
    return {"y": x * w + b}


def test_a_graph_that_computes_the_output_passes_when_run_again_on_fresh_inputs():
    g, (given, y) = _matmul_like(), _given()
    with recording(**WATCH) as runs:
        g.execute({1: given["x"], 2: given["w"], 3: given["b"], 4: y})
    errors = regrade(runs.feeding(y), given, {"y": y}, _reference)
    assert set(errors) == {"y"} and errors["y"] < 1e-6


def test_the_rerun_binds_new_buffers_with_new_values_by_uid():
    g, (given, y) = _matmul_like(), _given()
    with recording(**WATCH) as runs:
        g.execute({1: given["x"], 2: given["w"], 3: given["b"], 4: y})
    done = rerun(runs.feeding(y), given, {"y": y})
    assert isinstance(done, Rerun) and done.foreign == [] and done.unread == []
    for name, old in given.items():
        new = done.inputs[name]
        assert new.data_ptr() != old.data_ptr() and not torch.equal(new, old)
        assert torch.equal(new.sort().values, old.sort().values)   # the same values, in another order
    assert done.packs[0][1] is done.inputs["x"] and done.packs[0][4] is done.outputs["y"]
    assert torch.allclose(done.outputs["y"], done.inputs["x"] * done.inputs["w"] + done.inputs["b"])


def test_the_rerun_calls_the_class_method_not_one_the_answer_set_on_the_graph():
    g, (given, y) = _matmul_like(), _given()
    with recording(**WATCH) as runs:
        g.execute({1: given["x"], 2: given["w"], 3: given["b"], 4: y})
    g.execute = lambda *a, **k: None   # the answer's own "execute", which does nothing
    regrade(runs.feeding(y), given, {"y": y}, _reference)


@pytest.mark.parametrize("case, message", [
    ("copy of w bound", r"^your graph, run again by the checker on new x, w, b \(new buffers, bound by UID, your code "
                        r"not called\), does not compute y: rel err [0-9.e+-]+: it reads 1 tensor you made yourself "
                        r"\(UID 2\), which did not change with the inputs"),
    ("result fed in", r"^your graph, .* does not compute y: rel err .*: it reads 1 tensor you made yourself \(UID 3\)"),
    ("part of the work, patched", r"^your graph, .* does not compute y: rel err .*: your graph does only part of the "
                                  r"work, or its result was changed after it ran"),
    ("b never read", r"^your graph, .* does not compute y: rel err .*: it does not read b"),
    ("output elsewhere", r"^your graph, run again by the checker on new x, w, b, did not write y"),
])
def test_a_graph_that_does_not_compute_the_output_itself_fails_when_run_again(case, message):
    given, y = _given()
    x, w, b = given.values()
    with recording(**WATCH) as runs:
        if case == "copy of w bound":            # a copy taken at build time: right today, stale tomorrow
            _matmul_like().execute({1: x, 2: w.clone(), 3: b, 4: y})
        elif case == "result fed in":            # the answer computed y on the host and fed it in as "b"
            StandInGraph(lambda x, w, b: {"y": 0 * x * w + b}, {"x": 1, "w": 2, "b": 3}, {"y": 4}).execute(
                {1: x, 2: w, 3: (x * w + b).clone(), 4: y})
        elif case == "part of the work, patched":   # the graph multiplies only; the bias is added afterwards
            StandInGraph(lambda x, w, b: {"y": x * w}, {"x": 1, "w": 2, "b": 3}, {"y": 4}).execute(
                {1: x, 2: w, 3: b, 4: y})
        elif case == "b never read":
            StandInGraph(lambda x, w: {"y": x * w}, {"x": 1, "w": 2}, {"y": 4}).execute({1: x, 2: w, 4: y})
        elif case == "output elsewhere":
            scratch = torch.empty(6)
            _matmul_like().execute({1: x, 2: w, 3: b, 4: scratch})
    if case == "output elsewhere":   # the checker reruns the graph that ran, and y is not among its buffers
        with pytest.raises(X.Wrong) as caught:
            done = rerun(runs, given, {"y": y})
            assert "y" not in done.outputs
            raise X.Wrong("your graph, run again by the checker on new x, w, b, did not write y")
    else:
        with pytest.raises(X.Wrong) as caught:
            regrade(runs.feeding(y), given, {"y": y}, _reference)
    import re
    assert re.match(message, str(caught.value)), str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_chain_of_graphs_is_run_again_in_order_with_the_intermediate_rebound():
    first = StandInGraph(lambda x, w: {"h": x * w}, {"x": 1, "w": 2}, {"h": 3})
    second = StandInGraph(lambda h, b: {"y": h + b}, {"h": 3, "b": 4}, {"y": 5})
    (given, y), h = _given(), torch.empty(6)
    with recording(**WATCH) as runs:
        _matmul_like().execute({1: given["x"], 2: given["w"], 3: given["b"], 4: torch.empty(6)})   # unrelated
        first.execute({1: given["x"], 2: given["w"], 3: h})
        second.execute({3: h, 4: given["b"], 5: y})
    chain = runs.feeding(y)
    assert [r.graph for r in chain] == [first, second]
    assert regrade(chain, given, {"y": y}, _reference)["y"] < 1e-6
    with pytest.raises(X.Wrong, match=r"it reads 1 tensor you made yourself \(UID 3\)"):   # the second alone
        regrade(chain[1:], given, {"y": y}, _reference)


def test_permuted_values_keep_the_layout_and_the_distribution():
    old = torch.relu(torch.randn(2, 3, 4, 5)).to(memory_format=torch.channels_last)
    new = permuted(old, torch.Generator().manual_seed(1))
    assert new.stride() == old.stride() and new.dtype == old.dtype and new.data_ptr() != old.data_ptr()
    assert (new >= 0).all() and torch.equal(new.flatten().sort().values, old.flatten().sort().values)


# ------------------------------------------------------------------ streams, in cuDNN's backend's word
def _run_on(stream, attribute=None):
    return GraphRun(None, stream=stream, stream_attribute=stream if attribute is None else attribute)


def test_an_execute_on_the_wanted_stream_passes_and_each_slip_is_named():
    assert stream_slip(_run_on(7), 7) is None
    assert stream_slip(_run_on(0, attribute=7), 7).startswith(
        "the graph ran on stream 0, not on `stream`: the handle's `stream` attribute says `stream`, but cuDNN's "
        "handle was never bound to it — call cudnn.set_stream(handle, stream.cuda_stream)")
    assert stream_slip(_run_on(0), 7, current=0).startswith("the graph ran on the current stream, not on `stream`")
    assert stream_slip(_run_on(9), 7, current=0).startswith("the graph ran on stream 9, not on `stream`")


def test_every_launch_must_be_on_the_stream_an_earlier_one_elsewhere_is_named():
    require_on_stream([_run_on(7), _run_on(7)], 7, current=0)
    with pytest.raises(X.Wrong, match=r"^an earlier launch of your graph ran on the current stream, not on `stream`"):
        require_on_stream([_run_on(0), _run_on(7)], 7, current=0)
    with pytest.raises(X.Wrong, match=r"^the graph ran on stream 9, not on `stream`"):
        require_on_stream([_run_on(7), _run_on(9)], 7, current=0)


def test_the_recorded_stream_is_the_backends_and_the_attribute_is_kept_apart(monkeypatch):
    """A real cudnn.Handle whose attribute was assigned: the record takes the backend's stream (``handle_stream``
    stands in for cudnnGetStream here), and keeps the attribute to name the slip."""
    from grader import graph_runs

    handle = cudnn.Handle(None, 0, 7)      # its attribute says 7
    monkeypatch.setattr(internals, "handle_stream", lambda h: 0 if h is handle else None)
    assert graph_runs._streams_of(cudnn.pygraph(), handle) == (0, 7)
    assert graph_runs._streams_of(doubler(), type("StandIn", (), {"stream": 5})()) == (5, 5)


def test_a_stream_order_ignores_launches_on_the_callers_stream_and_captured_ones():
    order = StreamOrder.__new__(StreamOrder)
    order.caller, order.cycles, order.held = 7, 1, []
    order.executed(_run_on(7))
    order.executed(GraphRun(None, stream=9, captured=True))
    order.executed(GraphRun(None, stream=None))
    assert order.held == [] and order.unordered() == []


def test_an_output_can_start_from_the_checkers_own_blank():
    """An AMAX reduced with an atomic max must start at 0, not NaN: ``blank`` makes each output's new buffer."""
    g = StandInGraph(lambda x: {"y": 2 * x, "amax": torch.maximum(torch.zeros(1), (2 * x).abs().max().reshape(1))},
                     {"x": 1}, {"y": 2, "amax": 3})
    x, y, amax = torch.randn(6), torch.empty(6), torch.zeros(1)
    with recording(**WATCH) as runs:
        g.execute({1: x, 2: y, 3: amax})
    seen = []

    def blank(name, old):
        seen.append(name)
        return torch.zeros_like(old) if name == "amax" else torch.full_like(old, float("nan"))

    errors = regrade(runs.feeding(y), {"x": x}, {"y": y, "amax": amax},
                     lambda x: {"y": 2 * x, "amax": (2 * x).abs().max().reshape(1)}, blank=blank)
    assert sorted(seen) == ["amax", "y"] and set(errors) == {"y", "amax"}
