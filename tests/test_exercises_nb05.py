"""Notebook 05's exercises: the checkers reject typical wrong answers with one line, accept the reference
solutions, and the notebook's skeletons report "not done".

On CPU the grading logic runs with PyTorch-made answers (``device="cpu"``); the GPU tests grade cuDNN
graphs, the reference solutions included."""
import math
from pathlib import Path

import pytest
import torch

import helpers as H
import grader as X
from grader import nb05
from tests.support import StandInGraph, refused, requires_gpu

ROOT = Path(__file__).resolve().parent.parent
KEYS = ("05.sliding_window", "05.merge_chunks")


# ------------------------------------------------------------------ PyTorch stand-ins for cuDNN (CPU)
def _torch_attention(q, k, v, scale, visible=None):
    """bf16 in, fp32 math, like a fused kernel: (O in q's dtype, log-sum-exp fp32 [B, H, S, 1])."""
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if visible is not None:
        s = s.masked_fill(~visible, float("-inf"))
    return (torch.softmax(s, -1) @ v.float()).to(q.dtype), torch.logsumexp(s, -1, keepdim=True)


def band_answer(window_of=lambda w: w, right_edge=True, scale=None, returns="a graph stand-in"):
    """A sliding-window answer computed with PyTorch; ``window_of`` maps the asked window to the one used."""
    def sliding_window_sdpa(q, k, v, o, window):
        visible = nb05.band(q.shape[2], window_of(window), right_edge=right_edge, device=q.device)
        o.copy_(_torch_attention(q, k, v, scale or 1 / math.sqrt(q.shape[-1]), visible)[0])
        return returns
    return sliding_window_sdpa


def grade_band(answer, **kw):
    return nb05.grade_sliding_window(answer, device="cpu", need_graph=False, **kw)


def merge_answer(combine_o="exact", combine_stats="exact", scale_of=lambda s, d: s, stats_dtype=torch.float32):
    """A chunk-merging answer computed with PyTorch, with one deliberate mistake or none."""
    def merge_chunks(q, chunks, attn_scale):
        scale = scale_of(attn_scale, q.shape[-1])
        parts = [_torch_attention(q, k, v, scale) for k, v in chunks]
        outs = [p[0].float() for p in parts]
        lses = torch.stack([p[1] for p in parts])
        lse = torch.logsumexp(lses, dim=0)
        o = {"exact": lambda: sum(torch.exp(l - lse) * oc for l, oc in zip(lses, outs)),
             "average": lambda: sum(outs) / len(outs),
             "log2": lambda: sum(w * oc for w, oc in zip(torch.softmax(lses * math.log(2), 0), outs)),
             "first": lambda: outs[0]}[combine_o]()
        stats = {"exact": lse, "max": lses.max(0).values, "sum": lses.sum(0), "log2": lse / math.log(2),
                 "first": lses[0]}[combine_stats]
        return o.to(q.dtype), stats.to(stats_dtype)
    return merge_chunks


# ------------------------------------------------------------------ 05.sliding_window on CPU
def test_sliding_window_accepts_the_right_band():
    assert grade_band(band_answer()).startswith("correct — windows 32 and 96")


@pytest.mark.parametrize("answer, message", [
    (band_answer(window_of=lambda w: None), "window=32: this is plain causal attention"),
    (band_answer(window_of=lambda w: None, right_edge=False), "window=32: no mask at all"),
    (band_answer(right_edge=False), "window=32: keys after the query are visible"),
    (band_answer(window_of=lambda w: w + 1), "window=32: off by one: query i sees 33 keys; it should see 32"),
    (band_answer(window_of=lambda w: w - 1), "window=32: off by one: query i sees 31 keys"),
    (band_answer(scale=1.0), "window=32: the mask is right but the scores were not scaled"),
    (band_answer(window_of=lambda w: 32), "window=96: this is plain causal|window=96: o differs"),
])
def test_sliding_window_names_the_mistake(answer, message):
    with pytest.raises(X.Wrong, match=message):
        grade_band(answer)


