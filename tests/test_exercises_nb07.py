"""Notebook 07's exercises: the checkers reject the usual wrong answers, accept the reference solutions,
and call an unfilled skeleton "not done".

On CPU: the option check (which kernel cache a graph was constructed with, and dynamic shapes), the build
counter, the answer unpacking and the notebook's own skeleton cells. On a GPU: real answers, right and wrong,
run through the checkers.
"""
from pathlib import Path

import pytest
import torch

import helpers as H
import grader as X
from grader import internals, nb07
from tests.support import refused, requires_gpu, wrong_answers

ROOT = Path(__file__).resolve().parent.parent
KEYS = {"07.build_projection": "build_projection", "07.serve": "serve", "07.restore_cache": "restore_cache"}
cudnn = pytest.importorskip("cudnn")


# ------------------------------------------------------------------ CPU: grading logic
class Cache:
    """Stands in for a kernel cache: the check compares identity only (a real one needs libcudnn)."""


def test_options_problem_names_the_missing_or_foreign_cache_and_dynamic_shapes():
    cache = Cache()
    assert nb07.options_problem(cudnn.pygraph(kernel_cache=cache, is_dynamic_shape_enabled=True), cache) is None
    assert nb07.options_problem(cudnn.pygraph(), cache).startswith("the graph was built without a kernel cache")
    foreign = cudnn.pygraph(kernel_cache=Cache(), is_dynamic_shape_enabled=True)
    assert nb07.options_problem(foreign, cache).startswith("the graph was built with a kernel cache of its own")
    static = cudnn.pygraph(kernel_cache=cache)
    assert "without is_dynamic_shape_enabled=True" in nb07.options_problem(static, cache)


def test_options_that_cannot_be_read_are_no_verdict():
    assert internals.graph_options(object()) is None
    assert nb07.options_problem(object(), Cache()) is None


def test_outputs_intact_refuses_an_output_a_later_request_overwrote():
    y = torch.ones(3)
    nb07.outputs_intact([("request 1 (batch 2)", y, y.clone())])
    shared = torch.ones(3)
    returned = [("request 1 (batch 2)", shared, shared.clone())]
    shared.fill_(2)   # request 3, the same shape, wrote into the same tensor
    with pytest.raises(X.Wrong, match=r"^the output of request 1 \(batch 2\) changed after serve returned it"):
        nb07.outputs_intact(returned)


def test_restored_from_wants_the_given_text_loaded_and_nothing_built():
    """With stand-ins for the cache and a graph: a load of the text passes; a cache warmed by a build, or loaded
    with another text, or another cache loaded, fails in one line."""
    from grader.provenance import tracing
    from tests.support import StandInBuilds as Graph, StandInCache as Cache

    def restore(body):
        cache = Cache()
        with tracing(classes=(Graph,), cuda_graph_classes=(), cache_classes=(Cache,)) as trace, trace.answer():
            returned = body(cache)
        return trace, returned

    trace, loaded = restore(lambda cache: (cache.deserialize("{saved}"), cache)[1])
    nb07.restored_from(trace, loaded, "{saved}")
    trace, loaded = restore(lambda cache: (Graph(lambda x: {"y": x}, {"x": 1}, {"y": 2}).validate(), cache)[1])
    with pytest.raises(X.Wrong, match=r"^restore_cache built 1 graph\(s\): restoring is loading the text"):
        nb07.restored_from(trace, loaded, "{saved}")
    for body in (lambda cache: (cache.deserialize("{other}"), cache)[1],
                 lambda cache: (cache.deserialize("{saved}"), Cache())[1]):
        trace, loaded = restore(body)
        with pytest.raises(X.Wrong, match=r"^the cache you returned was not loaded from the text you were given"):
            nb07.restored_from(trace, loaded, "{saved}")


def test_answers_unpack_to_graph_and_pack_or_say_what_is_wrong():
    class IO:
        def pack(self):
            return {1: "buffer"}

    graph = cudnn.pygraph()
    assert nb07._graph_and_pack((graph, IO()), "f") == (graph, {1: "buffer"})
    assert nb07._graph_and_pack((graph, {2: "b"}), "f") == (graph, {2: "b"})
    with pytest.raises(X.NotDone, match="f returns nothing"):
        nb07._graph_and_pack(None, "f")
    with pytest.raises(X.Wrong, match=r"should return \(graph, io\), got pygraph"):
        nb07._graph_and_pack(graph, "f")
    with pytest.raises(X.Wrong, match="its first item is a str"):
        nb07._graph_and_pack(("graph", IO()), "f")


