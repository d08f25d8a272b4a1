"""Notebook 07's exercises: dynamic shapes and the kernel cache.

- ``07.build_projection``: build y = x @ w + b for x [B, S, K] as a dynamic-shape graph on a given kernel
  cache; graded at three (B, S) that share one cache.
- ``07.serve``: one built graph per shape for a stream of conv requests, every graph on one kernel cache, a
  repeated shape served by the graph already built, and each ``y`` written by a graph's execute, not by torch.
- ``07.restore_cache``: load a serialized kernel cache into a new cache object.

Each checker makes its own inputs and its own kernel cache, and needs a GPU (cuDNN builds need the driver).
"""
from __future__ import annotations

import torch

from helpers.checking import check, poison_
from helpers.graphs import build, workspace_for
from helpers.handles import get_handle
from . import NotDone, Wrong, agrees, checker, inputs, internals, on_gpu
from .graph_runs import distinct
from .provenance import tracing

PROJECTION_SHAPES = [(2, 16), (3, 40), (1, 24)]   # (B, S): batch and sequence length change together
PROJECTION_K, PROJECTION_N = 64, 128
SERVE_BATCHES = [2, 5, 2, 3, 5]                   # three distinct batch sizes, two of them repeated
SERVE_C, SERVE_K, SERVE_HW = 16, 16, 8            # NHWC x [n, C, HW, HW], K filters of 3×3, padding 1
RESTORE_BUILT, RESTORE_NEW = 2, 5                 # batch the saved cache was built for; batch built from the loaded one


def options_problem(graph, cache) -> str | None:
    """Why ``graph`` was not constructed with ``kernel_cache=cache`` and ``is_dynamic_shape_enabled=True``
    (one line), or None. None too when the options cannot be read (``internals.graph_options``)."""
    options = internals.graph_options(graph)
    if options is None:
        return None
    used = options.get("kernel_cache")
    if used is None:
        return ("the graph was built without a kernel cache: pass the one you are given, "
                "pygraph(..., kernel_cache=cache)")
    if used is not cache:
        return ("the graph was built with a kernel cache of its own: use the one passed in, so that every shape "
                "shares it")
    if not options.get("is_dynamic_shape_enabled"):
        return "the graph was built without is_dynamic_shape_enabled=True: ask for dynamic-shape kernels"
    return None


def _serialized(cache) -> str | None:
    try:
        return cache.serialize()
    except Exception:  # nothing finalized it yet
        return None


def _graph_and_pack(result, name: str):
    """``(graph, io)`` or ``(graph, {tensor or uid: buffer})`` as (graph, variant pack)."""
    if result is None or result is Ellipsis:
        raise NotDone(f"not done yet — {name} returns nothing; return (graph, io)")
    if not isinstance(result, tuple) or len(result) != 2:
        raise Wrong(f"{name} should return (graph, io), got {type(result).__name__}")
    graph, io = result
    if not hasattr(graph, "execute"):
        raise Wrong(f"{name} should return (graph, io); its first item is a {type(graph).__name__}")
    return graph, (io.pack() if hasattr(io, "pack") else io)


def _why(result) -> str:
    """What a failed ``check`` found, in a few words: the norm's error, and unwritten or stray elements."""
    if result.unwritten:
        return f"rel err {result.rel_err:.1e}, {result.unwritten} elements never written"
    if result.rel_err <= result.tol:
        return f"rel err {result.rel_err:.1e} by norm, but {result.elements}"
    return f"rel err {result.rel_err:.1e}"


