"""Every checker refuses an obviously wrong answer on a CPU-only machine, so a checker made to accept everything
fails CI, which has no GPU.

Where a checker can grade on the CPU (``grading_on("cpu")``: it makes its inputs there, and the answer needs no cuDNN
because torch does the work), the registered checker itself is called with that torch answer. Where it cannot (it
builds cuDNN graphs, CUDA graphs or kernel caches before it calls the answer), the function that decides its
verdict is given an obviously wrong result; ``DECIDED_BY`` names that test for each such checker, and a test keeps
the table complete.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import helpers.exercises as X
from helpers.exercises import checker_for, exercise_keys

NHWC = torch.channels_last


def refused(key: str, answer) -> str:
    """The registered checker of ``key`` run on the CPU (feature gates bypassed: nothing here runs on a GPU); the
    one line of its ``Wrong``. Fails the test when the checker accepts."""
    pytest.importorskip("cudnn")
    with X.grading_on("cpu"):
        try:
            verdict = checker_for(key)(answer)
        except X.Wrong as exc:
            return str(exc)
    pytest.fail(f"{key} accepted an answer torch computed: {verdict}")


def conv(x, w):
    return F.conv2d(x, w, padding=1)


TORCH_ANSWERS = {
    "02.residual_block": lambda x, w, b, r, y: y.copy_(torch.relu(conv(x, w) + b + r)),
    "02.folded_bn": lambda x, w, scale, shift, y: y.copy_(torch.relu(conv(x, w) * scale + shift)),
    "02.dgrad_drelu": lambda dy, w, x, dx: dx.copy_(torch.nn.grad.conv2d_input(dx.shape, w, dy, padding=1) * (x > 0)),
    "04.silu_amax": lambda a, b, bias: (lambda y: (y, y.float().abs().amax(dim=(1, 2), keepdim=True)))(
        F.silu(a @ b + bias)),
    "04.scaled_relu": lambda a, b, bias, y: (lambda alpha: y.copy_(F.relu(alpha * (a @ b) + bias))),
    "04.fp8_matmul_amax": lambda a8, b8, da, db: (lambda y: (y, y.float().abs().amax().reshape(1, 1, 1)))(
        ((a8.float() @ b8.float()) * da * db).to(torch.bfloat16)),
}


def _torch_rmsnorm_backward(dy, x, scale, inv_var, dx, dscale):
    """Autograd through torch's F.rms_norm, written into the buffers given."""
    rows, gamma = x.flatten(1).requires_grad_(True), scale.flatten().requires_grad_(True)
    grad_x, grad_scale = torch.autograd.grad(F.rms_norm(rows, (rows.shape[1],), gamma, 1e-5), (rows, gamma),
                                             dy.flatten(1))
    dx.copy_(grad_x.reshape(dx.shape))
    dscale.copy_(grad_scale.reshape(dscale.shape))


TORCH_ANSWERS["04.rmsnorm_backward"] = _torch_rmsnorm_backward


def _torch_window(q, k, v, o, window):
    """torch's SDPA with the band as a boolean mask, next to an SDPA graph that never runs."""
    s = q.shape[2]
    ones = torch.ones(s, s, dtype=torch.bool)
    o.copy_(F.scaled_dot_product_attention(q, k, v, attn_mask=ones.tril() & ~ones.tril(-window)))
    return _any_graph()


def _torch_product(a, b, c):
    c.copy_(a @ b)
    return b"not a plan", _empty_graph()


def _empty_graph():
    import helpers as H

    return H.load_cudnn(need_gpu=False).pygraph()


def _any_graph():
    """A constructed (never executed) SDPA graph to return next to torch's o."""
    from helpers.recipes import sdpa

    meta = torch.empty(1, 2, 256, 64, dtype=torch.bfloat16, device="meta")
    return sdpa.forward_graph(meta, meta, meta, causal=True, attn_scale=0.125, generate_stats=False)[0]


def _torch_merge(q, chunks, scale):
    k = torch.cat([k for k, _ in chunks], dim=2)
    v = torch.cat([v for _, v in chunks], dim=2)
    scores = (q.float() @ k.float().transpose(-1, -2)) * scale
    return (torch.softmax(scores, -1) @ v.float()).to(q.dtype), torch.logsumexp(scores, -1, keepdim=True)


TORCH_ANSWERS.update({"05.sliding_window": _torch_window, "05.merge_chunks": _torch_merge,
                      "06.round_trip": _torch_product})


@pytest.mark.parametrize("key", sorted(TORCH_ANSWERS))
def test_a_checker_that_can_grade_on_the_cpu_refuses_torch_doing_the_work(key):
    """Each torch answer computes the right numbers: the refusal is about who computed them."""
    message = refused(key, TORCH_ANSWERS[key]).removeprefix("window=32: ")
    assert message.startswith(("torch computed ", "o comes from torch's own kernel (aten._scaled_dot_product",
                               "no cuDNN SDPA graph ran over chunk 1's keys")), message


# Checkers that build cuDNN objects before they call the answer: the CPU test of the function deciding their verdict.
DECIDED_BY = {
    "01.matmul_bias_relu": "tests/test_exercises_nb01.py::test_a_graph_that_is_not_built_is_rejected",
    "01.run_on_stream": "tests/test_exercises_nb01.py::test_stream_verdict_names_the_stream_the_graph_ran_on",
    "03.fastest_plan": "tests/test_exercises_nb03.py::test_an_index_returned_without_running_the_plans_fails_whatever_it_is",
    "03.replay_choice": "tests/test_exercises_nb03.py::test_an_index_that_is_not_a_plan_is_rejected",
    "06.load_or_build": "tests/test_exercises_nb06.py::test_load_or_build_is_fed_an_entry_from_elsewhere_for_every_fingerprint_field",
    "07.build_projection": "tests/test_exercises_nb07.py::test_options_problem_names_the_missing_or_foreign_cache_and_dynamic_shapes",
    "07.serve": "tests/test_exercises_nb07.py::test_outputs_intact_refuses_an_output_a_later_request_overwrote",
    "07.restore_cache": "tests/test_exercises_nb07.py::test_restored_from_wants_the_given_text_loaded_and_nothing_built",
    "08.capture_two": "tests/test_exercises_nb08.py::test_a_capture_of_torch_ops_is_refused_on_the_cpu",
    "08.serve": "tests/test_exercises_nb08.py::test_outputs_from_torch_or_direct_executes_are_refused_on_the_cpu",
    "08.swap_weights": "tests/test_exercises_nb08.py::test_swap_verdict_names_the_missing_step",
}


def test_every_checker_refuses_an_obviously_wrong_answer_in_a_cpu_test():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    uncovered = sorted(set(exercise_keys()) - set(TORCH_ANSWERS) - set(DECIDED_BY))
    assert not uncovered, f"checkers with no CPU test of a wrong answer: {uncovered}"
    for key, test in DECIDED_BY.items():
        path, name = test.split("::")
        assert f"def {name}(" in (root / path).read_text(), f"{key}: {test} does not exist"
