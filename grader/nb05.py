"""Checkers for notebook 05 (scaled dot-product attention).

``05.sliding_window``: a causal SDPA graph whose band keeps only the last ``window`` keys.
``05.merge_chunks``: attention over K/V that arrive in chunks, one forward with Stats per chunk, merged.

Each checker calls the answer on its own small inputs, compares with PyTorch in float64 as ``H.check`` does, and
names the usual mistake when the answer matches one instead. The outputs must come from cuDNN: in
``05.sliding_window`` the returned graph wrote ``o`` from q, k and v, nothing after it; in ``05.merge_chunks`` each
chunk went through an SDPA graph that writes Stats, and ``o`` and ``stats`` are built from those graphs' results by
element-wise torch work and reductions alone. The grading functions take a ``device``, so the tests exercise the
diagnoses on the CPU with torch-made answers.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from helpers.checking import poison_
from . import NotDone, Wrong, agrees, checker, grading_device
from .graph_runs import node_kinds, recording, rerun, settle
from .provenance import elementwise_merge, tracing

SLIDING_SHAPE = (1, 2, 256, 64)   # B, H, S, D: most rows lie well past the window
SLIDING_WINDOWS = (32, 96)        # two sizes: an answer that ignores its argument fails one of them
MERGE_SHAPE = (1, 4, 128, 64)     # q: B, H, S_q, D
MERGE_CHUNK_LENS = (64, 192)      # keys per chunk: unequal, so the chunks' weights are far from equal
MERGE_KEY_GAIN = (1.0, 1.5)       # and the second chunk's keys score higher: the weights vary row by row
MERGE_SCALE = 0.7                 # attn_scale = 0.7/sqrt(D): an answer that assumes 1/sqrt(D) fails


# ------------------------------------------------------------------ shared
def _randn(shape, seed: int, device, dtype):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(device=device, dtype=dtype)


def _attention(q, k, v, scale: float, visible=None):
    """Attention in float64 with PyTorch's math SDPA (``visible``: [S_q, S_kv] bool, True = seen), and the
    log-sum-exp of the scaled, masked scores per query row, [B, H, S_q, 1]."""
    q, k, v = q.double(), k.double(), v.double()
    with sdpa_kernel(SDPBackend.MATH):
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=visible, scale=scale)
    scores = (q @ k.transpose(-1, -2)) * scale
    if visible is not None:
        scores = scores.masked_fill(~visible, float("-inf"))
    return o, torch.logsumexp(scores, dim=-1, keepdim=True)


def _off(result, what: str) -> str:
    """``what`` differs: rel err and tolerance, and the elements off where the norm alone would have passed."""
    elements = f"; {result.elements}" if result.elements is not None and result.elements.n_bad else ""
    return f"{what} (rel err {result.rel_err:.1e}, tolerance {result.tol:g}{elements})"


def _first_match(out, candidates):
    """The message of the first ``(reference, message)`` that ``out`` matches."""
    for ref, message in candidates:
        if agrees(out, ref).ok:
            return message
    return None


def _unwritten(t) -> int:
    return int(torch.isnan(t.detach().float()).sum().item()) if t.dtype.is_floating_point else 0


def _sync(device) -> None:
    if str(device).startswith("cuda"):
        settle()   # the caller's stream, not the device


AGAIN_SEED = 900   # the checker's own q, k, v for running an answer's graph again
CALL_SEED = 800    # 05.merge_chunks' second call: new values at new addresses


def again_line(what: str, changed: str, out: str, why: str) -> str:
    """The one line for a graph that, run again by the checker on new inputs, does not compute ``out``."""
    return (f"{what}, run again by the checker on new {changed} (bound by UID, your code not called), does not "
            f"compute {out} by itself: {why}")


def _rerun_why(done) -> str:
    if done.foreign:
        return "it reads tensors you made yourself, which did not change with q, k and v"
    return ("work done after the graph ran (on the host, in another thread, by torch) does not count: let the graph "
            "compute all of it")


# ------------------------------------------------------------------ 05.sliding_window
def band(s: int, window: int | None, *, right_edge: bool = True, device="cpu"):
    """[s, s] bool: key j visible to query i when i - window < j (no left edge if window is None) and,
    with ``right_edge``, j <= i."""
    i = torch.arange(s, device=device).view(-1, 1)
    j = torch.arange(s, device=device).view(1, -1)
    visible = torch.ones(s, s, dtype=torch.bool, device=device)
    if window is not None:
        visible &= j > i - window
    if right_edge:
        visible &= j <= i
    return visible


def _require_sdpa_graph(graph) -> None:
    nodes = getattr(graph, "nodes", None)
    if nodes is None:
        raise Wrong(f"return the cuDNN graph you built and executed, not a {type(graph).__name__}")
    kinds = node_kinds(graph)
    if "SDPA" not in kinds:
        raise Wrong(f"the graph you returned has no sdpa node (its nodes: {kinds or 'none'})")


def _sliding_window_mistake(o, q, k, v, scale, window, device) -> str | None:
    s = q.shape[2]
    candidates = [
        (_attention(q, k, v, scale, band(s, None, device=device))[0],
         f"this is plain causal attention: query i still sees every key j ≤ i; keep only the last {window} "
         "(the band's left bound)"),
        (_attention(q, k, v, scale)[0], "no mask at all: every query sees every key"),
        (_attention(q, k, v, scale, band(s, window, right_edge=False, device=device))[0],
         "keys after the query are visible: close the band at the diagonal (right bound 0)"),
        (_attention(q, k, v, scale, band(s, window + 1, device=device))[0],
         f"off by one: query i sees {window + 1} keys; it should see {window}, itself included "
         f"(i − {window} < j ≤ i)"),
        (_attention(q, k, v, scale, band(s, window - 1, device=device))[0],
         f"off by one: query i sees {window - 1} keys; it should see {window}, itself included "
         f"(i − {window} < j ≤ i)"),
        (_attention(q, k, v, 1.0, band(s, window, device=device))[0],
         "the mask is right but the scores were not scaled by 1/√D (attn_scale)"),
    ]
    return _first_match(o, candidates)


def band_again(runs, given: dict, o, window: int, n: int, device) -> None:
    """Run the graph that wrote ``o`` again (``graph_runs.rerun``: the answer's code out of the loop) on the checker's
    own q, k and v, and require sliding-window attention of them, every element written (``Wrong`` otherwise)."""
    own = {name: _randn(SLIDING_SHAPE, AGAIN_SEED + 10 * n + i, device, torch.bfloat16) for i, name in enumerate("qkv")}
    done = rerun(runs, given, dict(o=o), fresh=lambda name, old: own[name])
    _sync(device)
    got = done.outputs["o"]
    missing = _unwritten(got)
    where = f"window={window}: "
    if missing:
        raise Wrong(where + again_line("your graph", "q, k and v", "o", f"{missing} of {got.numel()} elements of o "
                                       f"were never written — {_rerun_why(done)}"))
    q, k, v = (done.inputs[name] for name in "qkv")
    result = agrees(got, _attention(q, k, v, 1 / math.sqrt(q.shape[-1]), band(q.shape[2], window, device=device))[0])
    if not result.ok:
        mistake = _sliding_window_mistake(got, q, k, v, 1 / math.sqrt(q.shape[-1]), window, device)
        raise Wrong(where + again_line("your graph", "q, k and v", "o", f"{mistake or _off(result, 'o differs')} — "
                                       f"{_rerun_why(done)}"))


def grade_sliding_window(answer, *, device="cuda", need_graph: bool = True, classes: tuple | None = None) -> str:
    """Run ``answer(q, k, v, o, window)`` at each of ``SLIDING_WINDOWS`` on fresh inputs with a NaN-poisoned
    ``o``; the result must match sliding-window attention (scale 1/sqrt(D)), and (``need_graph``) the
    returned object must be a graph with an sdpa node, executed with ``o`` as its output, and nothing may have
    written ``o`` after it (``classes``: the graph classes to watch, as ``graph_runs.recording`` takes them)."""
    b, h, s, d = SLIDING_SHAPE
    scale = 1 / math.sqrt(d)
    worst = 0.0
    for n, window in enumerate(SLIDING_WINDOWS):
        q, k, v = (_randn(SLIDING_SHAPE, 500 + 10 * n + t, device, torch.bfloat16) for t in range(3))
        o = poison_(torch.empty_like(q))
        with tracing(dict(q=q, k=k, v=v), snapshot=True, classes=classes) as trace, trace.answer():
            graph = answer(q, k, v, o, window)
        _sync(device)
        if graph is None or graph is Ellipsis:
            raise NotDone("not done yet — sliding_window_sdpa returned nothing; return the graph it built")
        if need_graph:
            _require_sdpa_graph(graph)
        where = f"window={window}: "
        missing = _unwritten(o)
        if missing:
            raise Wrong(where + f"{missing} of {o.numel()} elements of o were never written; execute the graph "
                        "with o as its output buffer")
        if need_graph:
            try:
                trace.require_graph_output(o, "o", kinds=("SDPA",), inputs=("q", "k", "v"), by=graph,
                                           how="execute the graph you return, with o as its output")
                trace.runs.require_written(o, "o", by=graph)
            except Wrong as exc:
                raise Wrong(where + str(exc)) from None
        result = agrees(o, _attention(q, k, v, scale, band(s, window, device=device))[0])
        if not result.ok:
            mistake = _sliding_window_mistake(o, q, k, v, scale, window, device)
            raise Wrong(where + (mistake or _off(result, "o differs from sliding-window attention")))
        worst = max(worst, result.rel_err)
        if need_graph:
            band_again(trace.runs.feeding(o), dict(q=q, k=k, v=v), o, window, n, device)
    return (f"correct — windows {' and '.join(map(str, SLIDING_WINDOWS))} match PyTorch with an explicit mask "
            f"(worst rel err {worst:.1e})")


@checker("05.sliding_window", needs=("sdpa",))
def check_sliding_window(answer):
    return grade_sliding_window(answer, device=grading_device())


# ------------------------------------------------------------------ 05.merge_chunks
def merge_inputs(device, seed: int = 700):
    """q, the list of (k, v) chunks, and attn_scale the checker uses (``seed``: another draw, new buffers)."""
    b, h, s, d = MERGE_SHAPE
    q = _randn(MERGE_SHAPE, seed, device, torch.bfloat16)
    chunks = []
    for c, (length, gain) in enumerate(zip(MERGE_CHUNK_LENS, MERGE_KEY_GAIN)):
        k = (_randn((b, h, length, d), seed + 1 + 2 * c, device, torch.float32) * gain).to(torch.bfloat16)
        chunks.append((k, _randn((b, h, length, d), seed + 2 + 2 * c, device, torch.bfloat16)))
    return q, chunks, MERGE_SCALE / math.sqrt(d)


def _merge_o_mistake(o, q, chunks, scale) -> str | None:
    parts = [_attention(q, k, v, scale) for k, v in chunks]
    outs = [p[0] for p in parts]
    lses = torch.stack([p[1] for p in parts])
    as_log2 = torch.softmax(lses * math.log(2), dim=0)          # weights 2**L_c / sum_c 2**L_c
    d = q.shape[-1]
    k_all = torch.cat([k for k, _ in chunks], dim=2)
    v_all = torch.cat([v for _, v in chunks], dim=2)
    candidates = [
        (sum(outs) / len(outs), "you averaged the chunks' outputs; a chunk's share depends on its Stats"),
        (sum(w * o_c for w, o_c in zip(as_log2, outs)),
         "the weights read Stats as base-2 logarithms; cuDNN's Stats are natural logs (use exp, not 2**)"),
        (outs[0], "o is the first chunk's output alone; merge every chunk"),
        (outs[-1], "o is the last chunk's output alone; merge every chunk"),
        (_attention(q, k_all, v_all, 1 / math.sqrt(d))[0],
         f"the scores were scaled by 1/√D; use the attn_scale you are given ({scale:.4f})"),
    ]
    return _first_match(o, candidates)


def _merge_stats_mistake(stats, q, chunks, scale, want) -> str | None:
    lses = torch.stack([_attention(q, k, v, scale)[1] for k, v in chunks])
    candidates = [
        (want / math.log(2), "Stats is in base-2 logarithms; keep cuDNN's natural-log convention"),
        (lses.max(dim=0).values, "the merged Stats is the largest chunk's; it is log(Σ exp(L_c)) over the chunks"),
        (lses.sum(dim=0), "you added the chunks' Stats; the merged value is log(Σ exp(L_c))"),
        (lses.mean(dim=0), "you averaged the chunks' Stats; the merged value is log(Σ exp(L_c))"),
        (lses[0], "Stats is the first chunk's alone; it must cover every key"),
    ]
    return _first_match(stats, candidates)


def chunk_graphs_ran(runs, chunks) -> None:
    """``Wrong`` unless, for every chunk, a recorded execute of a graph with an SDPA node bound that chunk's k
    and v and had an output for the SDPA's Stats: one cuDNN forward with Stats per chunk."""
    for c, (k, v) in enumerate(chunks, 1):
        sdpa_runs = [run for run in runs if "SDPA" in run.node_kinds() and run.reads(k) and run.reads(v)]
        if not sdpa_runs:
            raise Wrong(f"no cuDNN SDPA graph ran over chunk {c}'s keys and values: the merge must combine one "
                        "cuDNN forward (generate_stats=True) per chunk")
        if not any(_writes_stats(run) for run in sdpa_runs):
            raise Wrong(f"the cuDNN SDPA graph of chunk {c} wrote no Stats: build it with generate_stats=True "
                        "and make Stats an output — the merge needs each chunk's Stats")


def merged_from_chunks(trace, outputs: dict, chunks) -> None:
    """``Wrong`` in one line unless each tensor in ``outputs`` (name -> tensor) is built from every chunk's cuDNN
    SDPA results by element-wise torch work and reductions alone, torch never computing with q, k or v itself."""
    needs = [(lambda e, k=k, v=v: "SDPA" in e.node_kinds() and e.origin.run.reads(k) and e.origin.run.reads(v),
              f"chunk {c}'s cuDNN SDPA results: merge the o and Stats each chunk's graph wrote")
             for c, (k, v) in enumerate(chunks, 1)]
    for name, tensor in outputs.items():
        trace.require_derived(tensor, name, needs=needs, allow=elementwise_merge,
                              inputs_through_graphs=tuple(trace.inputs))


def sdpa_outputs(run) -> dict:
    """``{"O": buffer, "Stats": buffer}`` that ``run``'s SDPA node wrote in that execute (those it bound)."""
    for node in getattr(run.graph, "nodes", None) or []:
        outputs = getattr(node, "outputs", None) or {}
        if "O" in outputs:
            return {name: run.buffers[int(t.uid)] for name, t in outputs.items() if name in ("O", "Stats")
                    and not getattr(t, "is_virtual", True) and int(t.uid) in run.buffers}
    return {}


def _chunk_runs(runs, chunks) -> list:
    """For each chunk, the last SDPA execute with Stats that read its k and v."""
    found = []
    for k, v in chunks:
        with_stats = [run for run in runs if "SDPA" in run.node_kinds() and run.reads(k) and run.reads(v)
                      and _writes_stats(run)]
        found.append(with_stats[-1])
    return found


def chunk_graphs_again(runs, q, chunks, scale, device) -> None:
    """Run each chunk's SDPA graph again on the checker's own q, k and v (``graph_runs.rerun``) and require its O and
    Stats to be that chunk's attention and log-sum-exp: a graph patched afterwards, or one that does part of the
    work, fails here (``Wrong`` naming the chunk)."""
    for c, (run, (k, v)) in enumerate(zip(_chunk_runs(runs, chunks), chunks), 1):
        own = {"q": _randn(tuple(q.shape), AGAIN_SEED + 10 * c, device, torch.bfloat16),
               "k": _randn(tuple(k.shape), AGAIN_SEED + 10 * c + 1, device, torch.bfloat16),
               "v": _randn(tuple(v.shape), AGAIN_SEED + 10 * c + 2, device, torch.bfloat16)}
        done = rerun([run], dict(q=q, k=k, v=v), sdpa_outputs(run), fresh=lambda name, old: own[name])
        _sync(device)
        want_o, want_stats = _attention(done.inputs["q"], done.inputs["k"], done.inputs["v"], scale)
        for name, want in (("O", want_o), ("Stats", want_stats)):
            got = done.outputs.get(name)
            result = agrees(got, want.reshape(got.shape)) if got is not None else None
            if result is not None and not result.ok:
                raise Wrong(again_line(f"chunk {c}'s cuDNN graph", "q, k and v", name,
                                       f"{_off(result, name + ' differs from its attention')} — {_rerun_why(done)}"))


class ChunkSwap:
    """``graph_runs.recording`` hooks for a call of the answer: right after each chunk's SDPA execute (one that read
    a chunk's k and v and wrote Stats), check that it computed attention over THIS call's q, k and v, then put the
    checker's own values in its O and Stats buffers (O random, Stats moved by up to a few units): the answer's merge
    must then follow them."""

    def __init__(self, q, chunks, scale, seed: int):
        self.q, self.chunks, self.scale = q, chunks, scale
        self.gen = torch.Generator().manual_seed(seed)
        self.swapped: dict = {}   # chunk index -> (O, Stats) the checker wrote last
        self.stale: str | None = None   # what the first stale execute did, in the learner's terms

    def before(self) -> None:
        pass

    def after(self) -> None:
        pass

    def capturing(self) -> bool:
        return False

    def executed(self, run) -> None:
        buffers = sdpa_outputs(run)
        if "SDPA" not in run.node_kinds() or "Stats" not in buffers or "O" not in buffers:
            return
        for c, (k, v) in enumerate(self.chunks):
            if run.reads(k) and run.reads(v):
                break
        else:
            self.stale = self.stale or ("your cuDNN SDPA graphs read other k and v than this call's: they still read "
                                        "an earlier call's tensors")
            return
        o, stats = buffers["O"], buffers["Stats"]
        want_o, want_stats = _attention(self.q, k, v, self.scale)
        if self.stale is None and not (agrees(o, want_o).ok and agrees(stats, want_stats.reshape(stats.shape)).ok):
            self.stale = (f"chunk {c + 1}'s cuDNN graph did not compute attention over them: it still reads an "
                          f"earlier call's tensors")
        new_o = torch.randn(tuple(o.shape), generator=self.gen).to(device=o.device, dtype=o.dtype)
        new_stats = (stats.detach().float().cpu() + 3 * torch.rand(tuple(stats.shape), generator=self.gen))
        o.copy_(new_o)
        stats.copy_(new_stats.to(device=stats.device, dtype=stats.dtype))
        self.swapped[c] = (new_o.double().cpu(), new_stats.double())   # the exact merge is made on the CPU

    def merged(self) -> tuple:
        """(o, stats) the exact merge of the values put in, float64."""
        outs = [self.swapped[c] for c in sorted(self.swapped)]
        lses = torch.stack([lse.reshape(*lse.shape[:3], 1) for _, lse in outs])
        total = torch.logsumexp(lses, dim=0)
        return sum(torch.exp(lse - total) * o for (o, _), lse in zip(outs, lses)), total


def merge_follows_the_graphs(answer, device, classes: tuple | None = None) -> None:
    """Call ``answer`` again on new q and chunks (new values, new buffers); each chunk graph must compute attention
    over this call's tensors, and (o, stats) must be the merge of what the chunk graphs wrote — the checker swaps its
    own values in right after each chunk's execute (``ChunkSwap``): a merge done elsewhere (numpy, a worker thread,
    torch over all keys next to a merge multiplied by zero) does not follow them."""
    q, chunks, scale = merge_inputs(device, seed=CALL_SEED)
    swap = ChunkSwap(q, chunks, scale, seed=CALL_SEED)
    with recording(classes=classes, hooks=swap):
        got = answer(q, chunks, scale)
    _sync(device)
    if swap.stale is not None:
        raise Wrong(f"called again with a new q and new chunks, {swap.stale} (a graph kept from the first call?) — "
                    f"bind each call's q, k and v")
    missing = [c for c in range(1, len(chunks) + 1) if c - 1 not in swap.swapped]
    if missing:
        raise Wrong(f"called again with a new q and new chunks, no cuDNN SDPA graph with Stats ran over chunk "
                    f"{missing[0]}: one forward per chunk at every call")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise Wrong(f"called again, your function returned {type(got).__name__}, not (o, stats)")
    o, stats = got
    want_o, want_stats = swap.merged()
    for name, out, want in (("o", o, want_o), ("stats", stats, want_stats)):
        if not agrees(out, want.to(out.device)).ok:
            raise Wrong(f"your {name} did not follow the chunks' cuDNN results: when the checker changed the O and "
                        f"Stats your chunk graphs wrote, {name} did not change with them — merge what each chunk's "
                        f"graph wrote, not a result computed elsewhere (numpy, another thread, torch over all keys)")


def _writes_stats(run) -> bool:
    """Whether ``run``'s SDPA node has a Stats output bound in that execute's variant pack."""
    for node in getattr(run.graph, "nodes", None) or []:
        stats = (getattr(node, "outputs", None) or {}).get("Stats")
        if stats is not None and not getattr(stats, "is_virtual", True) and int(stats.uid) in run.buffers:
            return True
    return False


def grade_merge_chunks(answer, *, device="cuda", need_graphs: bool | None = None, classes: tuple | None = None) -> str:
    """Run ``answer(q, chunks, attn_scale)``; its ``(o, stats)`` must match attention of q over all the
    chunks' keys and the log-sum-exp of the scaled scores over all keys (fp32, [B, H, S, 1]), and
    (``need_graphs``, default: on a GPU) each chunk must have gone through a cuDNN SDPA forward with Stats
    (``chunk_graphs_ran``; ``classes`` as ``graph_runs.recording`` takes them)."""
    if need_graphs is None:
        need_graphs = str(device).startswith("cuda")
    q, chunks, scale = merge_inputs(device)
    named = {f"chunk {c}'s {n}": t for c, pair in enumerate(chunks, 1) for n, t in zip("kv", pair)}
    with tracing(dict(q=q, **named), classes=classes) as trace, trace.answer():
        got = answer(q, chunks, scale)
    _sync(device)
    if got is None or got is Ellipsis:
        raise NotDone("not done yet — merge_chunks returned nothing; return (o, stats)")
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        raise Wrong(f"return a pair (o, stats), got {type(got).__name__}")
    o, stats = got
    for name, t in (("o", o), ("stats", stats)):
        if t is None or t is Ellipsis:
            raise NotDone(f"not done yet — {name} is missing")
        if not isinstance(t, torch.Tensor):
            raise Wrong(f"{name} should be a tensor, got {type(t).__name__}")
    b, h, s, d = q.shape
    if tuple(o.shape) != (b, h, s, d):
        raise Wrong(f"o has shape {tuple(o.shape)}, want {(b, h, s, d)} (like q)")
    if tuple(stats.shape) != (b, h, s, 1):
        raise Wrong(f"stats has shape {tuple(stats.shape)}, want {(b, h, s, 1)}")
    if o.dtype != q.dtype:
        raise Wrong(f"o is {o.dtype}; return it in q's dtype ({q.dtype}), like q")
    if stats.dtype != torch.float32:
        raise Wrong(f"stats is {stats.dtype}; keep it float32, as cuDNN writes it")
    for name, t in (("o", o), ("stats", stats)):
        if _unwritten(t):
            raise Wrong(f"{name} holds {_unwritten(t)} NaN elements (a buffer never written?)")
    k_all = torch.cat([k for k, _ in chunks], dim=2)
    v_all = torch.cat([v for _, v in chunks], dim=2)
    want_o, want_stats = _attention(q, k_all, v_all, scale)
    o_result = agrees(o, want_o)
    if not o_result.ok:
        mistake = _merge_o_mistake(o, q, chunks, scale)
        raise Wrong(mistake or _off(o_result, "o differs from attention over all keys"))
    s_result = agrees(stats, want_stats)
    if not s_result.ok:
        mistake = _merge_stats_mistake(stats, q, chunks, scale, want_stats)
        raise Wrong(mistake or _off(s_result, "o is right but stats differs from the log-sum-exp over all keys"))
    if need_graphs:   # the right numbers: now who computed them, and whether the graphs and the merge do it alone
        chunk_graphs_ran(trace.runs, chunks)
        merged_from_chunks(trace, dict(o=o, stats=stats), chunks)
        chunk_graphs_again(trace.runs, q, chunks, scale, device)
        merge_follows_the_graphs(answer, device, classes)
    return (f"correct — {len(chunks)} chunks merged: o rel err {o_result.rel_err:.1e}, stats rel err "
            f"{s_result.rel_err:.1e} against attention over all keys")


@checker("05.merge_chunks", needs=("sdpa",))
def check_merge_chunks(answer):
    return grade_merge_chunks(answer, device=grading_device(), need_graphs=True)


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H


def sliding_window(q, k, v, o, window):
    """Causal SDPA in which query i sees keys i - window < j <= i; writes o, returns the executed graph."""
    cudnn = H.load_cudnn()
    swa = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                        compute_data_type=torch.float32, handle=H.get_handle())
    named = H.GraphIO(swa, dtype=q.dtype)
    out_t, _unused_stats = swa.sdpa(
        named.input("q", q), named.input("k", k), named.input("v", v),
        attn_scale=1.0 / math.sqrt(q.shape[-1]),
        generate_stats=False,
        diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT,   # the band is measured from the top-left diagonal
        diagonal_band_right_bound=0,                            # nothing right of the diagonal: causal
        diagonal_band_left_bound=window,                        # and keys j > i - window only
        name="sliding_window_sdpa",
    )
    named.output("o", out_t, o)
    H.build(swa)
    swa.execute(named.pack(), H.workspace_for(swa), handle=H.get_handle())
    return swa


