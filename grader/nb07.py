"""Notebook 07's exercises: dynamic shapes and the kernel cache.

- ``07.build_projection``: build y = x @ w + b for x [B, S, K] as a dynamic-shape graph on a given kernel
  cache; graded at three (B, S) that share one cache and once more at a repeated shape, new tensors every call;
  each graph must follow new values written into x, w and b.
- ``07.serve``: one built graph per shape for a stream of conv requests, every graph on one kernel cache, a
  repeated shape served by the graph already built (reading the request's x and the w and b it is given, which
  change in place), each ``y`` a new NHWC tensor of x's dtype written by a graph's execute, not by torch.
- ``07.restore_cache``: load a serialized kernel cache into a new cache object, twice, from two texts.

Each checker makes its own inputs and its own kernel cache, and needs a GPU (cuDNN builds need the driver).
"""
from __future__ import annotations

import torch

from helpers.checking import check, poison_
from helpers.graphs import build, workspace_for
from helpers.handles import get_handle
from . import NotDone, Wrong, agrees, checker, inputs, internals, on_gpu
from .contracts import require_contract
from .graph_runs import StreamOrder, distinct, regrade
from .provenance import tracing

PROJECTION_SHAPES = [(2, 16), (3, 40), (1, 24)]   # (B, S): batch and sequence length change together
PROJECTION_K, PROJECTION_N = 64, 128
PROJECTION_REPEAT = (2, 16)                       # called once more at a shape seen before, with new tensors
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


def stale_input(out, candidates: dict, tol: float | None = None) -> str | None:
    """The name of the first ``candidates`` entry (what a graph may still read -> the output it would then give)
    that ``out`` matches, or None: which input a wrong output came from."""
    for name, ref in candidates.items():
        if agrees(out, ref, tol).ok:
            return name
    return None


def stale_copy_line(where: str, name: str) -> str:
    """One line for a graph that kept reading old values of input ``name`` (``"w"``, or ``"w and b"``) after new
    values were written into it: a copy taken when it was built, or a result made from it outside the graph."""
    plural = " and " in name
    return (f"{where}: after new values were written into {name} (the same tensor{'s' if plural else ''}), your graph "
            f"still computed with the old ones: it reads a copy of {'them' if plural else 'it'}, or a result made "
            f"from {'them' if plural else 'it'}, taken when it was built — bind {name} "
            f"{'themselves' if plural else 'itself'} and do the work inside the graph")


def _projection_tensors(gen, batch: int, seq: int, dtype) -> dict:
    """x [B, S, K], w [1, K, N] scaled by 1/sqrt(K), b [1, 1, N] (scale 0.5) and a NaN-poisoned y [B, S, N]."""
    k, n = PROJECTION_K, PROJECTION_N
    return dict(x=torch.randn(batch, seq, k, device="cuda", generator=gen).to(dtype),
                w=(torch.randn(1, k, n, device="cuda", generator=gen) / k**0.5).to(dtype),
                b=(0.5 * torch.randn(1, 1, n, device="cuda", generator=gen)).to(dtype),
                y=poison_(torch.empty(batch, seq, n, device="cuda", dtype=dtype)))


def _projection_reference(t: dict):
    return t["x"].double() @ t["w"].double() + t["b"].double()


def _run_pack(graph, pack, y) -> None:
    """Poison y, execute ``graph`` on ``pack`` (the checker's execute), wait."""
    poison_(y)
    graph.execute(pack, workspace_for(graph), handle=get_handle())
    torch.cuda.synchronize()


def _reads_each_input(graph, pack, t: dict, gen, where: str) -> None:
    """New values into x, w and b in turn (the same tensors), the graph executed again on the pack it came with:
    ``Wrong`` in one line unless each time y follows (a copy bound when the graph was built does not)."""
    for name in ("x", "w", "b"):
        old = t[name].clone()
        t[name].copy_(torch.randn(t[name].shape, device="cuda", generator=gen).mul_(float(old.float().std()) or 1.0))
        _run_pack(graph, pack, t["y"])
        ref = _projection_reference(t)
        if agrees(t["y"], ref).ok:
            continue
        if stale_input(t["y"], {name: _projection_reference(dict(t, **{name: old}))}):
            raise Wrong(stale_copy_line(where, name))
        raise Wrong(f"{where}: after new values were written into {name}, your graph's output is wrong "
                    f"({_why(check('', t['y'], ref, raise_on_fail=False, quiet=True))}): it must read x, w and b "
                    "themselves on every execute")


