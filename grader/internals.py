"""Every reach of the grader into the cuDNN frontend's and torch's private parts, and every method it wraps.

Grading follows what an answer runs by reading a few attributes the libraries keep for themselves and by wrapping
a few of their methods while an answer runs. Each such assumption is one row of ``ASSUMPTIONS``, with the CPU check
that it still holds: ``tests/test_grader_internals.py`` runs every row, so an upgrade that breaks one fails there in
one line naming the library, its version and what grading loses (``broken``), instead of all 21 graders failing on a
GPU. Nothing else in ``grader/`` names a private part of cudnn or torch (a test reads the package for it).
"""
from __future__ import annotations

import functools
import importlib
import inspect
import re
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Callable, Iterator

import torch

from helpers.libcudnn import load_cudnn

FRONTEND, TORCH = "nvidia-cudnn-frontend", "torch"

# The methods wrapped while an answer is graded (each defined on its class itself, so that it can be put back).
# cudnn.pygraph's executes, with the parameters that follow the variant pack, in their positional order:
EXECUTES = {"execute": ("workspace", "handle", "override_uids", "override_shapes", "override_strides", "tensor_uids"),
            "execute_plan_at_index": ("workspace", "index", "handle")}
OVERRIDES = ("override_uids", "override_shapes", "override_strides")   # execute's runtime-geometry arguments
BUILDS = {"validate": "validate", "build_plans": "build", "build_plan_at_index": "build"}   # pygraph: what it logs
CAPTURES = ("capture_begin", "capture_end", "replay")   # torch.cuda.CUDAGraph
CACHE_LOAD = "deserialize"                              # the frontend's kernel cache

# Torch operators that only move data though their schemas do not say so (a copy returns a new tensor, as compute
# does; a fill or a random draw in place reads its destination): never "torch computed the answer".
COPIES = frozenset("""copy copy_ _copy_from _copy_from_and_resize _to_copy clone lift lift_fresh_copy _unsafe_view
    cat stack fill fill_ zero_ linspace normal normal_ uniform_ random_ bernoulli_ exponential_ record_stream""".split())
# Results that alias their input yet are not its values (a lazy negation or conjugation, a sum to a size).
NOT_VIEWS = frozenset({"_neg_view", "_conj", "conj", "_grad_sum_to_size", "coalesce"})
# Full overwrites: the destination's old contents do not flow into the result.
OVERWRITES = frozenset({"copy_", "fill_", "zero_", "_copy_from", "_copy_from_and_resize", "set_"})


# ---------------------------------------------------------------- the cuDNN frontend
def frontend():
    """The ``cudnn`` module (loaded without a GPU: graphs construct up to ``validate()``)."""
    return load_cudnn(need_gpu=False)


def graph_classes() -> tuple:
    """The graph classes recorded by default: ``cudnn.pygraph`` (tests pass stand-ins)."""
    return (frontend().pygraph,)


def bound_inputs(graph) -> dict:
    """``{uid: buffer}`` the graph binds itself: a torch tensor handed to an op instead of a graph tensor."""
    return dict(getattr(graph, "_data_bindings", None) or {})


def selected_plan(graph):
    """The plan index a plain ``execute()`` runs, or None where unknown."""
    return getattr(graph, "_plan_index", None)


def graph_handle(graph):
    """The handle ``graph`` was made with (an execute given none runs on it), or None."""
    return getattr(graph, "_handle", None)


def handle_stream(handle) -> int | None:
    """The stream cuDNN's own handle is bound to, read from the backend (``cudnnGetStream``), not from the Python
    ``Handle.stream`` attribute, which an answer can assign without telling cuDNN. None for a stand-in or a
    destroyed handle. (A backend plan launches on this stream; the graded graphs run backend plans.)"""
    backend = getattr(handle, "backend_handle", None)
    if not isinstance(backend, int):
        return None
    return int(frontend()._pybind_module.get_stream(backend))