def test_sliding_window_wants_every_element_written_and_a_result():
    def writes_half(q, k, v, o, window):
        band_answer()(q, k, v, o, window)
        o[..., : o.shape[2] // 2, :] = float("nan")
        return "graph"

    with pytest.raises(X.Wrong, match=r"window=32: 16384 of 32768 elements of o were never written"):
        grade_band(writes_half)
    with pytest.raises(X.NotDone, match="returned nothing"):
        grade_band(band_answer(returns=None))


def test_sliding_window_wants_the_graph_with_an_sdpa_node():
    """Graph construction works on CPU (meta tensors): a graph without an sdpa node is refused."""
    pytest.importorskip("cudnn")
    from helpers.recipes import sdpa
    from helpers.recipes import new_graph

    def answer_with(graph_kind):
        def sliding_window_sdpa(q, k, v, o, window):
            band_answer()(q, k, v, o, window)
            meta = [t.to("meta") for t in (q, k, v)]
            if graph_kind == "sdpa":
                return sdpa.forward_graph(*meta, causal=True, attn_scale=0.125, generate_stats=False)[0]
            g = new_graph(q.dtype)
            io = H.GraphIO(g, dtype=q.dtype)
            g.matmul(io.input("a", meta[0]), io.input("b", meta[1].transpose(-1, -2)))
            return g
        return sliding_window_sdpa

    with pytest.raises(X.Wrong, match="has no sdpa node"):
        nb05.grade_sliding_window(answer_with("matmul"), device="cpu")
    with pytest.raises(X.Wrong, match="return the cuDNN graph you built and executed, not a str"):
        nb05.grade_sliding_window(band_answer(), device="cpu")


def test_an_unexecuted_sdpa_graph_next_to_a_torch_output_is_refused():
    """The loophole: return an SDPA graph that never ran, and fill o with torch. o is right; its writer is not."""
    pytest.importorskip("cudnn")
    from helpers.recipes import sdpa

    def sliding_window_sdpa(q, k, v, o, window):
        band_answer()(q, k, v, o, window)                       # torch writes o
        meta = [t.to("meta") for t in (q, k, v)]
        return sdpa.forward_graph(*meta, causal=True, attn_scale=0.125, generate_stats=False)[0]   # never executed

    with pytest.raises(X.Wrong) as caught:
        nb05.grade_sliding_window(sliding_window_sdpa, device="cpu")
    assert str(caught.value) == ("window=32: torch computed o (aten.bmm, aten._softmax, aten.sub): that work belongs "
                                 "inside your cuDNN graph")


def _stand_in_band(then=None):
    """A sliding-window answer whose graph is a ``StandInGraph`` of kind SDPA (torch inside), executed into o;
    ``then(o)`` runs after the graph (torch writing o again)."""
    def sliding_window_sdpa(q, k, v, o, window):
        def attend(q, k, v):
            visible = nb05.band(q.shape[2], window, device=q.device)
            return {"O": _torch_attention(q, k, v, 1 / math.sqrt(q.shape[-1]), visible)[0]}

        graph = StandInGraph(attend, {"q": 1, "k": 2, "v": 3}, {"O": 4}, kind="SDPA")
        graph.execute({1: q, 2: k, 3: v, 4: o})
        if then is not None:
            then(o)
        return graph
    return sliding_window_sdpa


def test_sliding_window_wants_o_as_the_returned_graph_left_it():
    watched = dict(device="cpu", classes=(StandInGraph,))
    assert nb05.grade_sliding_window(_stand_in_band(), **watched).startswith("correct — windows 32 and 96")
    with pytest.raises(X.Wrong, match=r"^window=32: torch changed o after your cuDNN graph wrote it \(aten.neg_\): "
                                      r"let the graph's output stand"):
        nb05.grade_sliding_window(_stand_in_band(then=lambda o: o.neg_()), **watched)


# ------------------------------------------------------------------ 05.merge_chunks on CPU
def test_merge_chunks_accepts_the_exact_merge():
    assert nb05.grade_merge_chunks(merge_answer(), device="cpu").startswith("correct — 2 chunks merged")


@pytest.mark.parametrize("answer, message", [
    (merge_answer(combine_o="average"), "you averaged the chunks' outputs"),
    (merge_answer(combine_o="log2"), "read Stats as base-2 logarithms"),
    (merge_answer(combine_o="first"), "first chunk's output alone"),
    (merge_answer(scale_of=lambda s, d: 1 / math.sqrt(d)), "scaled by 1/√D; use the attn_scale you are given"),
    (merge_answer(combine_stats="log2"), "Stats is in base-2 logarithms"),
    (merge_answer(combine_stats="max"), "the merged Stats is the largest chunk's"),
    (merge_answer(combine_stats="sum"), "you added the chunks' Stats"),
    (merge_answer(combine_stats="first"), "Stats is the first chunk's alone"),
    (merge_answer(stats_dtype=torch.bfloat16), "stats is torch.bfloat16; keep it float32"),
])
def test_merge_chunks_names_the_mistake(answer, message):
    with pytest.raises(X.Wrong, match=message):
        nb05.grade_merge_chunks(answer, device="cpu")


def _stand_in_chunks(stats=True):
    """A merge_chunks answer whose per-chunk forward is a ``StandInGraph`` of kind SDPA (torch inside), with or
    without a Stats output; the merge itself is torch's, as in the reference."""
    def merge_chunks(q, chunks, attn_scale):
        outs, lses = [], []
        for k, v in chunks:
            def forward(q, k, v):
                o, lse = _torch_attention(q, k, v, attn_scale)
                return {"O": o, "Stats": lse}

            o_c, lse_c = torch.empty_like(q), torch.empty(*q.shape[:3], 1)
            graph = StandInGraph(forward, {"q": 1, "k": 2, "v": 3}, {"O": 4, **({"Stats": 5} if stats else {})},
                                 kind="SDPA")
            if stats:
                graph.execute({1: q, 2: k, 3: v, 4: o_c, 5: lse_c})
            else:   # Stats from torch next to a graph that writes O only
                graph.execute({1: q, 2: k, 3: v, 4: o_c})
                lse_c = _torch_attention(q, k, v, attn_scale)[1]
            outs.append(o_c.float())
            lses.append(lse_c)
        lse = torch.logsumexp(torch.stack(lses), dim=0)
        return sum(torch.exp(l - lse) * o for l, o in zip(lses, outs)).to(q.dtype), lse
    return merge_chunks


def test_merge_chunks_wants_one_cudnn_forward_with_stats_per_chunk():
    """The loophole: torch over the concatenated chunks gives the right numbers with no cuDNN graph at all."""
    watched = dict(device="cpu", need_graphs=True, classes=(StandInGraph,))
    assert nb05.grade_merge_chunks(_stand_in_chunks(), **watched).startswith("correct — 2 chunks merged")

    def torch_over_all_chunks(q, chunks, attn_scale):
        k_all, v_all = (torch.cat([c[i] for c in chunks], dim=2) for i in (0, 1))
        o, lse = _torch_attention(q, k_all, v_all, attn_scale)
        return o, lse

    assert nb05.grade_merge_chunks(torch_over_all_chunks, device="cpu").startswith("correct")   # unwatched: it passed
    with pytest.raises(X.Wrong) as caught:
        nb05.grade_merge_chunks(torch_over_all_chunks, **watched)
    assert str(caught.value) == ("no cuDNN SDPA graph ran over chunk 1's keys and values: the merge must combine one "
                                 "cuDNN forward (generate_stats=True) per chunk")
    with pytest.raises(X.Wrong, match=r"^the cuDNN SDPA graph of chunk 1 wrote no Stats: build it with "
                                      r"generate_stats=True"):
        nb05.grade_merge_chunks(_stand_in_chunks(stats=False), **watched)


def test_merge_chunks_wants_o_and_stats_built_from_the_chunks_cudnn_results():
    """One forward per chunk runs, then its results are thrown away and torch attends over all the keys: every chunk
    went through cuDNN, yet o is torch's. And a merge by matmuls on the inputs is torch's attention too."""
    watched = dict(device="cpu", need_graphs=True, classes=(StandInGraph,))
    run_chunks = _stand_in_chunks()

    def thrown_away(q, chunks, attn_scale):
        run_chunks(q, chunks, attn_scale)
        k_all, v_all = (torch.cat([c[i] for c in chunks], dim=2) for i in (0, 1))
        return _torch_attention(q, k_all, v_all, attn_scale)

    with pytest.raises(X.Wrong, match=r"^torch computed o \(aten.bmm\): that work belongs inside your cuDNN graph"):
        nb05.grade_merge_chunks(thrown_away, **watched)

    def stats_from_torch(q, chunks, attn_scale):
        o, _ = run_chunks(q, chunks, attn_scale)
        k_all = torch.cat([k for k, _ in chunks], dim=2)
        return o, torch.logsumexp((q.float() @ k_all.float().transpose(-1, -2)) * attn_scale, -1, keepdim=True)

    with pytest.raises(X.Wrong, match=r"^torch computed stats \(aten.bmm"):
        nb05.grade_merge_chunks(stats_from_torch, **watched)


def test_merge_chunks_wants_a_pair_of_the_right_shapes():
    with pytest.raises(X.Wrong, match="return a pair"):
        nb05.grade_merge_chunks(lambda q, chunks, scale: q, device="cpu")
    with pytest.raises(X.Wrong, match=r"stats has shape \(1, 4, 128\), want \(1, 4, 128, 1\)"):
        nb05.grade_merge_chunks(lambda q, chunks, scale: (q, merge_answer()(q, chunks, scale)[1][..., 0]),
                                device="cpu")
    with pytest.raises(X.NotDone):
        nb05.grade_merge_chunks(lambda q, chunks, scale: None, device="cpu")


# ------------------------------------------------------------------ CPU: the graphs run again, the merge called again
def _in_a_thread(work):
    """Run ``work()`` in a worker thread and wait for it: torch there is not seen by the checker's tracer."""
    import threading

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


class _FirstRows(StandInGraph):
    """A stand-in graph whose outputs cover only the first rows of the buffers bound (as a cuDNN graph built for
    fewer rows writes only those, whatever buffer is bound)."""

    def execute(self, pack, workspace=None, handle=None):
        got = self.fn(**{name: pack[uid] for name, uid in self.inputs.items()})
        for name, uid in self.outputs.items():
            pack[uid][:, :, :got[name].shape[2]].copy_(got[name])


def _half_band_then_a_thread(q, k, v, o, window):
    """A stand-in SDPA graph writes the first half of the rows (through views at q's and o's addresses); a worker
    thread writes the rest with torch."""
    half = q.shape[2] // 2

    def attend(q, k, v):
        visible = nb05.band(q.shape[2], window, device=q.device)[:half]
        return {"O": _torch_attention(q[:, :, :half], k, v, 1 / math.sqrt(q.shape[-1]), visible)[0]}

    graph = _FirstRows(attend, {"q": 1, "k": 2, "v": 3}, {"O": 4}, kind="SDPA")
    graph.execute({1: q, 2: k, 3: v, 4: o[:, :, :half]})
    full = nb05.band(q.shape[2], window, device=q.device)
    _in_a_thread(lambda: o[:, :, half:].copy_(_torch_attention(q, k, v, 1 / math.sqrt(q.shape[-1]), full)[0][:, :, half:]))
    return graph


def test_the_sliding_window_graph_runs_again_alone_on_the_checkers_inputs():
    """Half the rows by the graph, half by a worker thread: o is right, its writer is the graph and nothing changed
    o after it. Run again alone on new q, k and v, the graph leaves half of o unwritten."""
    watched = dict(device="cpu", classes=(_FirstRows,))
    with pytest.raises(X.Wrong) as caught:
        nb05.grade_sliding_window(_half_band_then_a_thread, **watched)
    assert str(caught.value).startswith(
        "window=32: your graph, run again by the checker on new q, k and v (bound by UID, your code not called), "
        "does not compute o by itself: 16384 of 32768 elements of o were never written — work done after the graph "
        "ran (on the host, in another thread, by torch) does not count"), str(caught.value)


def _chunks_then(merge):
    """A merge_chunks answer: ``_stand_in_chunks``' graphs, then ``merge(q, chunks, attn_scale, o, stats)``."""
    run_chunks = _stand_in_chunks()

    def merge_chunks(q, chunks, attn_scale):
        o, stats = run_chunks(q, chunks, attn_scale)
        return merge(q, chunks, attn_scale, o, stats)
    return merge_chunks


def _from_a_thread(q, chunks, attn_scale):
    """Attention over all keys computed by torch in a worker thread (the tracer does not see it)."""
    made = []
    k_all, v_all = (torch.cat([c[i] for c in chunks], dim=2) for i in (0, 1))
    _in_a_thread(lambda: made.append(_torch_attention(q, k_all, v_all, attn_scale)))
    return made[0]


def _scaled_wrongly_then_patched(q, chunks, attn_scale):
    """Each chunk's graph uses 1/sqrt(D); a worker thread writes the right O and Stats over its outputs."""
    outs, lses = [], []
    for k, v in chunks:
        graph = StandInGraph(lambda q, k, v: dict(zip(("O", "Stats"), _torch_attention(q, k, v, q.shape[-1] ** -0.5))),
                             {"q": 1, "k": 2, "v": 3}, {"O": 4, "Stats": 5}, kind="SDPA")
        o_c, lse_c = torch.empty_like(q), torch.empty(*q.shape[:3], 1)
        graph.execute({1: q, 2: k, 3: v, 4: o_c, 5: lse_c})
        right = _torch_attention(q, k, v, attn_scale)
        _in_a_thread(lambda: (o_c.copy_(right[0]), lse_c.copy_(right[1])))
        outs.append(o_c.float())
        lses.append(lse_c)
    lse = torch.logsumexp(torch.stack(lses), dim=0)
    return sum(torch.exp(l - lse) * o for l, o in zip(lses, outs)).to(q.dtype), lse


def _kept_chunk_graphs():
    """Chunk graphs bound on the first call to its q, k and v, executed again at later calls (outputs rebound)."""
    kept = []

    def merge_chunks(q, chunks, attn_scale):
        if not kept:
            for k, v in chunks:
                graph = StandInGraph(lambda q, k, v: dict(zip(("O", "Stats"), _torch_attention(q, k, v, attn_scale))),
                                     {"q": 1, "k": 2, "v": 3}, {"O": 4, "Stats": 5}, kind="SDPA")
                kept.append((graph, q, k, v))
        outs, lses = [], []
        for graph, q0, k0, v0 in kept:
            o_c, lse_c = torch.empty_like(q), torch.empty(*q.shape[:3], 1)
            graph.execute({1: q0, 2: k0, 3: v0, 4: o_c, 5: lse_c})
            outs.append(o_c.float())
            lses.append(lse_c)
        lse = torch.logsumexp(torch.stack(lses), dim=0)
        return sum(torch.exp(l - lse) * o for l, o in zip(lses, outs)).to(q.dtype), lse
    return merge_chunks


@pytest.mark.parametrize("answer, message", [
    (_chunks_then(lambda q, chunks, s, o, stats: (lambda t: (o * 0 + t[0], stats * 0 + t[1]))(
        _from_a_thread(q, chunks, s))),
     "your o did not follow the chunks' cuDNN results: when the checker changed the O and Stats your chunk graphs "
     "wrote, o did not change with them"),
    (_chunks_then(lambda q, chunks, s, o, stats: (lambda t: ((o.float() + (t[0].float() - o.float())).to(q.dtype),
                                                             stats))(_from_a_thread(q, chunks, s))),
     "your o did not follow the chunks' cuDNN results"),
    (_scaled_wrongly_then_patched,
     "chunk 1's cuDNN graph, run again by the checker on new q, k and v (bound by UID, your code not called), does "
     "not compute O by itself: O differs from its attention"),
    (_kept_chunk_graphs(), "called again with a new q and new chunks, your cuDNN SDPA graphs read other k and v "
                           "than this call's: they still read an earlier call's tensors"),
], ids=["zero_times_the_merge_plus_a_thread", "a_thread_correction_added", "chunk_graph_patched_by_a_thread",
        "chunk_graphs_kept_from_the_first_call"])
def test_merge_chunks_grades_the_graphs_alone_and_a_merge_that_follows_them(answer, message):
    """Each answer gives the right o and stats on the first call, every chunk through a (stand-in) cuDNN graph with
    Stats, and only element-wise torch that the tracer sees: the graphs run again alone, and a second call in which
    the checker swaps its own values into the graphs' outputs, show what the tracer could not."""
    watched = dict(device="cpu", need_graphs=True, classes=(StandInGraph,))
    with pytest.raises(X.Wrong) as caught:
        nb05.grade_merge_chunks(answer, **watched)
    assert str(caught.value).startswith(message), str(caught.value)


# ------------------------------------------------------------------ the notebook's cells


def test_solutions_load():
    assert callable(X.solution("05.sliding_window")) and callable(X.solution("05.merge_chunks"))


# ------------------------------------------------------------------ on the GPU: cuDNN graphs
def _cudnn_band(left_bound_of):
    """A cuDNN answer whose band's left bound is ``left_bound_of(window)`` (None: plain causal)."""
    def sliding_window_sdpa(q, k, v, o, window):
        cudnn = H.load_cudnn()
        g = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                          compute_data_type=torch.float32, handle=H.get_handle())
        io = H.GraphIO(g, dtype=q.dtype)
        left = left_bound_of(window)
        extra = {} if left is None else {"diagonal_band_left_bound": left}
        out, _ = g.sdpa(io.input("q", q), io.input("k", k), io.input("v", v), attn_scale=q.shape[-1] ** -0.5,
                        generate_stats=False, diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
                        diagonal_band_right_bound=0, **extra)
        io.output("o", out, o)
        H.build(g)
        g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
        return g
    return sliding_window_sdpa