@checker("07.build_projection", needs=("kernel_cache",))
def check_build_projection(build_projection):
    """Three (B, S) on one kernel cache, then the first shape again; new x, w, b and y at every call. Each graph is
    executed by the checker on the pack it came with, then again after new values were written into x, w and b in
    turn (a copy bound at build time gives the old result)."""
    cudnn, dtype = on_gpu()
    gen = torch.Generator(device="cuda").manual_seed(7)
    cache = cudnn.create_kernel_cache()
    before = _serialized(cache)
    passed, errors, readable = [], [], True
    calls = [(f"B×S = {b}×{s}", b, s) for b, s in PROJECTION_SHAPES]
    again = f"B×S = {PROJECTION_REPEAT[0]}×{PROJECTION_REPEAT[1]} again (new x, w, b and y)"
    calls.append((again, *PROJECTION_REPEAT))
    for where, batch, seq in calls:
        t = _projection_tensors(gen, batch, seq, dtype)
        x, w, b, y = (t[name] for name in "xwby")
        with tracing(dict(x=x, w=w, b=b), snapshot=True) as trace:
            with trace.answer():
                graph, pack = _graph_and_pack(build_projection(x, w, b, y, cache), "build_projection")
            problem = options_problem(graph, cache)
            if problem:
                raise Wrong(problem)
            readable = readable and internals.graph_options(graph) is not None
            # whatever the function wrote into y: from here, only the graph it returned writes it
            _run_pack(graph, pack, y)
        ref = _projection_reference(t)
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
        _reads_each_input(graph, pack, t, gen, f"at {where}")
        try:   # the graph alone, on new x, w, b and y of the checker's, bound by UID: it must compute y
            regrade(trace.runs.feeding(y), dict(x=x, w=w, b=b), dict(y=y),
                    lambda x, w, b: {"y": _projection_reference(dict(x=x, w=w, b=b))})
        except Wrong as exc:
            raise Wrong(f"at {where}: {exc}") from None
        if len(passed) < len(PROJECTION_SHAPES):
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


def nhwc_strides(shape) -> tuple:
    """The strides of an NHWC (channels_last) tensor of ``shape`` [n, c, h, w]."""
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def require_output(y, x, w, b, earlier: list) -> None:
    """``Wrong`` in one line unless ``serve``'s ``y`` keeps the statement's contract for request ``x``: a tensor of
    shape [n, K, H, W], x's dtype, on the GPU, NHWC (channels_last) as the skeleton makes it, sharing no memory with
    x, w, b or an earlier request's output (``earlier``: ``(what, y)``)."""
    shape = (x.shape[0], SERVE_K, *x.shape[2:])
    require_contract(y, "y", shape=shape, dtype=x.dtype, dtype_why="x's dtype", device=x.device.type,
                     strides=nhwc_strides(shape), how="make y as the skeleton does: torch.empty(..., dtype=x.dtype)"
                     ".to(memory_format=torch.channels_last), a new one per request")
    require_contract(y, "y", apart_from=dict(x=x, w=w, b=b, **{f"the y of {what}": old for what, old in earlier}),
                     how="give every request a y of its own, or a later request overwrites an earlier one's result")


def _serve_diagnosis(what: str, y, x, w, b, before: dict, same_shape: list) -> str:
    """The line for a wrong ``y``: the result for an earlier request's x of this shape (``same_shape``: (what, x)),
    or for the w or b of before the checker rewrote them (``before``: name -> old values); else how far off."""
    now = dict(x=x, w=w, b=b)
    olds = {f"the x of {earlier}": inputs.conv_reference(dict(now, x=old)) for earlier, old in same_shape}
    if before:
        olds |= {name: inputs.conv_reference(dict(now, **{n: before[n] for n in name.split(" and ")}))
                 for name in ("w", "b", "w and b")}
    stale = stale_input(y, olds)
    if stale is None:
        result = check(what, y, inputs.conv_reference(now), raise_on_fail=False, quiet=True)
        return f"{what}: wrong output ({_why(result)})"
    if stale.startswith("the x of"):
        return (f"{what}: y is the result for {stale}: the graph kept for this shape still reads the x it was "
                "built with — bind this request's x in the pack (io.pack(x=x, y=y))")
    return stale_copy_line(what, stale)