def test_stale_input_names_what_a_wrong_output_came_from():
    g = torch.Generator().manual_seed(0)
    right, old_w, old_b = (torch.randn(4, 8, generator=g) for _ in range(3))
    assert nb07.stale_input(right.to(torch.bfloat16), {"w": old_w, "b": old_b}) is None
    assert nb07.stale_input(old_b.to(torch.bfloat16), {"w": old_w, "b": old_b}) == "b"
    line = nb07.stale_copy_line("request 3 (batch 2, a shape seen before)", "w")
    assert line.startswith("request 3 (batch 2, a shape seen before): after new values were written into w (the same "
                           "tensor), your graph still computed with the old ones: it reads a copy of it")
    assert line.endswith("bind w itself and do the work inside the graph")
    assert "bind w and b themselves" in nb07.stale_copy_line("at B×S = 2×16", "w and b")


def _serve_tensors(batch=2, dtype=torch.bfloat16):
    x = torch.randn(batch, nb07.SERVE_C, nb07.SERVE_HW, nb07.SERVE_HW).to(dtype).to(memory_format=torch.channels_last)
    w = torch.randn(nb07.SERVE_K, nb07.SERVE_C, 3, 3).to(dtype).to(memory_format=torch.channels_last)
    b = torch.randn(1, nb07.SERVE_K, 1, 1).to(dtype)
    y = torch.empty(batch, nb07.SERVE_K, nb07.SERVE_HW, nb07.SERVE_HW, dtype=dtype)
    y = y.to(memory_format=torch.channels_last)
    return x, w, b, y


def test_require_output_holds_serve_to_the_statements_y():
    """A new NHWC tensor of x's dtype and shape per request: fp32, NCHW, a wrong shape, x itself or an earlier
    request's y each fail in one line naming the request's y."""
    x, w, b, y = _serve_tensors()
    nb07.require_output(y, x, w, b, [])
    assert nb07.nhwc_strides(tuple(y.shape)) == y.stride()
    cases = [(y.float(), [], r"^y is float32, but the statement asks for bfloat16 \(x's dtype\)"),
             (y.contiguous(), [], r"^y has strides \(1024, 64, 8, 1\), want \(1024, 1, 128, 16\)"),
             (y[:1], [], r"^y has shape \(1, 16, 8, 8\), want \(2, 16, 8, 8\)"),
             (y, [("request 1 (batch 2)", y)], r"^y shares memory with the y of request 1 \(batch 2\): return a new "
                                               r"tensor — give every request a y of its own")]
    for out, earlier, match in cases:
        with pytest.raises(X.Wrong, match=match):
            nb07.require_output(out, x, w, b, earlier)


def test_a_wrong_serve_output_is_traced_to_an_old_x_or_old_weights():
    from grader import inputs

    x1, w, b, _ = _serve_tensors(dtype=torch.float32)
    x3 = torch.randn_like(x1)
    old = dict(w=w.clone(), b=b.clone())
    w.mul_(-1.0)
    what = "request 3 (batch 2, a shape seen before)"
    from_x1 = inputs.conv_reference(dict(x=x1, w=w, b=b)).float()
    line = nb07._serve_diagnosis(what, from_x1, x3, w, b, old, [("request 1", x1)])
    assert line.startswith(f"{what}: y is the result for the x of request 1: the graph kept for this shape still "
                           "reads the x it was built with")
    from_old_w = inputs.conv_reference(dict(x=x3, w=old["w"], b=b)).float()
    assert nb07._serve_diagnosis(what, from_old_w, x3, w, b, old, []) == nb07.stale_copy_line(what, "w")
    line = nb07._serve_diagnosis(what, torch.zeros_like(from_x1), x3, w, b, old, [("request 1", x1)])
    assert line.startswith(f"{what}: wrong output (rel err")


