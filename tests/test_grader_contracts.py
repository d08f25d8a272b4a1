"""grader/contracts.py on the CPU: an output's contract in one line, and a procedure called again with new buffers."""
import pytest
import torch

import grader as X
from grader.contracts import call_each, contiguous_strides, require_contract, shares_memory


def test_an_output_that_keeps_the_contract_passes():
    x = torch.randn(2, 3, 4, dtype=torch.bfloat16)
    y = torch.empty(2, 3, 4, dtype=torch.bfloat16)
    require_contract(y, "y", shape=x.shape, dtype=x.dtype, strides="contiguous", device="cpu", apart_from=dict(x=x))
    assert contiguous_strides((2, 3, 4)) == (12, 4, 1)


@pytest.mark.parametrize("out, kwargs, message", [
    ([1.0], dict(), "y should be a torch tensor, got list"),
    (torch.empty(2, 4), dict(shape=(2, 3)), "y has shape (2, 4), want (2, 3)"),
    (torch.empty(2, 3), dict(dtype=torch.bfloat16, dtype_why="x's dtype"),
     "y is float32, but the statement asks for bfloat16 (x's dtype): store the output in that dtype"),
    (torch.empty(3, 2).t(), dict(strides="contiguous"), "y has strides (1, 2), want (3, 1) (a contiguous tensor)"),
    (torch.empty(2, 3), dict(device="cuda"), "y is on cpu, want cuda"),
])
def test_each_broken_contract_is_said_in_one_line(out, kwargs, message):
    with pytest.raises(X.Wrong) as caught:
        require_contract(out, "y", **kwargs)
    assert str(caught.value) == message


def test_an_output_that_shares_memory_with_an_input_is_not_new():
    x = torch.randn(4, 4)
    with pytest.raises(X.Wrong, match=r"^y shares memory with x: return a new tensor — fix it$"):
        require_contract(x[1:], "y", apart_from=dict(x=x), how="fix it")
    assert shares_memory(x, x.view(16)) and not shares_memory(x, x.clone())


def test_a_size_one_dimensions_stride_is_free():
    require_contract(torch.empty(4, 1, 3).as_strided((4, 1, 3), (3, 99, 1)), "y", strides="contiguous")


def _args(i):
    return dict(x=torch.full((3,), float(i + 1)))


def _check(i, args, outs):
    if not torch.equal(outs["y"], 2 * args["x"]):
        raise X.Wrong(f"call {i + 1}: y is not 2 x")


def test_a_procedure_that_answers_each_call_anew_passes():
    calls = call_each(lambda x: 2 * x, _args, lambda args, got: {"y": got}, _check, times=3)
    assert [c.number for c in calls] == [1, 2, 3]


def test_a_procedure_that_caches_its_first_answer_fails_on_the_second_call():
    cache = {}

    def first_only(x):
        return cache.setdefault("y", 2 * x)

    with pytest.raises(X.Wrong, match=r"^call 2 returned the same y as call 1 \(the same memory\)"):
        call_each(first_only, _args, lambda args, got: {"y": got}, _check)


def test_a_procedure_that_writes_into_an_earlier_calls_output_fails():
    out = torch.empty(6)
    calls = iter([out[:3], out[3:], out[:3]])   # the third call reuses the first call's buffer, in a new view

    def reuses(x):
        return torch.mul(x, 2, out=next(calls))

    with pytest.raises(X.Wrong) as caught:
        call_each(reuses, _args, lambda args, got: {"y": got}, _check)
    assert str(caught.value).startswith("call 3 returned the same y as call 1")


def test_a_later_call_that_changes_an_earlier_output_in_place_fails():
    kept = []

    def rewrites_history(x):
        for earlier in kept:
            earlier.add_(1)
        kept.append(2 * x)
        return kept[-1]

    with pytest.raises(X.Wrong, match=r"^call 1's y changed during a later call"):
        call_each(rewrites_history, _args, lambda args, got: {"y": got}, _check, times=2)


def test_arguments_that_share_memory_across_calls_are_the_checkers_mistake():
    x = torch.ones(3)
    with pytest.raises(RuntimeError, match="call 2's arguments share memory with call 1's"):
        call_each(lambda x: 2 * x, lambda i: dict(x=x), lambda args, got: {"y": got}, _check, times=2)
