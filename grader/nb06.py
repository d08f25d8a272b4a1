"""Checkers for notebook 06's exercises (plan serialization and a plan cache).

06.round_trip     build C = A @ B with fixed UIDs, serialize it, reload the bytes into a fresh graph, run it by UID
06.load_or_build  a cache lookup that loads a stored plan only when its fingerprint is this machine's (every field
                  of the plan cache's, ``inputs.fingerprint``) and it was made for this graph; else it builds

Both build tiny matmuls (C[1, 64, 48] = A[1, 64, 32] @ B[1, 32, 48]) in the working dtype on the GPU.
"""
from __future__ import annotations

import torch

from helpers.checking import poison_
from helpers.errors import first_line
from helpers.graphs import build, workspace_for
from helpers.handles import get_handle
from helpers.libcudnn import load_cudnn
from . import NotDone, Wrong, agrees, checker, grading_setup, inputs
from .graph_runs import StreamOrder
from .provenance import tracing

UIDS = {"a": 11, "b": 12, "c": 13}   # the exercise's contract: the reloading side knows only these
SHAPE = dict(m=64, k=32, n=48)


# ---------------------------------------------------------------- shared plumbing
def _operands(seed: int, m: int = SHAPE["m"], k: int = SHAPE["k"], n: int = SHAPE["n"]) -> dict:
    """a, b (scaled so C stays near 1) and a NaN-poisoned c, from a fixed seed (on the grading device)."""
    device, dtype = grading_setup()
    gen = torch.Generator(device=device).manual_seed(seed)
    a = torch.randn(1, m, k, device=device, generator=gen).to(dtype)
    b = (torch.randn(1, k, n, device=device, generator=gen) / k**0.5).to(dtype)
    return {"a": a, "b": b, "c": poison_(torch.empty(1, m, n, device=device, dtype=dtype))}


def _verdict(t: dict):
    """``agrees`` of t["c"] with a @ b in float64."""
    return agrees(t["c"], t["a"].double() @ t["b"].double())


def _run_by_uid(graph, t: dict) -> None:
    graph.execute({UIDS[name]: t[name] for name in UIDS}, workspace_for(graph), handle=get_handle())
    torch.cuda.synchronize()


def _matmul_graph(t: dict):
    """The checker's own C = A @ B with the exercise's UIDs (constructed, not built)."""
    graph = inputs.new_graph(t["a"].dtype)
    a = graph.tensor_like(t["a"], name="a").set_uid(UIDS["a"])
    b = graph.tensor_like(t["b"], name="b").set_uid(UIDS["b"])
    graph.matmul(A=a, B=b, name="matmul").set_output(True).set_name("c").set_uid(UIDS["c"])
    return graph


def _is_graph(obj) -> bool:
    return isinstance(obj, load_cudnn(need_gpu=False).pygraph)


def _blame(result, what: str) -> str:
    if result.unwritten:
        return f"{what}: c was never written ({result.unwritten} elements still NaN)"
    if result.rel_err <= result.tol:  # right by norm, some elements off
        return f"{what}: c is wrong in places ({result.elements})"
    return f"{what}: c is wrong (rel err {result.rel_err:.1e})"


# ---------------------------------------------------------------- 06.round_trip
AGAIN = dict(m=96, k=48, n=64)   # the second call's shapes: every dimension larger than SHAPE's


def _returned(result):
    """``(blob as bytes, reloaded graph)`` from what ``round_trip`` returned, or NotDone / Wrong in one line."""
    if result is None or result is Ellipsis:
        raise NotDone("not done yet — round_trip returns nothing; return (blob, reloaded)")
    if not isinstance(result, tuple) or len(result) != 2:
        raise Wrong(f"return two things, (blob, reloaded); got {type(result).__name__}")
    blob, reloaded = result
    if isinstance(blob, list):
        blob = bytes(blob)
    if not isinstance(blob, (bytes, bytearray)):
        raise Wrong(f"the blob is a {type(blob).__name__}; return graph.serialize(as_bytes=True)")
    if not _is_graph(reloaded):
        raise Wrong(f"the second value is a {type(reloaded).__name__}; return the cudnn.pygraph you deserialized into")
    if reloaded.nodes:
        raise Wrong(f"the graph you returned holds {len(reloaded.nodes)} op(s) of its own, so it is the graph you "
                    "built (or you deserialized into it); deserialize into a fresh, empty cudnn.pygraph")
    return blob, reloaded


def _written_by(trace, t: dict, reloaded) -> None:
    """c must be what the reloaded graph wrote, from a and b: not torch's a @ b next to a reload that never ran,
    nor a result something changed after the graph wrote it."""
    how = "execute the reloaded graph with {uid: tensor} so that it writes c"
    trace.require_graph_output(t["c"], "c", inputs=("a", "b"), by=reloaded, how=how)
    trace.runs.require_written(t["c"], "c", by=reloaded, how=how)