def test_the_checkers_are_registered():
    for key in KEYS:
        assert X.checker_for(key)


# ------------------------------------------------------------------ CPU: the notebook's cells


# ------------------------------------------------------------------ GPU: wrong answers to exercise 1
def _projection(x, w, b, y, cache, *, dynamic=True, bias=True):
    c = H.load_cudnn()
    options = {} if cache is None else dict(kernel_cache=cache, is_dynamic_shape_enabled=dynamic)
    g = c.pygraph(io_data_type=x.dtype, intermediate_data_type=torch.float32, compute_data_type=torch.float32,
                  handle=H.get_handle(), **options)
    io = H.GraphIO(g, dtype=x.dtype)
    out = g.matmul(io.input("x", x), io.input("w", w))
    if bias:
        out = g.add(out, io.input("b", b))
    io.output("y", out, y)
    H.build(g)
    return g, io


def projection_without_cache(x, w, b, y, cache):
    return _projection(x, w, b, y, None)


def projection_with_its_own_cache(x, w, b, y, cache):
    return _projection(x, w, b, y, H.load_cudnn().create_kernel_cache())


def projection_without_dynamic_shapes(x, w, b, y, cache):
    return _projection(x, w, b, y, cache, dynamic=False)


def projection_without_bias(x, w, b, y, cache):
    return _projection(x, w, b, y, cache, bias=False)


def projection_into_its_own_buffer(x, w, b, y, cache):
    return _projection(x, w, b, torch.empty_like(y), cache)


_first = {}


def projection_built_once(x, w, b, y, cache):
    """Builds for the first call's tensors and hands that graph back every time."""
    if "graph" not in _first:
        _first["graph"] = _projection(x, w, b, y, cache)
    return _first["graph"]


# ------------------------------------------------------------------ GPU: wrong answers to exercise 2
def _conv_graph(x, w, b, y, cache):
    from helpers.recipes import conv_bias_relu

    options = {} if cache is None else dict(kernel_cache=cache, is_dynamic_shape_enabled=True)
    graph, io = conv_bias_relu.graph(dict(x=x, w=w, b=b, y=y), **options)
    H.build(graph)
    return graph, io


def _out(x, w):
    return torch.empty(x.shape[0], w.shape[0], *x.shape[2:], device=x.device,
                       dtype=x.dtype).to(memory_format=torch.channels_last)


def _run(graph, io, x, y):
    graph.execute(io.pack(x=x, y=y), H.workspace_for(graph), handle=H.get_handle())
    return y


def serve_never_keeps(x, w, b, graphs, cache):
    y = _out(x, w)
    return _run(*_conv_graph(x, w, b, y, cache), x, y)


def serve_rebuilds_and_replaces(x, w, b, graphs, cache):
    y = _out(x, w)
    graphs[tuple(x.shape)] = _conv_graph(x, w, b, y, cache)
    return _run(*graphs[tuple(x.shape)], x, y)


def serve_rebuilds_but_keeps_the_first(x, w, b, graphs, cache):
    y = _out(x, w)
    fresh = _conv_graph(x, w, b, y, cache)
    graphs.setdefault(tuple(x.shape), fresh)
    return _run(*fresh, x, y)


def serve_keyed_by_request(x, w, b, graphs, cache):
    y = _out(x, w)
    graphs[id(y)] = _conv_graph(x, w, b, y, cache)
    return _run(*graphs[id(y)], x, y)


def serve_one_key_for_all(x, w, b, graphs, cache):
    y = _out(x, w)
    if "graph" not in graphs:
        graphs["graph"] = _conv_graph(x, w, b, y, cache)
    return _run(*graphs["graph"], x, y)


def serve_without_cache(x, w, b, graphs, cache):
    y = _out(x, w)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w, b, y, None)
    return _run(*graphs[tuple(x.shape)], x, y)


def serve_builds_but_computes_with_torch(x, w, b, graphs, cache):
    """The loophole: the graphs are built and kept as asked, and y comes from torch."""
    from helpers.recipes import conv_bias_relu

    y = _out(x, w)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w, b, y, cache)
    return y.copy_(conv_bias_relu.reference(dict(x=x, w=w, b=b)).to(y.dtype))