@requires_gpu
@pytest.mark.parametrize("left_bound_of, message", [
    (lambda w: None, "window=32: this is plain causal attention"),
    (lambda w: w + 1, "window=32: off by one: query i sees 33 keys"),
    (lambda w: 32, "window=96: "),
])
def test_sliding_window_rejects_wrong_cudnn_bands(left_bound_of, message):
    got = refused("05.sliding_window", _cudnn_band(left_bound_of))
    assert got.startswith(message), got


@requires_gpu
def test_merge_chunks_rejects_an_average_of_cudnn_outputs():
    solution = X.solution("05.merge_chunks")

    def merge_chunks(q, chunks, attn_scale):
        parts = [solution(q, [chunk], attn_scale) for chunk in chunks]   # each chunk alone, via cuDNN
        return sum(o.float() for o, _ in parts).div(len(parts)).to(q.dtype), parts[0][1]

    got = refused("05.merge_chunks", merge_chunks)
    assert "averaged the chunks' outputs" in got, got


@requires_gpu
def test_sliding_window_rejects_an_unexecuted_graph_next_to_torch_sdpa():
    """The loophole of issue 25: the graph is built and returned, never executed; torch's SDPA fills o."""
    import torch.nn.functional as F

    def sliding_window_sdpa(q, k, v, o, window):
        cudnn = H.load_cudnn()
        g = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                          compute_data_type=torch.float32, handle=H.get_handle())
        io = H.GraphIO(g, dtype=q.dtype)
        out, _ = g.sdpa(io.input("q", q), io.input("k", k), io.input("v", v), attn_scale=q.shape[-1] ** -0.5,
                        generate_stats=False, diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
                        diagonal_band_right_bound=0, diagonal_band_left_bound=window)
        io.output("o", out, o)
        H.build(g)                                                          # built, never executed
        o.copy_(F.scaled_dot_product_attention(q, k, v, attn_mask=nb05.band(q.shape[2], window, device=q.device)))
        return g

    got = refused("05.sliding_window", sliding_window_sdpa)
    assert got.startswith(("window=32: o comes from torch's own kernel (aten._scaled_dot_product",
                           "window=32: torch computed o (aten.")), got