def merge_chunks(q, chunks, attn_scale):
    """Attention of q over K/V chunks: one SDPA forward with Stats per chunk, then the exact merge.

    Chunk c gives O_c (softmax over its own keys) and L_c = log Σ_{j in c} exp(s_j). Over all keys the
    normaliser is L = log Σ_c exp(L_c), and O = Σ_c exp(L_c - L) · O_c."""
    cudnn = H.load_cudnn()
    chunk_outputs, chunk_lse = [], []
    for k_chunk, v_chunk in chunks:
        part = cudnn.pygraph(io_data_type=q.dtype, intermediate_data_type=torch.float32,
                             compute_data_type=torch.float32, handle=H.get_handle())
        named = H.GraphIO(part, dtype=q.dtype)
        o_t, lse_t = part.sdpa(named.input("q", q), named.input("k", k_chunk), named.input("v", v_chunk),
                               attn_scale=attn_scale, generate_stats=True, name="chunk_sdpa")
        o_chunk = torch.empty_like(q)
        lse_chunk = torch.empty(*q.shape[:3], 1, device=q.device, dtype=torch.float32)
        named.output("o", o_t, o_chunk)
        named.output("stats", lse_t, lse_chunk)
        H.build(part)
        part.execute(named.pack(), H.workspace_for(part), handle=H.get_handle())
        chunk_outputs.append(o_chunk.float())
        chunk_lse.append(lse_chunk)
    lse_all = torch.logsumexp(torch.stack(chunk_lse), dim=0)
    merged = sum(torch.exp(lse_c - lse_all) * o_c for lse_c, o_c in zip(chunk_lse, chunk_outputs))
    return merged.to(q.dtype), lse_all
