"""What an exercise's statement promises about its outputs, checked in one line each, and a procedure called again.

``require_contract`` checks one output against the statement: a tensor, its shape, dtype, strides and device, and
(``apart_from``) that it is a new tensor sharing no memory with the tensors named there::

    require_contract(out, "y", shape=x.shape, dtype=x.dtype, strides="contiguous", apart_from=dict(x=x))

``call_each`` calls an answer that is a procedure (serving, caches, plan choice) several times, each call with new
values in new buffers, checks every call, and then checks that no call's output was changed by a later one::

    calls = call_each(answer, make_args=lambda i: dict(x=new_x(i)), outputs=lambda args, got: dict(y=got),
                      check=lambda i, args, outs: grade_output(outs["y"], ref(args["x"]), {}), times=3)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from . import Wrong


def _shape(value) -> tuple:
    return tuple(int(v) for v in value)


def _dtype_name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def contiguous_strides(shape) -> tuple:
    """The strides of a contiguous (row-major) tensor of ``shape``."""
    strides, step = [], 1
    for size in reversed(_shape(shape)):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _span(t: torch.Tensor) -> tuple[int, int] | None:
    """The bytes ``t``'s elements lie in: ``(first, end)``, or None for an empty tensor or one without memory."""
    try:
        start = t.data_ptr()
    except Exception:   # no memory (meta)
        return None
    if not start or t.numel() == 0:
        return None
    last = sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))
    return start, start + (last + 1) * t.element_size()


def shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the bytes two tensors' elements lie in overlap (the same buffer, a view of the other, overlapping
    slices of one block; two slices of one block side by side do not)."""
    if a.device != b.device:
        return False
    sa, sb = _span(a), _span(b)
    return sa is not None and sb is not None and sa[0] < sb[1] and sb[0] < sa[1]


def require_contract(out, name: str, *, shape=None, dtype=None, strides=None, device=None, apart_from=None,
                     dtype_why: str = "", how: str = "") -> None:
    """``Wrong`` in one line unless ``out`` keeps the statement's contract: a torch tensor; of ``shape``; of ``dtype``
    (``dtype_why`` says whose, e.g. "x's dtype"); with ``strides`` (a tuple, or ``"contiguous"``); on ``device`` (a
    type, "cuda"); and, for each ``name -> tensor`` in ``apart_from``, sharing no memory with it (a new tensor)."""
    tail = f" — {how}" if how else ""
    if not isinstance(out, torch.Tensor):
        raise Wrong(f"{name} should be a torch tensor, got {type(out).__name__}{tail}")
    if shape is not None and tuple(out.shape) != _shape(shape):
        raise Wrong(f"{name} has shape {tuple(out.shape)}, want {_shape(shape)}{tail}")
    if dtype is not None and out.dtype != dtype:
        whose = f" ({dtype_why})" if dtype_why else ""
        raise Wrong(f"{name} is {_dtype_name(out.dtype)}, but the statement asks for {_dtype_name(dtype)}{whose}: "
                    f"store the output in that dtype{tail}")
    if device is not None and out.device.type != device:
        raise Wrong(f"{name} is on {out.device.type}, want {device}{tail}")
    if strides is not None:
        want = contiguous_strides(out.shape) if strides == "contiguous" else _shape(strides)
        have = tuple(out.stride())
        significant = [i for i, size in enumerate(out.shape) if size != 1]   # a size-1 dimension's stride is free
        if any(have[i] != want[i] for i in significant):
            layout = "a contiguous tensor" if strides == "contiguous" else "the statement's layout"
            raise Wrong(f"{name} has strides {have}, want {want} ({layout}){tail}")
    for other, tensor in (apart_from or {}).items():
        if isinstance(tensor, torch.Tensor) and shares_memory(out, tensor):
            raise Wrong(f"{name} shares memory with {other}: return a new tensor{tail}")


@dataclass
class Call:
    """One call of a procedure: its number (from 1), what it was given, what it returned, its outputs by name
    and a copy of each as it was when checked."""

    number: int
    args: dict
    returned: Any
    outputs: dict
    kept: dict = field(default_factory=dict)


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    return []


def call_each(answer: Callable, make_args: Callable[[int], dict], outputs: Callable[[dict, Any], dict],
              check: Callable[[int, dict, dict], Any], *, times: int = 3, around=None, intact: bool = True) -> list:
    """Call ``answer(**make_args(i))`` for i = 0 .. ``times``-1 — ``make_args`` gives new values in new buffers each
    time (a ``RuntimeError`` if a tensor shares memory with an earlier call's: the checker's own mistake) — inside
    ``around()`` where given (``trace.answer``); after each call ``outputs(args, returned)`` names its outputs and
    ``check(i, args, outputs)`` grades them (raising ``Wrong``). Then ``Wrong`` in one line where two calls returned
    the same tensor, or (``intact``) a later call changed an earlier call's output. Returns the ``Call``s."""
    calls: list[Call] = []
    for i in range(times):
        args = make_args(i)
        for earlier in calls:
            for t in _tensors(args):
                if any(shares_memory(t, e) for e in _tensors(earlier.args)):
                    raise RuntimeError(f"call_each: call {i + 1}'s arguments share memory with call {earlier.number}'s")
        if around is not None:
            with around():
                returned = answer(**args)
        else:
            returned = answer(**args)
        outs = outputs(args, returned)
        for earlier in calls:
            for name, out in outs.items():
                before = earlier.outputs.get(name)
                if isinstance(out, torch.Tensor) and isinstance(before, torch.Tensor) and shares_memory(out, before):
                    raise Wrong(f"call {i + 1} returned the same {name} as call {earlier.number} (the same memory): "
                                f"each call must give a new {name}, or the caller's earlier result is overwritten")
        check(i, args, outs)
        kept = {n: o.detach().clone() for n, o in outs.items() if isinstance(o, torch.Tensor)}
        calls.append(Call(i + 1, args, returned, outs, kept))
    if intact:
        for call in calls[:-1]:
            for name, copy in call.kept.items():
                if not torch.equal(call.outputs[name].detach(), copy) and not (
                        copy.is_floating_point() and torch.equal(call.outputs[name].isnan(), copy.isnan())
                        and torch.equal(torch.nan_to_num(call.outputs[name].detach()), torch.nan_to_num(copy))):
                    raise Wrong(f"call {call.number}'s {name} changed during a later call: a later call wrote into "
                                f"it — give each call its own output")
    return calls
