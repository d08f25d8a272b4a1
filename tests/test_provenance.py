"""grader/provenance.py on CPU: who wrote a graded output.

``StandInGraph`` (tests/support.py) stands in for a cuDNN graph (torch does its work, and the trace treats that work
as the graph's own), ``StandInCUDAGraph`` for a CUDA graph. Each wrong way to produce y that a hurried learner
writes is refused with its one line; the right ones pass. A recorder that accepted any writer fails these tests
(the closing note of issue 31 records that mutation run).
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import grader as X
from grader.provenance import elementwise_merge, tracing
from tests.support import StandInBuilds, StandInCache, StandInGraph


class StandInCUDAGraph:
    """The three methods ``tracing`` watches on ``torch.cuda.CUDAGraph``. On the CPU nothing is deferred: the work
    "captured" runs at once, and a replay runs nothing (the trace's lineage is what these tests read)."""

    def capture_begin(self):
        pass

    def capture_end(self):
        pass

    def replay(self):
        pass


WATCH = dict(classes=(StandInGraph,), cuda_graph_classes=(StandInCUDAGraph,), cache_classes=())


def relu_matmul():
    """y = relu(x @ w): x uid 1, w uid 2, y uid 3, one MATMUL node."""
    return StandInGraph(lambda x, w: {"y": torch.relu(x @ w)}, {"x": 1, "w": 2}, {"y": 3})


@pytest.fixture
def t():
    gen = torch.Generator().manual_seed(0)
    return dict(x=torch.randn(4, 8, generator=gen), w=torch.randn(8, 5, generator=gen),
                y=torch.full((4, 5), float("nan")))


def graded(t, answer, **rules):
    """Run ``answer(x, w, y)`` as the learner's code and apply ``require_graph_output`` to y."""
    with tracing(**WATCH) as trace:
        trace.input("x", t["x"])
        trace.input("w", t["w"])
        with trace.answer():
            answer(t["x"], t["w"], t["y"])
        return trace.require_graph_output(t["y"], "y", inputs=("x", "w"), **dict(dict(kinds=("MATMUL",)), **rules))


def right(x, w, y):
    relu_matmul().execute({1: x, 2: w, 3: y})


def torch_only(x, w, y):
    y.copy_(torch.relu(x @ w))


def numpy_copied_in(x, w, y):
    y.copy_(torch.from_numpy(np.maximum(x.numpy() @ w.numpy(), 0)))


def discarded(x, w, y):
    relu_matmul().execute({1: x, 2: w, 3: torch.empty_like(y)})    # cuDNN's result thrown away
    y.copy_(torch.relu(x @ w))


def copied_from_scratch(x, w, y):
    scratch = torch.empty_like(y)
    relu_matmul().execute({1: x, 2: w, 3: scratch})
    y.copy_(scratch)


def torch_after(x, w, y):
    relu_matmul().execute({1: x, 2: w, 3: y})
    y.mul_(2)


def torch_before(x, w, y):
    relu_matmul().execute({1: x, 2: w * 2, 3: y})


def another_input(x, w, y):
    relu_matmul().execute({1: torch.randn_like(x), 2: w, 3: y})


def graph_without_the_op(x, w, y):
    StandInGraph(lambda x, w: {"y": torch.relu(x @ w)}, {"x": 1, "w": 2}, {"y": 3}, kind="POINTWISE").execute(
        {1: x, 2: w, 3: y})


def test_an_output_a_graph_wrote_from_the_inputs_passes(t):
    writer = graded(t, right)
    assert writer.is_graph and writer.kind == "graph" and writer.learner
    assert torch.equal(t["y"], torch.relu(t["x"] @ t["w"]))


def test_views_and_copies_of_the_inputs_still_reach_the_graph(t):
    """Reshaping or copying an input is not computing with it: a graph fed a copy of x still read x."""
    def via_copies(x, w, y):
        relu_matmul().execute({1: x.clone().view(4, 8), 2: w.contiguous(), 3: y.view(4, 5)})

    assert graded(t, via_copies).is_graph


@pytest.mark.parametrize("answer, message", [
    (torch_only, "torch computed y (aten.mm, aten.relu): that work belongs inside your cuDNN graph"),
    (numpy_copied_in, "y was last written by torch (aten.copy_), not by a cuDNN graph"),
    (discarded, "torch computed y (aten.mm, aten.relu): that work belongs inside your cuDNN graph"),
    (copied_from_scratch, "y holds a copy of a cuDNN result (aten.copy_), not what your graph wrote into it: make y "
                          "the graph's output"),
    (torch_after, "torch changed y after your cuDNN graph wrote it (aten.mul_): let the graph's output stand, and "
                  "do that work inside the graph"),
    (torch_before, "torch computed part of y (aten.mul): that work belongs inside your cuDNN graph"),
    (another_input, "y does not depend on the x you were given: bind it in the graph's variant pack"),
    (graph_without_the_op, "the cuDNN graph that wrote y has no matmul node (its nodes: POINTWISE): that operation "
                           "belongs in the graph"),
], ids=lambda v: getattr(v, "__name__", "message"))
def test_every_other_writer_is_refused_in_one_line(t, answer, message):
    with pytest.raises(X.Wrong) as caught:
        graded(t, answer)
    assert str(caught.value) == message


def test_torchs_own_attention_kernel_is_named_as_such():
    """A cuDNN (or flash) kernel reached through torch is torch's work, named by its operator."""
    q = torch.randn(1, 2, 16, 8)
    o = torch.full_like(q, float("nan"))
    with tracing(**WATCH) as trace:
        trace.input("q", q)
        with trace.answer():
            o.copy_(F.scaled_dot_product_attention(q, q, q))
        with pytest.raises(X.Wrong) as caught:
            trace.require_graph_output(o, "o", inputs=("q",))
    message = str(caught.value)
    assert message.startswith("o comes from torch's own kernel (aten._scaled_dot_product") and message.endswith(
        "not from a cuDNN frontend graph you built: build the graph"), message


def test_the_checkers_own_work_is_not_judged_but_is_followed(t):
    """Poisoning, new input values and references are the checker's: never "torch computed", yet lineage follows
    them (the checker's new x still reaches the graph that reads it)."""
    graph = relu_matmul()
    with tracing(**WATCH) as trace:
        trace.input("x", t["x"])
        trace.input("w", t["w"])
        t["x"].copy_(torch.randn(4, 8) * 3)   # checker: new values into the same buffer
        t["y"].fill_(float("nan"))             # checker: poison
        with trace.answer():
            graph.execute({1: t["x"], 2: t["w"], 3: t["y"]})
        reference = torch.relu(t["x"] @ t["w"])   # checker: a torch reference, not the learner's compute
        assert trace.require_graph_output(t["y"], "y", inputs=("x", "w")).graph is graph
        assert trace.computed_by_torch(reference) == []


def test_nothing_written_by_the_learner_is_refused(t):
    with tracing(**WATCH) as trace:
        t["y"].fill_(float("nan"))   # the checker's poison is the last writer
        with pytest.raises(X.Wrong, match="^y was not written by a cuDNN graph: nothing your code ran wrote it"):
            trace.require_graph_output(t["y"], "y")


def test_by_names_the_graph_that_must_have_written(t):
    mine, other = relu_matmul(), relu_matmul()
    with tracing(**WATCH) as trace:
        with trace.answer():
            other.execute({1: t["x"], 2: t["w"], 3: t["y"]})
        with pytest.raises(X.Wrong, match="^y was written by another cuDNN graph, not the one you returned"):
            trace.require_graph_output(t["y"], "y", by=mine)


# ------------------------------------------------------------------ CUDA-graph capture and replay
def test_captured_work_takes_effect_at_each_replay_not_at_capture(t):
    graph, cuda_graph = relu_matmul(), StandInCUDAGraph()
    with tracing(**WATCH) as trace:
        trace.input("x", t["x"])
        t["y"].fill_(float("nan"))
        with trace.answer():
            cuda_graph.capture_begin()
            graph.execute({1: t["x"], 2: t["w"], 3: t["y"]})
            cuda_graph.capture_end()
        assert trace.runs[0].captured and trace.runs.writer(t["y"]) is None
        with pytest.raises(X.Wrong, match="^y was not written by a cuDNN graph"):
            trace.require_graph_output(t["y"], "y")     # captured, not yet replayed
        cuda_graph.replay()
        writer = trace.require_graph_output(t["y"], "y", inputs=("x",), by=graph, replay=True)
        assert writer.kind == "replay" and writer.origin.graph is graph
        assert [e.kind for e in trace.captured(cuda_graph)] == ["graph"]


def test_a_replay_of_captured_torch_ops_is_torchs_work(t):
    cuda_graph = StandInCUDAGraph()
    with tracing(**WATCH) as trace:
        with trace.answer():
            cuda_graph.capture_begin()
            t["y"].copy_(torch.relu(t["x"] @ t["w"]))
            cuda_graph.capture_end()
        cuda_graph.replay()   # the checker replays the learner's capture
        with pytest.raises(X.Wrong, match=r"^torch computed y \(aten.mm, aten.relu\)"):
            trace.require_graph_output(t["y"], "y")


def test_replay_true_refuses_a_direct_execute_and_false_a_replay(t):
    graph = relu_matmul()
    with tracing(**WATCH) as trace:
        with trace.answer():
            graph.execute({1: t["x"], 2: t["w"], 3: t["y"]})
        with pytest.raises(X.Wrong, match="^y was written by executing the cuDNN graph directly, not by a replay"):
            trace.require_graph_output(t["y"], "y", replay=True)


# ------------------------------------------------------------------ derived outputs (an allowed torch merge)
def test_a_derived_output_needs_its_graphs_and_only_the_allowed_torch_work():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    g1 = StandInGraph(lambda a: {"o": a * 2}, {"a": 1}, {"o": 2}, kind="SDPA")
    g2 = StandInGraph(lambda b: {"o": b * 3}, {"b": 1}, {"o": 2}, kind="SDPA")
    needs = [(lambda e, g=g: e.origin.graph is g, f"graph {n}'s result") for n, g in ((1, g1), (2, g2))]
    with tracing(**WATCH) as trace:
        trace.input("a", a)
        trace.input("b", b)
        o1, o2 = torch.empty(3, 4), torch.empty(3, 4)
        with trace.answer():
            g1.execute({1: a, 2: o1})
            g2.execute({1: b, 2: o2})
            merged = torch.exp(o1) * 0.5 + o2.sum(dim=0)
            only_one = o1 + 1
            by_matmul = o1 @ o2.T
            from_input = o1 + a.abs()
        trace.require_derived(merged, "o", needs=needs, allow=elementwise_merge, inputs_through_graphs=("a", "b"))
        with pytest.raises(X.Wrong, match="^o does not use graph 2's result"):
            trace.require_derived(only_one, "o", needs=needs, allow=elementwise_merge)
        with pytest.raises(X.Wrong, match=r"^torch computed part of o \(aten.mm\)"):
            trace.require_derived(by_matmul, "o", needs=needs, allow=elementwise_merge)
        with pytest.raises(X.Wrong, match=r"^torch computed with the inputs themselves \(aten.abs on a\)"):
            trace.require_derived(from_input, "o", needs=needs[:1], allow=elementwise_merge,
                                  inputs_through_graphs=("a", "b"))


# ------------------------------------------------------------------ builds, loads, restoring what was patched
def test_builds_validations_and_cache_loads_are_logged_and_every_method_comes_back():
    Graph, Cache = StandInBuilds, StandInCache   # build_plans builds plan 0: nested, one build (the outer)
    originals = {name: Graph.__dict__[name] for name in ("validate", "build_plans", "build_plan_at_index")}
    g, cache = Graph(lambda x: {"y": x}, {"x": 1}, {"y": 2}), Cache()
    with tracing(classes=(Graph,), cuda_graph_classes=(StandInCUDAGraph,), cache_classes=(Cache,)) as trace:
        g.validate()
        g.build_plans()
        mark = len(trace.builds)
        g.build_plan_at_index(3)
        cache.deserialize("{}")
    assert trace.validated() == [g] and trace.plan_builds() == [g, g] and trace.plan_builds(mark) == [g]
    assert trace.cache_loads == [(cache, "{}")]
    assert {name: Graph.__dict__[name] for name in originals} == originals
    assert "replay" in StandInCUDAGraph.__dict__ and StandInCUDAGraph.replay.__qualname__ == "StandInCUDAGraph.replay"


def test_the_dispatch_mode_ends_with_the_block_even_when_it_raises(t):
    with pytest.raises(RuntimeError):
        with tracing(**WATCH) as trace:
            raise RuntimeError("the answer failed")
    before = len(trace.events)
    torch.relu(t["x"])
    assert len(trace.events) == before