def serve_one_output_per_shape(x, w, b, graphs, cache):
    """Keeps one y per shape with its graph and returns it every time: a repeated shape overwrites the output an
    earlier request was given."""
    shape = tuple(x.shape)
    if shape not in graphs:
        y = _out(x, w)
        graphs[shape] = (*_conv_graph(x, w, b, y, cache), y)
    graph, io, y = graphs[shape]
    return _run(graph, io, x, y)


def serve_by_torch(x, w, b, graphs, cache):
    import torch.nn.functional as F

    y = _out(x, w)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w, b, y, cache)
    return y.copy_(torch.relu(F.conv2d(x, w, b.reshape(-1), padding=1)))


def serve_storing_its_pair_again(x, w, b, graphs, cache):
    """A right answer: the same (graph, io) stored again under its key (a new tuple, the same graph)."""
    y = _out(x, w)
    shape = tuple(x.shape)
    if shape not in graphs:
        graphs[shape] = _conv_graph(x, w, b, y, cache)
    graph, io = graphs[shape]
    graphs[shape] = (graph, io)
    return _run(graph, io, x, y)


def projection_by_torch_graph_into_scratch(x, w, b, y, cache):
    """y by torch; the dynamic graph it returns writes a scratch buffer (the checker runs it: y stays unwritten)."""
    y.copy_(x @ w + b)
    return _projection(x, w, b, torch.empty_like(y), cache)


# ------------------------------------------------------------------ GPU: wrong answers to exercise 3
def restore_by_warming_a_new_cache(text):
    """The text ignored: a new cache warmed by building a conv on it (it then refuses a second load)."""
    from helpers.recipes import conv_bias_relu
    from grader import nb07

    fresh = H.load_cudnn().create_kernel_cache()
    t = conv_bias_relu.make_tensors(nb07.RESTORE_BUILT, nb07.SERVE_C, nb07.SERVE_HW, nb07.SERVE_K,
                                    dtype=H.working_dtype(), seed=21)
    graph, _ = conv_bias_relu.graph(t, kernel_cache=fresh, is_dynamic_shape_enabled=True)
    H.build(graph)
    return fresh


def restore_into_another_cache(text):
    loaded = H.load_cudnn().create_kernel_cache()
    loaded.deserialize(text)
    return H.load_cudnn().create_kernel_cache()


def restore_into_nothing(text):
    return H.load_cudnn().create_kernel_cache()


def restore_returns_the_text(text):
    return text


def restore_returns_nothing(text):
    return None


WRONG = [
    ("07.build_projection", projection_by_torch_graph_into_scratch, "y was never written at B×S = 2×16"),
    ("07.serve", serve_one_output_per_shape, "request 3 (batch 2, a shape seen before): y shares memory with the y of "
                                             "request 1 (batch 2): return a new tensor"),
    ("07.serve", serve_by_torch, "request 1 (batch 2): torch computed y (aten.convolution"),
    ("07.restore_cache", restore_by_warming_a_new_cache, "restore_cache built 1 graph(s): restoring is loading"),
    ("07.restore_cache", restore_into_another_cache, "the cache you returned was not loaded from the text"),
    ("07.build_projection", projection_without_cache, "the graph was built without a kernel cache"),
    ("07.build_projection", projection_with_its_own_cache, "the graph was built with a kernel cache of its own"),
    ("07.build_projection", projection_without_bias, "the output ignores the bias"),
    ("07.build_projection", projection_into_its_own_buffer, "y was never written at B×S = 2×16"),
    ("07.build_projection", projection_built_once, "correct at B×S = 2×16 but wrong at B×S = 3×40"),
    ("07.serve", serve_never_keeps, "graphs holds 0 entries after 1 distinct batch size:"),
    ("07.serve", serve_rebuilds_and_replaces, "request 3 (batch 2, a shape seen before) replaced the graph kept"),
    ("07.serve", serve_rebuilds_but_keeps_the_first, "request 3 (batch 2, a shape seen before): 3 graphs built so far"),
    ("07.serve", serve_keyed_by_request, "graphs holds 3 entries after 2 distinct batch sizes:"),
    ("07.serve", serve_one_key_for_all, "your code raised ValueError: x: replacement is"),
    ("07.serve", serve_without_cache, "the graph was built without a kernel cache"),
    ("07.serve", serve_builds_but_computes_with_torch, "request 1 (batch 2): torch computed y (aten.convolution"),
    ("07.restore_cache", restore_into_nothing, "the cache you returned was not loaded from the text"),
    ("07.restore_cache", restore_returns_the_text, "restore_cache returned a string"),
]