def _band_graph_into(q, k, v, out, window):
    """The reference band graph, executed into ``out``; returns the graph."""
    return X.solution("05.sliding_window")(q, k, v, out, window)


@requires_gpu
@pytest.mark.parametrize("then, message", [
    ("torch", ("window=32: o comes from torch's own kernel (aten._scaled_dot_product", "window=32: torch computed o")),
    ("copy", ("window=32: o holds a copy of a cuDNN result (aten.copy_)",)),
], ids=["graph_into_scratch_then_torch", "graph_into_scratch_then_copied"])
def test_sliding_window_rejects_a_cudnn_result_thrown_away_or_copied(then, message):
    import torch.nn.functional as F

    def sliding_window_sdpa(q, k, v, o, window):
        scratch = torch.empty_like(o)
        g = _band_graph_into(q, k, v, scratch, window)
        if then == "torch":
            o.copy_(F.scaled_dot_product_attention(q, k, v, attn_mask=nb05.band(q.shape[2], window, device=q.device)))
        else:
            o.copy_(scratch)
        return g

    got = refused("05.sliding_window", sliding_window_sdpa)
    assert got.startswith(message), got


def _torch_over_all_keys(q, chunks, attn_scale):
    """torch's SDPA over the concatenated chunks, and the log-sum-exp of its scores."""
    import torch.nn.functional as F

    k_all, v_all = (torch.cat([c[i] for c in chunks], dim=2) for i in (0, 1))
    o = F.scaled_dot_product_attention(q, k_all, v_all, scale=attn_scale)
    scores = (q.float() @ k_all.float().transpose(-1, -2)) * attn_scale
    return o, torch.logsumexp(scores, dim=-1, keepdim=True)