@checker("06.round_trip")
def check_round_trip(answer) -> str:
    """Runs the answer on our tensors (c must be written by the graph it returns: ``graph_runs``), and again on
    tensors of other shapes; then reloads ITS first bytes into a graph of ours and feeds that graph by UID only, and
    feeds the graph it returned by UID too — each time with new data, poisoned output, vs torch."""
    cudnn = load_cudnn(need_gpu=False)
    t = _operands(seed=1)
    order = StreamOrder() if t["a"].is_cuda else None   # the caller's stream: torch's current one now
    with tracing(dict(a=t["a"], b=t["b"]), snapshot=True, order=order) as trace, trace.answer():
        result = answer(t["a"], t["b"], t["c"])
    blob, reloaded = _returned(result)
    if order is not None:
        order.require_ordered("c", how="or execute on the current stream")   # waits for the caller's stream only
    first = _verdict(t)
    if not first.ok:
        raise Wrong(_blame(first, "after your run") + "; execute the reloaded graph with {uid: tensor}")
    _written_by(trace, t, reloaded)

    # Called again on other tensors (larger in every dimension, so a stale plan stays inside them): new buffers,
    # new values, another shape; the answer must build, serialize and reload for them.
    u = _operands(seed=6, **AGAIN)
    with tracing(dict(a=u["a"], b=u["b"]), snapshot=True) as trace, trace.answer():
        _, reloaded_again = _returned(answer(u["a"], u["b"], u["c"]))
    again = _verdict(u)
    if not again.ok:
        raise Wrong(_blame(again, f"called again with other tensors (a {list(u['a'].shape)}, b {list(u['b'].shape)})")
                    + " — build, serialize and reload for each call's tensors, not the first call's")
    _written_by(trace, u, reloaded_again)

    # Only the bytes travel to another process: reload them into a graph of ours, fed by the UIDs alone.
    ours = cudnn.pygraph(handle=get_handle())
    ours.deserialize(get_handle(), bytes(blob))
    u = _operands(seed=2)
    try:
        _run_by_uid(ours, u)
    except Exception as exc:
        raise Wrong(f"your plan does not run when fed {{11: a, 12: b, 13: c}} ({first_line(exc, 90)}); "
                    "set_uid on a, b and the output c before building") from None
    reloaded_run = _verdict(u)
    if not reloaded_run.ok:
        raise Wrong(_blame(reloaded_run, "your plan, reloaded and fed {11: a, 12: b, 13: c}")
                    + "; are the UIDs on the right tensors?")

    # The graph it returned must run by UID, on any buffers of that shape.
    v = _operands(seed=3)
    try:
        _run_by_uid(reloaded, v)
    except Exception as exc:
        raise Wrong(f"the graph you returned does not run when fed by UID ({first_line(exc, 90)})") from None
    returned_run = _verdict(v)
    if not returned_run.ok:
        raise Wrong(_blame(returned_run, "the graph you returned, fed new inputs by UID"))
    return (f"correct — a fresh graph ran your {len(blob) / 1024:.1f} KiB plan by UID alone "
            f"(rel err {first.rel_err:.1e})")


# ---------------------------------------------------------------- 06.load_or_build
def _other(value, *candidates):
    """The first candidate that differs from ``value``: a value another machine (or an upgrade) would have."""
    return next(c for c in candidates if c != value)