@requires_gpu
@wrong_answers(WRONG)
def test_gpu_a_wrong_answer_is_rejected_with_its_reason(key, answer, message):
    torch.backends.cuda.matmul.allow_tf32 = False
    _first.clear()
    got = refused(key, answer)
    assert message in got, got


# ------------------------------------------------------------------ GPU: wrong answers of the issue-50 classes
def projection_binds_a_copy_of_w(x, w, b, y, cache):
    """Inputs read once: w copied when the graph is built (right on the first execute, blind to new weights)."""
    return _projection(x, w.clone(), b, y, cache)


def _projection_cached_per_shape():
    graphs = {}

    def projection_rebinds_only_x_and_y(x, w, b, y, cache):
        """Inputs read once: a graph kept per shape, handed back with this call's x and y but the w and b it was
        built with."""
        key = tuple(x.shape)
        if key not in graphs:
            graphs[key] = _projection(x, w, b, y, cache)
        graph, io = graphs[key]
        return graph, io.pack(x=x, y=y)

    return projection_rebinds_only_x_and_y


projection_rebinds_only_x_and_y = _projection_cached_per_shape()


def projection_zeroed_matmul_plus_a_threads_product(x, w, b, y, cache):
    """Work where the tracer does not look: the graph's matmul is multiplied by zero and x @ w comes from a worker
    thread, added in by the graph as an input of its own."""
    import threading

    product = torch.empty_like(y)
    worker = threading.Thread(target=lambda: product.copy_(x @ w))
    worker.start()
    worker.join()
    c = H.load_cudnn()
    g = c.pygraph(io_data_type=x.dtype, intermediate_data_type=torch.float32, compute_data_type=torch.float32,
                  handle=H.get_handle(), kernel_cache=cache, is_dynamic_shape_enabled=True)
    io = H.GraphIO(g, dtype=x.dtype)
    zeroed = g.mul(g.matmul(io.input("x", x), io.input("w", w)), io.input("zero", torch.zeros_like(b)))
    io.output("y", g.add(g.add(zeroed, io.input("product", product)), io.input("b", b)), y)
    H.build(g)
    return g, io


def serve_binds_a_copy_of_w(x, w, b, graphs, cache):
    """Inputs read once: each graph built on a copy of w (right until the weights change)."""
    y = _out(x, w)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w.clone(), b, y, cache)
    return _run(*graphs[tuple(x.shape)], x, y)


def serve_rebinds_only_y(x, w, b, graphs, cache):
    """Inputs read once: a repeated shape's graph still reads the x it was built with."""
    y = _out(x, w)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w, b, y, cache)
    graph, io = graphs[tuple(x.shape)]
    graph.execute(io.pack(y=y), H.workspace_for(graph), handle=H.get_handle())
    return y


def serve_in_float32(x, w, b, graphs, cache):
    """The output's contract: a float32 y for a bf16 x (cuDNN writes it, the values are right)."""
    y = torch.empty(x.shape[0], w.shape[0], *x.shape[2:], device=x.device,
                    dtype=torch.float32).to(memory_format=torch.channels_last)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w, b, y, cache)
    return _run(*graphs[tuple(x.shape)], x, y)


def serve_returns_an_nchw_copy(x, w, b, graphs, cache):
    """The output's contract: the right values, returned as a contiguous NCHW copy of the graph's NHWC output."""
    return X.solution("07.serve")(x, w, b, graphs, cache).contiguous()