@requires_gpu
def test_merge_chunks_rejects_cudnn_chunks_thrown_away_for_torch_attention():
    """The wrong answer of issue 31: one cuDNN forward per chunk runs, its results are dropped, and o comes from
    torch's attention over all keys."""
    def merge_chunks(q, chunks, attn_scale):
        X.solution("05.merge_chunks")(q, chunks, attn_scale)        # every chunk through cuDNN, then thrown away
        return _torch_over_all_keys(q, chunks, attn_scale)

    got = refused("05.merge_chunks", merge_chunks)
    assert got.startswith(("o comes from torch's own kernel (aten._scaled_dot_product",
                           "torch computed o (aten.")), got


@requires_gpu
def test_merge_chunks_rejects_one_cudnn_forward_over_all_keys():
    """The point missed: one cuDNN SDPA over the concatenated keys gives the right o and Stats, with no merge."""
    def merge_chunks(q, chunks, attn_scale):
        k_all, v_all = (torch.cat([c[i] for c in chunks], dim=2) for i in (0, 1))
        return X.solution("05.merge_chunks")(q, [(k_all, v_all)], attn_scale)

    got = refused("05.merge_chunks", merge_chunks)
    assert got.startswith("no cuDNN SDPA graph ran over chunk 1's keys and values"), got