@checker("07.serve", needs=("kernel_cache",))
def check_serve(serve):
    """Batch sizes with repeats, a new x every request; before every repeated shape the checker writes new values
    into w and b (the same tensors: a graph must read them, not copies made when it was built). Each y: its contract
    (``require_output``), its values, who wrote it, and its graph run again on new inputs by UID."""
    cudnn, dtype = on_gpu()
    fixed = inputs.conv_tensors(1, SERVE_C, SERVE_HW, SERVE_K, dtype=dtype, seed=11)
    w, b = fixed["w"], fixed["b"]
    gen = torch.Generator(device="cuda").manual_seed(12)
    cache, graphs, seen, kept, returned, xs = cudnn.create_kernel_cache(), {}, [], {}, [], []
    order = StreamOrder()   # the caller's stream: torch's current one now
    with tracing(dict(w=w, b=b), snapshot=True, order=order) as trace:
        for i, batch in enumerate(SERVE_BATCHES, 1):
            what = f"request {i} (batch {batch}{', a shape seen before' if batch in seen else ''})"
            before = {}
            if batch in seen:   # new weights, in place: the graph kept for this shape must see them
                before = dict(w=w.clone(), b=b.clone())
                w.copy_(torch.randn(w.shape, device="cuda", generator=gen).mul_(float(before["w"].float().std())))
                b.copy_(torch.randn(b.shape, device="cuda", generator=gen).mul_(float(before["b"].float().std())))
            x = inputs.conv_tensors(batch, SERVE_C, SERVE_HW, SERVE_K, dtype=dtype, seed=100 + i)["x"]
            trace.input("x", x)
            with trace.answer():
                y = serve(x, w, b, graphs, cache)
            if y is None or y is Ellipsis:
                raise NotDone("not done yet — serve returns nothing; return y")
            try:
                require_output(y, x, w, b, [(earlier, out) for earlier, out, _ in returned])
                order.require_ordered("y", how="or execute on the current stream")   # the caller's stream only
            except Wrong as exc:
                raise Wrong(f"{what}: {exc}") from None
            torch.cuda.synchronize()
            result = check(what, y, inputs.conv_reference(dict(x=x, w=w, b=b)), raise_on_fail=False, quiet=True)
            if not result.ok:
                same_shape = [(earlier, old) for earlier, old in xs if old.shape == x.shape]
                raise Wrong(_serve_diagnosis(what, y, x, w, b, before, same_shape))
            try:  # y must be what a cuDNN graph wrote from this x, not torch's conv next to graphs only built
                how = "execute the graph kept for this shape on this x, with y as its output"
                trace.require_graph_output(y, "y", kinds=("CONV_FPROP",), inputs=("x", "w", "b"), how=how)
                trace.runs.require_written(y, "y", how=how)
                # the graph that wrote y, on new x, w, b and y of the checker's bound by UID: it must compute y
                regrade(trace.runs.feeding(y), dict(x=x, w=w, b=b), dict(y=y),
                        lambda x, w, b: {"y": inputs.conv_reference(dict(x=x, w=w, b=b))}, how=how)
            except Wrong as exc:
                raise Wrong(f"{what}: {exc}") from None
            returned.append((what, y, y.clone()))
            xs.append((f"request {i}", x))
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


def _restore_once(restore_cache, text: str, saved, earlier: list):
    """Call ``restore_cache(text)`` and check what it returned: a kernel cache of its own (not one an earlier call
    returned: ``earlier``), loaded from ``text`` with nothing built, that refuses a second load."""
    with tracing() as trace, trace.answer():
        loaded = restore_cache(text)
    if loaded is None or loaded is Ellipsis:
        raise NotDone("not done yet — restore_cache returns nothing; return the new cache")
    if isinstance(loaded, str):
        raise Wrong("restore_cache returned a string; return a kernel cache loaded from it")
    if type(loaded) is not type(saved):
        raise Wrong(f"restore_cache returned a {type(loaded).__name__}, not a kernel cache "
                    "(cudnn.create_kernel_cache())")
    if any(loaded is cache for cache in earlier):
        raise Wrong("called again with another saved text, restore_cache returned the cache of its first call: make "
                    "a new cache on every call and load that call's text into it")
    restored_from(trace, loaded, text)
    try:  # a cache that holds the text refuses a second load; an empty one takes it
        loaded.deserialize(text)
    except Exception:
        pass
    else:
        raise Wrong("the cache you returned was empty (it accepted the text when the checker loaded it): "
                    "deserialize the text into it")
    return loaded


@checker("07.restore_cache", needs=("kernel_cache", "kernel_cache_serialize"))
def check_restore_cache(restore_cache):
    """Two saved caches, restored one after the other (each call must make a new cache from its own text); a conv
    of a new batch size built on each restored cache must compute the right result."""
    cudnn, dtype = on_gpu()

    def conv_on(cache, batch, seed):
        t = inputs.conv_tensors(batch, SERVE_C, SERVE_HW, SERVE_K, dtype=dtype, seed=seed)
        graph, io = inputs.conv_graph(t, kernel_cache=cache, is_dynamic_shape_enabled=True)
        build(graph)
        return graph, io, t

    results, restored = [], []
    for batch, new_batch, seed in ((RESTORE_BUILT, RESTORE_NEW, 21), (RESTORE_NEW, RESTORE_BUILT + 1, 23)):
        saved = cudnn.create_kernel_cache()
        conv_on(saved, batch, seed)
        restored.append(_restore_once(restore_cache, saved.serialize(), saved, restored))
        graph, io, t = conv_on(restored[-1], new_batch, seed + 1)
        graph.execute(io.pack(), workspace_for(graph), handle=get_handle())
        torch.cuda.synchronize()
        result = check(f"conv batch {new_batch} on the restored cache", t["y"], inputs.conv_reference(t),
                       raise_on_fail=False, quiet=True)
        if not result.ok:
            raise Wrong(f"a graph built on the restored cache computed a wrong result: {result}")
        results.append(result)
    return (f"restored: the cache refuses a second load and built batch {RESTORE_NEW} correctly "
            f"(rel err {results[0].rel_err:.1e})")


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