@checker("07.build_projection", needs=("kernel_cache",))
def check_build_projection(build_projection):
    cudnn, dtype = on_gpu()
    k, n = PROJECTION_K, PROJECTION_N
    gen = torch.Generator(device="cuda").manual_seed(7)
    w = (torch.randn(1, k, n, device="cuda", generator=gen) / k**0.5).to(dtype)
    b = (0.5 * torch.randn(1, 1, n, device="cuda", generator=gen)).to(dtype)
    cache = cudnn.create_kernel_cache()
    before = _serialized(cache)
    passed, errors, readable = [], [], True
    for batch, seq in PROJECTION_SHAPES:
        where = f"B×S = {batch}×{seq}"
        x = torch.randn(batch, seq, k, device="cuda", generator=gen).to(dtype)
        y = poison_(torch.empty(batch, seq, n, device="cuda", dtype=dtype))
        with tracing(dict(x=x, w=w, b=b), snapshot=True) as trace:
            with trace.answer():
                graph, pack = _graph_and_pack(build_projection(x, w, b, y, cache), "build_projection")
            problem = options_problem(graph, cache)
            if problem:
                raise Wrong(problem)
            readable = readable and internals.graph_options(graph) is not None
            poison_(y)   # whatever the function wrote into y: from here, only the graph it returned writes it
            graph.execute(pack, workspace_for(graph), handle=get_handle())
            torch.cuda.synchronize()
        ref = x.double() @ w.double() + b.double()
        result = check(f"projection, {where}", y, ref, raise_on_fail=False, quiet=True)
        if not result.ok:
            if passed:
                raise Wrong(f"correct at {passed[0]} but wrong at {where} (rel err {result.rel_err:.1e}): build the "
                            "graph for each call's tensors, not for the first call's")
            if result.unwritten == y.numel():
                raise Wrong(f"y was never written at {where}: make it the graph's output (io.output('y', ..., y))")
            if agrees(y, x.double() @ w.double()).ok:
                raise Wrong(f"the output ignores the bias (rel err {result.rel_err:.1e} at {where}; x @ w alone "
                            "matches it)")
            raise Wrong(f"wrong output at {where}: {result}")
        try:
            trace.require_graph_output(y, "y", kinds=("MATMUL",), inputs=("x", "w", "b"), by=graph,
                                       how="bind x, w, b and y themselves in the pack you return")
        except Wrong as exc:
            raise Wrong(f"at {where}: {exc}") from None
        passed.append(where)
        errors.append(result.rel_err)
    if not readable and _serialized(cache) == before:  # this frontend hides the options: the cache must have changed
        raise Wrong("the kernel cache you were given is still empty after three builds: build with "
                    "pygraph(..., kernel_cache=cache, is_dynamic_shape_enabled=True)")
    return f"correct at {', '.join(passed)} (largest rel err {max(errors):.1e}), all three built on your kernel cache"


def _kept_graph(value):
    """The graph a ``graphs`` entry holds: the first item of a ``(graph, io)`` pair, or the entry itself."""
    return value[0] if isinstance(value, (tuple, list)) and value else value


def outputs_intact(returned) -> None:
    """``Wrong`` in one line unless every output still holds what it held when ``serve`` returned it
    (``returned``: ``(what, y, a copy of y then)`` per request)."""
    for what, y, as_returned in returned:
        if not torch.equal(y, as_returned):
            raise Wrong(f"the output of {what} changed after serve returned it: a later request wrote into it — "
                        "give every request a y of its own")


def restored_from(trace, loaded, text) -> None:
    """``Wrong`` in one line unless, while ``restore_cache`` ran (``trace``), no graph was built and the cache it
    returned (``loaded``) was deserialized from ``text`` itself."""
    if trace.builds:
        raise Wrong(f"restore_cache built {len(distinct([g for _, g in trace.builds]))} graph(s): restoring is "
                    "loading the text into a new cache (deserialize), with no build")
    if not any(cache is loaded and data == text for cache, data in trace.cache_loads):
        raise Wrong("the cache you returned was not loaded from the text you were given: deserialize that text "
                    "into it")


@checker("07.serve", needs=("kernel_cache",))
def check_serve(serve):
    cudnn, dtype = on_gpu()
    fixed = inputs.conv_tensors(1, SERVE_C, SERVE_HW, SERVE_K, dtype=dtype, seed=11)
    w, b = fixed["w"], fixed["b"]
    cache, graphs, seen, kept, returned = cudnn.create_kernel_cache(), {}, [], {}, []
    with tracing(dict(w=w, b=b), snapshot=True) as trace:
        for i, batch in enumerate(SERVE_BATCHES, 1):
            what = f"request {i} (batch {batch}{', a shape seen before' if batch in seen else ''})"
            x = inputs.conv_tensors(batch, SERVE_C, SERVE_HW, SERVE_K, dtype=dtype, seed=100 + i)["x"]
            trace.input("x", x)
            with trace.answer():
                y = serve(x, w, b, graphs, cache)
            if y is None or y is Ellipsis:
                raise NotDone("not done yet — serve returns nothing; return y")
            want = (batch, SERVE_K, SERVE_HW, SERVE_HW)
            if not isinstance(y, torch.Tensor) or tuple(y.shape) != want:
                got = tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__
                raise Wrong(f"{what}: serve returned {got}, want a tensor of shape {want}")
            torch.cuda.synchronize()
            result = check(what, y, inputs.conv_reference(dict(x=x, w=w, b=b)), raise_on_fail=False, quiet=True)
            if not result.ok:
                raise Wrong(f"{what}: wrong output ({_why(result)})")
            try:  # y must be what a cuDNN graph wrote from this x, not torch's conv next to graphs only built
                how = "execute the graph kept for this shape on this x, with y as its output"
                trace.require_graph_output(y, "y", kinds=("CONV_FPROP",), inputs=("x", "w", "b"), how=how)
                trace.runs.require_written(y, "y", how=how)
            except Wrong as exc:
                raise Wrong(f"{what}: {exc}") from None
            returned.append((what, y, y.clone()))
            if batch not in seen:
                seen.append(batch)
            holds = (f"graphs holds {len(graphs)} entr{'y' if len(graphs) == 1 else 'ies'} after "
                     f"{len(seen)} distinct batch size{'' if len(seen) == 1 else 's'}")
            if len(graphs) < len(seen):
                raise Wrong(f"{holds}: keep one built graph per shape in it, keyed by what decides whether a graph "
                            "can run x")
            if len(graphs) > len(seen):
                raise Wrong(f"{holds}: a repeated shape must find its graph again, so the key should depend on the "
                            "shape only")
            for key, graph in kept.items():
                if _kept_graph(graphs.get(key)) is not graph:
                    raise Wrong(f"{what} replaced the graph kept under {key!r}: reuse the graph a shape already has")
            kept = {key: _kept_graph(value) for key, value in graphs.items()}
            built = distinct(trace.validated())
            if len(built) != len(seen):
                raise Wrong(f"{what}: {len(built)} graphs built so far for {len(seen)} distinct shapes; build only "
                            "when graphs has none for this shape")
    outputs_intact(returned)
    for graph in built:
        problem = options_problem(graph, cache)
        if problem:
            raise Wrong(problem)
    return (f"correct for batches {SERVE_BATCHES}: {len(built)} graphs built for {len(seen)} shapes, "
            "all on your kernel cache, every output intact after the last request")