@requires_gpu
def test_merge_chunks_rejects_torch_over_the_concatenated_chunks():
    got = refused("05.merge_chunks", _torch_over_all_keys)
    assert got.startswith("no cuDNN SDPA graph ran over chunk 1's keys and values"), got


# ---- work the tracer does not see (numpy, a worker thread, a merge times zero), graphs kept from the first call
def _band_graph(q, k, v, out, window, *, left=True):
    """The band graph (``left``: the window's left bound; else plain causal) over q's rows, executed into out."""
    cudnn = H.load_cudnn()
    g = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32, compute_data_type=torch.float32,
                      handle=H.get_handle())
    io = H.GraphIO(g, dtype=q.dtype)
    extra = {"diagonal_band_left_bound": window} if left else {}
    o_t, _ = g.sdpa(io.input("q", q), io.input("k", k), io.input("v", v), attn_scale=q.shape[-1] ** -0.5,
                    generate_stats=False, diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,
                    diagonal_band_right_bound=0, **extra)
    io.output("o", o_t, out)
    H.build(g)
    g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())
    return g


def _band_by_torch(q, k, v, window):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(q, k, v, attn_mask=nb05.band(q.shape[2], window, device=q.device))


def half_the_rows_by_the_graph_half_by_a_thread(q, k, v, o, window):
    """The graph attends the first half of the queries (views at q's and o's own addresses); a worker thread writes
    the other half with torch."""
    half = q.shape[2] // 2
    g = _band_graph(q[:, :, :half], k, v, o[:, :, :half], window)
    _in_a_thread(lambda: o[:, :, half:].copy_(_band_by_torch(q, k, v, window)[:, :, half:]))
    return g