def _elsewhere(here: dict) -> list[tuple[str, dict]]:
    """Fingerprints of entries that must be refused here, one or more per fingerprint field:
    (what the learner reads, fingerprint)."""
    gpu, sm = ("NVIDIA A100-SXM4-80GB", 80) if here["sm"] != 80 else ("NVIDIA H100 80GB HBM3", 90)
    fewer = max(1, here["sm_count"] // 2)
    backend = here["cudnn_backend"] + 100
    driver = _other(here["driver"], "570.86.15", "580.95.05")
    runtime = _other(here["cuda_runtime"], "12.8", "13.0")
    frontend = _other(here["cudnn_frontend"], "1.31.0", "1.32.0")
    return [
        (f"on another GPU model ({gpu}, sm{sm})", dict(here, gpu=gpu, sm=sm)),
        (f"on a {here['gpu']} with {fewer} SMs (this one has {here['sm_count']}, e.g. a MIG slice)",
         dict(here, sm_count=fewer)),
        (f"with another cuDNN backend ({backend}, this one is {here['cudnn_backend']})",
         dict(here, cudnn_backend=backend)),
        (f"under another driver ({driver}, this one is {here['driver']})", dict(here, driver=driver)),
        (f"with another CUDA runtime ({runtime}, this one is {here['cuda_runtime']})", dict(here, cuda_runtime=runtime)),
        (f"with another cuDNN frontend ({frontend}, this one is {here['cudnn_frontend']})",
         dict(here, cudnn_frontend=frontend)),
    ]


@checker("06.load_or_build")
def check_load_or_build(answer) -> str:
    """Feeds the answer entries that must load (made here, for this graph) and entries that must not (any one
    fingerprint field from elsewhere, another graph, no entry); a load is a fresh pygraph with no ops, a build
    is the graph handed in. Whatever comes back must then compute C = A @ B when fed by UID."""
    here = inputs.fingerprint()
    t = _operands(seed=4)
    mine = _matmul_graph(t)
    key = mine.key()
    build(mine)
    plan = mine.serialize(as_bytes=True)
    other = _matmul_graph(_operands(seed=5, m=2 * SHAPE["m"]))   # another shape: another graph, another key
    other_key = other.key()
    build(other)
    other_plan = other.serialize(as_bytes=True)

    cases = [("an entry made here, for this graph", dict(fingerprint=here, key=key, plan=plan), "load")]
    cases += [(f"an entry made {what}", dict(fingerprint=fp, key=key, plan=plan), "build") for what, fp in _elsewhere(here)]
    cases += [("an entry for another graph (another shape: another key)",
               dict(fingerprint=here, key=other_key, plan=other_plan), "build"),
              ("no entry (None)", None, "build")]
    for n, (what, entry, want) in enumerate(cases):
        t = _operands(seed=40 + n)      # new values in new buffers for every case
        handed = _matmul_graph(t)
        with tracing() as trace, trace.answer():
            got = answer(None if entry is None else dict(entry, fingerprint=dict(entry["fingerprint"])), handed)
        built = trace.plan_builds()
        if got is None or got is Ellipsis:
            raise NotDone("not done yet — load_or_build returns nothing; return a graph ready to execute")
        if not _is_graph(got):
            raise Wrong(f"for {what} it returned a {type(got).__name__}; return a cudnn.pygraph")
        if got is handed:
            did = "build"
        elif not got.nodes:
            did = "load"
        else:
            raise Wrong(f"for {what} it returned a graph with ops that is not the one handed in; build the graph "
                        "you were given, or deserialize into a fresh cudnn.pygraph")
        if want == "load" and did == "build":
            raise Wrong(f"it rebuilt for {what}: a matching entry must be loaded (deserialize into a fresh "
                        "cudnn.pygraph, not into the graph handed in)")
        if want == "build" and did == "load":
            raise Wrong(f"it loaded {what}: compare the entry's whole fingerprint (all {len(here)} fields of "
                        "plancache.current_fingerprint()) with this machine's, and its key with graph.key()")
        if want == "load" and built:
            raise Wrong(f"it loaded {what}, but built a plan first ({len(built)} build(s) on "
                        f"{'the graph handed in' if any(g is handed for g in built) else 'another graph'}): the point "
                        "of a cache hit is no build at all — check the entry before building anything")
        _run_by_uid(got, t)
        result = _verdict(t)
        if not result.ok:
            raise Wrong(_blame(result, f"the graph returned for {what}, fed by UID"))
    return (f"correct — loaded the matching entry, rebuilt for the {len(cases) - 1} others (each fingerprint "
            "field from elsewhere, another graph, none)")


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H
from helpers.recipes import plancache

PLAN_UIDS = dict(a=11, b=12, c=13)   # the same contract as the notebook's UIDS


def round_trip(a, b, c):
    cudnn, handle = H.load_cudnn(), H.get_handle()
    built = cudnn.pygraph(io_data_type=a.dtype, intermediate_data_type=torch.float32,
                          compute_data_type=torch.float32, handle=handle)
    a_in = built.tensor_like(a).set_uid(PLAN_UIDS["a"])
    b_in = built.tensor_like(b).set_uid(PLAN_UIDS["b"])
    built.matmul(A=a_in, B=b_in).set_output(True).set_uid(PLAN_UIDS["c"])
    H.build(built)
    blob = built.serialize(as_bytes=True)

    fresh = cudnn.pygraph(handle=handle)          # nothing in it: no tensors, no ops
    fresh.deserialize(handle, blob)
    by_uid = {PLAN_UIDS["a"]: a, PLAN_UIDS["b"]: b, PLAN_UIDS["c"]: c}
    fresh.execute(by_uid, H.workspace_for(fresh), handle=handle)
    return blob, fresh


def load_or_build(entry, graph):
    this_machine = plancache.current_fingerprint()   # every field the course's plan cache keys on
    usable = entry is not None and entry["fingerprint"] == this_machine and entry["key"] == graph.key()
    if not usable:
        H.build(graph)
        return graph
    fresh = H.load_cudnn().pygraph(handle=H.get_handle())
    fresh.deserialize(H.get_handle(), entry["plan"])
    return fresh