def stream_attribute(handle) -> int | None:
    """The stream the Python ``cudnn.Handle`` says it is bound to (what ``cudnn.get_stream`` returns)."""
    stream = getattr(handle, "stream", None)
    return stream if isinstance(stream, int) else None


def default_handle_stream() -> int | None:
    """The stream of the frontend's default handle, which an execute with no handle (on a graph made without one)
    runs on; None without a GPU."""
    try:
        return int(frontend()._pybind_module.get_stream(frontend()._pygraph._default_backend_handle()))
    except Exception:  # no driver, no device
        return None


def execute_stream(graph, handle) -> int | None:
    """The stream an execute given ``handle`` (None: the graph's own, else the frontend's default) launched on,
    as cuDNN's backend has it; None where unknown."""
    handle = handle if handle is not None else graph_handle(graph)
    if handle is None:
        return default_handle_stream() if isinstance(graph, graph_classes()) else None
    return handle_stream(handle)


def bind_stream(handle, stream: int) -> None:
    """Bind ``handle`` to ``stream`` in cuDNN's backend and in its Python attribute, even where the attribute already
    says ``stream`` (``cudnn.set_stream`` then skips the backend): the checker's way to put a handle right that an
    answer left with an assigned attribute."""
    frontend()._pybind_module._raw_set_stream(handle.backend_handle, int(stream))
    handle.stream = int(stream)


def graph_options(graph) -> dict | None:
    """The options ``graph`` was made with (``kernel_cache``, ``is_dynamic_shape_enabled``, ...), or None where they
    cannot be read."""
    options = getattr(graph, "_cpp_graph_kwargs", None)
    return options if isinstance(options, dict) else None


def execute_arguments(name: str, args: tuple, kwargs: dict) -> dict:
    """What a call of the execute method ``name`` passed after its variant pack, by parameter name."""
    return {**dict(zip(EXECUTES[name], args)), **kwargs}


@functools.lru_cache(maxsize=None)
def kernel_cache_class():
    """The class ``cudnn.create_kernel_cache()`` returns; without libcudnn (no cache can be made), the class its
    signature names; None if neither."""
    module = frontend()
    try:
        return type(module.create_kernel_cache())
    except Exception:  # "Unable to find symbol cudnnGetVersion": read the class off the signature
        for signature in getattr(module.create_kernel_cache, "__nb_signature__", ()):
            found = re.search(r"-> ([\w.]+)\.(\w+)", signature[0])
            if found:
                return getattr(importlib.import_module(found[1]), found[2], None)
        return None


# ---------------------------------------------------------------- torch
def cuda_graph_classes() -> tuple:
    return (torch.cuda.CUDAGraph,) if hasattr(torch.cuda, "CUDAGraph") else ()


def gpu_sleep(cycles: int) -> None:
    """A kernel that keeps the current stream busy for ``cycles`` GPU clock cycles."""
    torch.cuda._sleep(cycles)