def causal_graph_overwritten_by_a_thread(q, k, v, o, window):
    g = _band_graph(q, k, v, o, window, left=False)
    _in_a_thread(lambda: o.copy_(_band_by_torch(q, k, v, window)))
    return g


def _numpy_attention(q, k, v, scale):
    """Attention and its log-sum-exp in numpy on the host (float64)."""
    import numpy as np

    q, k, v = (t.detach().double().cpu().numpy() for t in (q, k, v))
    scores = np.matmul(q, k.swapaxes(-1, -2)) * scale
    top = scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores - top)
    total = weights.sum(axis=-1, keepdims=True)
    return np.matmul(weights / total, v), np.log(total) + top


def merge_times_zero_plus_numpy(q, chunks, attn_scale):
    """The chunks through cuDNN and merged, times zero, plus attention over all keys computed by numpy."""
    o, stats = X.solution("05.merge_chunks")(q, chunks, attn_scale)
    k_all, v_all = (torch.cat([c[i] for c in chunks], dim=2) for i in (0, 1))
    full, lse = _numpy_attention(q, k_all, v_all, attn_scale)
    return (o.float() * 0 + torch.from_numpy(full).float().to(q.device)).to(q.dtype), \
        stats * 0 + torch.from_numpy(lse).float().to(q.device)


def average_corrected_by_a_thread(q, chunks, attn_scale):
    """The chunks' outputs averaged (the wrong merge), plus what a worker thread computed with torch over all keys
    to make up the difference."""
    parts = [X.solution("05.merge_chunks")(q, [chunk], attn_scale) for chunk in chunks]
    average = sum(o.float() for o, _ in parts) / len(parts)
    stats = torch.logsumexp(torch.stack([s for _, s in parts]), dim=0)
    made = []
    _in_a_thread(lambda: made.append(_torch_over_all_keys(q, chunks, attn_scale)[0].float() - average))
    return (average + made[0]).to(q.dtype), stats


def chunk_graphs_scaled_wrongly_patched_by_a_thread(q, chunks, attn_scale):
    """Each chunk's graph scales by 1/sqrt(D); a worker thread writes the right O and Stats over its outputs."""
    cudnn = H.load_cudnn()
    outs, lses = [], []
    for k, v in chunks:
        g = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                          compute_data_type=torch.float32, handle=H.get_handle())
        io = H.GraphIO(g, dtype=q.dtype)
        o_t, lse_t = g.sdpa(io.input("q", q), io.input("k", k), io.input("v", v), attn_scale=q.shape[-1] ** -0.5,
                            generate_stats=True)
        o_c, lse_c = torch.empty_like(q), torch.empty(*q.shape[:3], 1, device=q.device)
        io.output("o", o_t, o_c)
        io.output("stats", lse_t, lse_c)
        H.build(g)
        g.execute(io.pack(), H.workspace_for(g), handle=H.get_handle())

        def patch(k=k, v=v, o_c=o_c, lse_c=lse_c):
            right, lse = _torch_over_all_keys(q, [(k, v)], attn_scale)
            o_c.copy_(right)
            lse_c.copy_(lse)
        _in_a_thread(patch)
        outs.append(o_c.float())
        lses.append(lse_c)
    lse = torch.logsumexp(torch.stack(lses), dim=0)
    return sum(torch.exp(l - lse) * o for l, o in zip(lses, outs)).to(q.dtype), lse


def _kept_chunk_graphs_gpu():
    kept = []

    def chunk_graphs_kept_from_the_first_call(q, chunks, attn_scale):
        """One graph per chunk, built on the first call's q, k and v and executed again at later calls (outputs
        new)."""
        cudnn = H.load_cudnn()
        if not kept:
            for k, v in chunks:
                g = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                                  compute_data_type=torch.float32, handle=H.get_handle())
                io = H.GraphIO(g, dtype=q.dtype)
                o_t, lse_t = g.sdpa(io.input("q", q), io.input("k", k), io.input("v", v), attn_scale=attn_scale,
                                    generate_stats=True)
                io.output("o", o_t, torch.empty_like(q))
                io.output("stats", lse_t, torch.empty(*q.shape[:3], 1, device=q.device))
                H.build(g)
                kept.append((g, io))
        outs, lses = [], []
        for g, io in kept:
            o_c, lse_c = torch.empty_like(q), torch.empty(*q.shape[:3], 1, device=q.device)
            g.execute(io.pack(o=o_c, stats=lse_c), H.workspace_for(g), handle=H.get_handle())
            outs.append(o_c.float())
            lses.append(lse_c)
        lse = torch.logsumexp(torch.stack(lses), dim=0)
        return sum(torch.exp(l - lse) * o for l, o in zip(lses, outs)).to(q.dtype), lse
    return chunk_graphs_kept_from_the_first_call