def serve_by_torch_in_a_thread(x, w, b, graphs, cache):
    """Work where the tracer does not look: the graph runs into a scratch buffer, y comes from torch in a thread."""
    import threading
    import torch.nn.functional as F

    y, scratch = _out(x, w), _out(x, w)
    if tuple(x.shape) not in graphs:
        graphs[tuple(x.shape)] = _conv_graph(x, w, b, scratch, cache)
    _run(*graphs[tuple(x.shape)], x, scratch)
    worker = threading.Thread(target=lambda: y.copy_(torch.relu(F.conv2d(x, w, b.reshape(-1), padding=1))))
    worker.start()
    worker.join()
    return y


def serve_on_a_side_stream_never_joined(x, w, b, graphs, cache):
    """Streams: the graph executes on a side stream the caller's stream never waits for."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        return X.solution("07.serve")(x, w, b, graphs, cache)


def _restore_memoized():
    kept = []

    def restore_keeps_its_first_cache(text):
        """Inputs read once: the first call's cache handed back for every later text."""
        if not kept:
            kept.append(H.load_cudnn().create_kernel_cache())
            kept[0].deserialize(text)
        return kept[0]

    return restore_keeps_its_first_cache


restore_keeps_its_first_cache = _restore_memoized()

CLASSES = [
    ("07.build_projection", projection_binds_a_copy_of_w,
     "at B×S = 2×16: after new values were written into w (the same tensor), your graph still computed with the old "
     "ones: it reads a copy of it"),
    ("07.build_projection", projection_rebinds_only_x_and_y,
     "correct at B×S = 2×16 but wrong at B×S = 2×16 again (new x, w, b and y)"),
    ("07.build_projection", projection_zeroed_matmul_plus_a_threads_product,
     "at B×S = 2×16: after new values were written into x (the same tensor), your graph still computed with the old "
     "ones"),
    ("07.serve", serve_binds_a_copy_of_w,
     "request 1 (batch 2): your graph, run again by the checker on new x, w, b (new buffers, bound by UID, your code "
     "not called), does not compute y"),
    ("07.serve", serve_rebinds_only_y,
     "request 3 (batch 2, a shape seen before): y is the result for the x of request 1: the graph kept for this shape "
     "still reads the x it was built with"),
    ("07.serve", serve_in_float32, "request 1 (batch 2): y is float32, but the statement asks for "),
    ("07.serve", serve_returns_an_nchw_copy,
     "request 1 (batch 2): y has strides (1024, 64, 8, 1), want (1024, 1, 128, 16)"),
    ("07.serve", serve_by_torch_in_a_thread,
     "request 1 (batch 2): y was last written by torch (aten._to_copy), not by a cuDNN graph"),
    ("07.serve", serve_on_a_side_stream_never_joined,
     "request 1 (batch 2): your graph ran on a side stream (stream "),
    ("07.restore_cache", restore_keeps_its_first_cache,
     "called again with another saved text, restore_cache returned the cache of its first call"),
]


@requires_gpu
@wrong_answers(CLASSES)
def test_gpu_a_wrong_answer_of_each_class_is_rejected(key, answer, message):
    torch.backends.cuda.matmul.allow_tf32 = False
    got = refused(key, answer)
    assert got.startswith(message), got


@requires_gpu
def test_gpu_a_static_projection_is_rejected():
    """kernel_cache without is_dynamic_shape_enabled: named by the option check (or refused by cuDNN itself)."""
    got = refused("07.build_projection", projection_without_dynamic_shapes)
    assert "is_dynamic_shape_enabled=True" in got or got.startswith("your code raised")


@requires_gpu
def test_gpu_returning_nothing_is_not_done():
    assert X.exercise("07.restore_cache", restore_returns_nothing, quiet=True).status == "not done"


@requires_gpu
def test_gpu_storing_the_same_graph_again_under_its_key_is_a_right_answer():
    verdict = X.exercise("07.serve", serve_storing_its_pair_again, quiet=True)
    if verdict.status == "skipped":
        pytest.skip(verdict.message)
    assert verdict.status == "passed", verdict.message


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) 07's checkers build cuDNN graphs and caches before they call the answer
DECIDED_BY = {
    "07.build_projection": "test_options_problem_names_the_missing_or_foreign_cache_and_dynamic_shapes",
    "07.serve": "test_outputs_intact_refuses_an_output_a_later_request_overwrote",
    "07.restore_cache": "test_restored_from_wants_the_given_text_loaded_and_nothing_built",
}