def dispatch_mode(seen: Callable):
    """A context manager inside which torch calls ``seen(func, args, kwargs, out)`` after each operator it runs,
    on any device."""
    from torch.utils._python_dispatch import TorchDispatchMode   # here: a torch without it fails one test, not imports

    class Seen(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            seen(func, args, kwargs, out)
            return out

    return Seen()


@dataclass(frozen=True)
class Op:
    """What grading reads of a torch operator: ``name`` as a message shows it ("aten.bmm"), ``base`` ("bmm"),
    ``arguments`` as (name, written, keyword-only) and ``aliased`` per result (a view or the in-place argument)."""

    name: str
    base: str
    arguments: tuple
    aliased: tuple
    free: bool
    pointwise: bool
    overwrites: bool
    shape_only: bool    # reads a tensor's shape, not its values (``*_like``, ``new_*``)


@functools.lru_cache(maxsize=None)
def op(func) -> Op:
    """``func`` (an operator overload) as grading reads it. Free (never "torch computed the answer"): a copy or fill
    of ``COPIES``; a shape-only factory (``*_like``, ``new_*``); an operator reading no tensor but an out= buffer; a
    view (a result aliasing an input it does not write, but ``NOT_VIEWS``); an ``inplace_view``; one with no tensor
    result that writes nothing (``.item()``, ``equal``)."""
    schema = func._schema
    base = schema.name.split("::")[-1]
    written = [a.alias_info is not None and a.alias_info.is_write for a in schema.arguments]
    tensors = ["Tensor" in str(a.type) for a in schema.arguments]   # Tensor, Tensor?, Tensor[]
    reads = any(t and not (w and a.kwarg_only) for a, t, w in zip(schema.arguments, tensors, written))
    aliased = tuple(r.alias_info is not None for r in schema.returns)
    view = base not in NOT_VIEWS and any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
    nothing = not any(written) and not any("Tensor" in str(r.type) for r in schema.returns)
    tags = set(getattr(func, "tags", ()))
    shape_only = base.endswith("_like") or base.startswith("new_")
    free = base in COPIES or shape_only or not reads or view or torch.Tag.inplace_view in tags or nothing
    arguments = tuple((a.name, w, a.kwarg_only) for a, w in zip(schema.arguments, written))
    return Op(f"aten.{base}", base, arguments, aliased, free, torch.Tag.pointwise in tags, base in OVERWRITES,
              shape_only)


# ---------------------------------------------------------------- wrapping methods
@contextmanager
def wrapped(wraps) -> Iterator[int]:
    """For the block, each ``(cls, name, make)`` in ``wraps`` puts ``make(original)`` in place of ``cls.name`` where
    ``cls`` defines it itself (a test's stand-in defines few); all come back on leaving, whatever happens inside.
    Yields how many were wrapped."""
    saved = []
    try:
        for cls, name, make in wraps:
            original = cls.__dict__.get(name)
            if original is not None:
                saved.append((cls, name, original))
                setattr(cls, name, functools.wraps(original)(make(original)))
        yield len(saved)
    finally:
        for cls, name, original in reversed(saved):
            setattr(cls, name, original)


# ---------------------------------------------------------------- the assumptions, each with its CPU check
def _binds_itself() -> bool:
    graph, x = frontend().pygraph(), torch.empty(2, 3, 4, device="meta")
    graph.relu(x)
    return any(buffer is x for buffer in bound_inputs(graph).values())


def _options_kept() -> bool:
    cache = object()
    options = graph_options(frontend().pygraph(kernel_cache=cache, is_dynamic_shape_enabled=True)) or {}
    return options.get("kernel_cache") is cache and options.get("is_dynamic_shape_enabled") is True


def _handle_kept() -> bool:
    handle = frontend().Handle(None, 0, 7)
    return handle.stream == 7 and graph_handle(frontend().pygraph(handle=handle)) is handle


def _signature(function) -> str:
    return " ".join(str(s[0]) for s in getattr(function, "__nb_signature__", ()))


def _backend_stream() -> bool:
    binding, module = frontend()._pybind_module, frontend()._pygraph
    handle = frontend().Handle(5, 0, 7)
    return ("get_stream(arg: int, /) -> int" in _signature(binding.get_stream)
            and "_raw_set_stream(handle: int, stream: int)" in _signature(binding._raw_set_stream)
            and handle.backend_handle == 5 and stream_attribute(handle) == 7
            and callable(module._default_backend_handle)
            and not inspect.signature(module._default_backend_handle).parameters)


def _defines(classes: tuple, names) -> bool:
    return all(cls is not None and name in vars(cls) for cls in classes for name in names) and bool(classes)


def _executes() -> bool:
    pygraph = frontend().pygraph
    return _defines((pygraph,), [*EXECUTES, *BUILDS]) and all(
        list(inspect.signature(getattr(pygraph, name)).parameters)[2:2 + len(after)] == list(after)
        for name, after in EXECUTES.items())


def _captures() -> bool:
    source = inspect.getsource(torch.cuda.graph)   # the capture learners write goes through the wrapped methods
    return _defines(cuda_graph_classes(), CAPTURES) and all(f".{name}(" in source for name in CAPTURES[:2])


def _sees_operators() -> bool:
    seen, x = [], torch.ones(2)
    with dispatch_mode(lambda func, args, kwargs, out: seen.append(op(func).name)):
        torch.relu(x)
    return seen == ["aten.relu"]


def _reads_schemas() -> bool:
    aten = torch.ops.aten
    copy, mm_out, view = op(aten.copy_.default), op(aten.mm.out), op(aten.view.default)
    return (copy.arguments[0][1:] == (True, False) and not copy.arguments[1][1] and view.aliased == (True,)
            and mm_out.arguments[-1][1:] == (True, True) and view.free and not mm_out.free)


def _sleeps() -> bool:
    return callable(getattr(torch.cuda, "_sleep", None))


# key: (library, how an upgrade that breaks it reads, what grading loses, its check on the CPU)
ASSUMPTIONS = {
    "data_bindings": (FRONTEND, "pygraph has no _data_bindings", "the graders cannot see which tensors an execute bound",
                      _binds_itself),
    "plan_index": (FRONTEND, "pygraph has no _plan_index", "the graders cannot tell which plan a plain execute() ran",
                   lambda: selected_plan(frontend().pygraph()) == 0),
    "graph_handle": (FRONTEND, "pygraph keeps no _handle, or cudnn.Handle no stream", "the graders cannot tell which "
                     "stream an execute ran on", _handle_kept),
    "backend_stream": (FRONTEND, "the compiled module has no get_stream(int) -> int or _raw_set_stream(handle, "
                       "stream), cudnn.Handle no backend_handle, or _pygraph no _default_backend_handle()",
                       "the graders cannot read the stream cuDNN's handle is really bound to", _backend_stream),
    "graph_options": (FRONTEND, "pygraph keeps no _cpp_graph_kwargs with kernel_cache and is_dynamic_shape_enabled",
                      "07's checkers cannot read how a graph was made", _options_kept),
    "graph_methods": (FRONTEND, f"pygraph does not define {', '.join([*EXECUTES, *BUILDS])} itself, or its executes "
                      "take other parameters after the variant pack", "the graders cannot record an answer's executes "
                      "and builds", _executes),
    "kernel_cache": (FRONTEND, f"create_kernel_cache() names no class with {CACHE_LOAD}",
                     "07.restore_cache cannot see a cache loaded", lambda: _defines((kernel_cache_class(),), [CACHE_LOAD])),
    "cuda_graph": (TORCH, f"torch.cuda.CUDAGraph does not define {', '.join(CAPTURES)}, or torch.cuda.graph captures "
                   "without them", "08's checkers cannot see a capture or a replay", _captures),
    "gpu_sleep": (TORCH, "torch.cuda has no _sleep", "01.run_on_stream cannot hold a stream behind a GPU wait", _sleeps),
    "dispatch_mode": (TORCH, "torch.utils._python_dispatch.TorchDispatchMode does not show each operator",
                      "the graders cannot see the torch operators an answer runs", _sees_operators),
    "op_schema": (TORCH, "an operator's _schema does not say which arguments it writes and which results alias them",
                  "the graders cannot tell what a torch operator read and wrote", _reads_schemas),
}


def holds(key: str) -> bool:
    """Whether assumption ``key`` holds here (a check that raises says it does not)."""
    try:
        return bool(ASSUMPTIONS[key][3]())
    except Exception:
        return False


def broken(key: str) -> str:
    """The one line for assumption ``key`` failing: ``library version: what broke: what grading loses``."""
    library, what, loses, check = ASSUMPTIONS[key]
    try:
        installed = version(library)
    except PackageNotFoundError:
        installed = "(not installed)"
    try:
        check()
        raised = ""
    except Exception as exc:   # the check itself failed: say how, in a few words
        raised = f" ({type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:100]})"
    return f"{library} {installed}: {what}{raised}: {loses}"