SLIDING_AGAIN = "window=32: your graph, run again by the checker on new q, k and v (bound by UID, your code not " \
                "called), does not compute o by itself: "
HIDDEN = [
    ("05.sliding_window", half_the_rows_by_the_graph_half_by_a_thread,
     SLIDING_AGAIN + "16384 of 32768 elements of o were never written"),
    ("05.sliding_window", causal_graph_overwritten_by_a_thread, "window=32: o changed after your cuDNN graph wrote it"),
    ("05.merge_chunks", merge_times_zero_plus_numpy, "your o did not follow the chunks' cuDNN results"),
    ("05.merge_chunks", average_corrected_by_a_thread, "your o did not follow the chunks' cuDNN results"),
    ("05.merge_chunks", chunk_graphs_scaled_wrongly_patched_by_a_thread,
     "chunk 1's cuDNN graph, run again by the checker on new q, k and v (bound by UID, your code not called), does "
     "not compute O by itself: O differs from its attention"),
    ("05.merge_chunks", _kept_chunk_graphs_gpu(),
     "called again with a new q and new chunks, your cuDNN SDPA graphs read other k and v than this call's"),
]


@requires_gpu
@pytest.mark.parametrize("key, answer, message", HIDDEN, ids=[c[1].__name__ for c in HIDDEN])
def test_work_the_tracer_cannot_see_and_graphs_kept_from_the_first_call_fail(key, answer, message):
    """Right numbers on the first call, every output written last by (or merged from) cuDNN graphs: only running the
    graphs again alone, and calling the merge again with the checker's values swapped into the graphs' outputs,
    shows the rest. (Where cuDNN refuses a graph for half the queries, the learner's own exception, in one line.)"""
    got = refused(key, answer)
    assert got.startswith((message, "your code raised") if "half_the_rows" in answer.__name__ else message), got


# ------------------------------------------------------------------ the verdict: H.check's, on CPU
def test_a_few_wrong_rows_fail_although_the_norm_passes():
    """The checker compares element by element too: one wrong query row hides in the norm, not here."""
    def one_row_off(q, k, v, o, window):
        band_answer()(q, k, v, o, window)
        o[0, 0, 200] = -o[0, 0, 200]
        return "graph"

    with pytest.raises(X.Wrong, match=r"window=32: o differs from sliding-window attention \(rel err .*elements "
                                      r"outside the element-wise bound"):
        grade_band(one_row_off)


def test_the_tolerance_is_the_outputs_dtype():
    """o returned in float32 is refused by name (its tolerance would be fp32's); stats, float32, is judged by
    fp32's tolerance: Stats off by 1 % (inside bf16's tolerance) fail."""
    def fp32_o(q, chunks, scale):
        o, stats = merge_answer()(q, chunks, scale)
        return o.float(), stats

    with pytest.raises(X.Wrong, match=r"o is torch.float32; return it in q's dtype \(torch.bfloat16\)"):
        nb05.grade_merge_chunks(fp32_o, device="cpu")

    def stats_one_percent_off(q, chunks, scale):
        o, stats = merge_answer()(q, chunks, scale)
        return o, stats * 1.01

    with pytest.raises(X.Wrong, match=r"stats differs from the log-sum-exp over all keys \(rel err 1.0e-02, "
                                      r"tolerance 0.002"):
        nb05.grade_merge_chunks(stats_one_percent_off, device="cpu")


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) torch computing the right numbers, which each checker refuses on the CPU
def _torch_window(q, k, v, o, window):
    """torch's SDPA with the band as a boolean mask, next to an SDPA graph that never runs."""
    from helpers.recipes import sdpa

    s = q.shape[2]
    ones = torch.ones(s, s, dtype=torch.bool)
    o.copy_(torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=ones.tril() & ~ones.tril(-window)))
    meta = torch.empty(1, 2, 256, 64, dtype=torch.bfloat16, device="meta")   # constructed, never executed
    return sdpa.forward_graph(meta, meta, meta, causal=True, attn_scale=0.125, generate_stats=False)[0]


def _torch_merge(q, chunks, scale):
    k = torch.cat([k for k, _ in chunks], dim=2)
    v = torch.cat([v for _, v in chunks], dim=2)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    return (torch.softmax(scores, -1) @ v.float()).to(q.dtype), torch.logsumexp(scores, -1, keepdim=True)


TORCH_ANSWERS = {"05.sliding_window": _torch_window, "05.merge_chunks": _torch_merge}