@checker("07.restore_cache", needs=("kernel_cache", "kernel_cache_serialize"))
def check_restore_cache(restore_cache):
    cudnn, dtype = on_gpu()

    def conv_on(cache, batch, seed):
        t = inputs.conv_tensors(batch, SERVE_C, SERVE_HW, SERVE_K, dtype=dtype, seed=seed)
        graph, io = inputs.conv_graph(t, kernel_cache=cache, is_dynamic_shape_enabled=True)
        build(graph)
        return graph, io, t

    saved = cudnn.create_kernel_cache()
    conv_on(saved, RESTORE_BUILT, 21)
    text = saved.serialize()
    with tracing() as trace, trace.answer():
        loaded = restore_cache(text)
    if loaded is None or loaded is Ellipsis:
        raise NotDone("not done yet — restore_cache returns nothing; return the new cache")
    if isinstance(loaded, str):
        raise Wrong("restore_cache returned a string; return a kernel cache loaded from it")
    if type(loaded) is not type(saved):
        raise Wrong(f"restore_cache returned a {type(loaded).__name__}, not a kernel cache "
                    "(cudnn.create_kernel_cache())")
    restored_from(trace, loaded, text)
    try:  # a cache that holds the text refuses a second load; an empty one takes it
        loaded.deserialize(text)
    except Exception:
        pass
    else:
        raise Wrong("the cache you returned was empty (it accepted the text when the checker loaded it): "
                    "deserialize the text into it")
    graph, io, t = conv_on(loaded, RESTORE_NEW, 22)
    graph.execute(io.pack(), workspace_for(graph), handle=get_handle())
    torch.cuda.synchronize()
    result = check(f"conv batch {RESTORE_NEW} on the restored cache", t["y"], inputs.conv_reference(t),
                   raise_on_fail=False, quiet=True)
    if not result.ok:
        raise Wrong(f"a graph built on the restored cache computed a wrong result: {result}")
    return (f"restored: the cache refuses a second load and built batch {RESTORE_NEW} correctly "
            f"(rel err {result.rel_err:.1e})")


# ---- reference solutions: H.grade_solution grades these; the hand-out (tools/student.py) cuts the file here
import helpers as H
from helpers.recipes import conv_bias_relu


def build_projection(x, w, b, y, cache):
    cudnn = H.load_cudnn()
    g = cudnn.pygraph(io_data_type=x.dtype, intermediate_data_type=torch.float32, compute_data_type=torch.float32,
                      handle=H.get_handle(), kernel_cache=cache, is_dynamic_shape_enabled=True)
    bound = H.GraphIO(g, dtype=x.dtype)
    xw = g.matmul(bound.input("x", x), bound.input("w", w), name="x_at_w")
    bound.output("y", g.add(xw, bound.input("b", b), name="plus_b"), y)
    H.build(g)
    return g, bound


def serve(x, w, b, graphs, cache):
    shape = tuple(x.shape)
    out = torch.empty(shape[0], w.shape[0], shape[2], shape[3], device=x.device,
                      dtype=x.dtype).to(memory_format=torch.channels_last)
    if shape not in graphs:                      # a new shape: a build, cheap once the cache holds the kernel
        made = conv_bias_relu.graph(dict(x=x, w=w, b=b, y=out), kernel_cache=cache, is_dynamic_shape_enabled=True)
        H.build(made[0])
        graphs[shape] = made
    g, bound = graphs[shape]
    g.execute(bound.pack(x=x, y=out), H.workspace_for(g), handle=H.get_handle())
    return out


def restore_cache(text):
    fresh = H.load_cudnn().create_kernel_cache()
    fresh.deserialize(text)
    return fresh
