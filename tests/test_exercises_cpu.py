"""Every checker refuses an obviously wrong answer on a CPU-only machine, so a checker made to accept everything
fails CI, which has no GPU.

Each notebook's test module (``tests/test_exercises_nbNN.py``) says how, for its exercises: ``TORCH_ANSWERS`` where a
checker can grade on the CPU (``grading_on("cpu")``: it makes its inputs there, and the answer needs no cuDNN because
torch does the work), and the registered checker itself is called with that torch answer; ``DECIDED_BY`` where it
cannot (it builds cuDNN graphs, CUDA graphs or kernel caches before it calls the answer), naming the test in that
module that gives the function deciding its verdict an obviously wrong result. A test keeps every exercise covered.
"""
import importlib
from pathlib import Path

import pytest

import grader as X
from grader import checker_for, exercise_keys

TESTS = Path(__file__).resolve().parent


def _declared(table: str) -> dict:
    """``{exercise key: (test module, entry)}`` over every notebook's test module's ``table``."""
    found = {}
    for path in sorted(TESTS.glob("test_exercises_nb[0-9][0-9].py")):
        module = importlib.import_module(f"tests.{path.stem}")
        found.update({key: (path.name, entry) for key, entry in getattr(module, table, {}).items()})
    return found


TORCH_ANSWERS = _declared("TORCH_ANSWERS")
DECIDED_BY = _declared("DECIDED_BY")


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


@pytest.mark.parametrize("key", sorted(TORCH_ANSWERS))
def test_a_checker_that_can_grade_on_the_cpu_refuses_torch_doing_the_work(key):
    """Each torch answer computes the right numbers: the refusal is about who computed them."""
    message = refused(key, TORCH_ANSWERS[key][1]).removeprefix("window=32: ")
    assert message.startswith(("torch computed ", "o comes from torch's own kernel (aten._scaled_dot_product",
                               "no cuDNN SDPA graph ran over chunk 1's keys")), message


def test_every_checker_refuses_an_obviously_wrong_answer_in_a_cpu_test():
    uncovered = sorted(set(exercise_keys()) - set(TORCH_ANSWERS) - set(DECIDED_BY))
    assert not uncovered, f"checkers with no CPU test of a wrong answer (TORCH_ANSWERS or DECIDED_BY): {uncovered}"
    for key, (module, name) in DECIDED_BY.items():
        assert key.startswith(module[len("test_exercises_nb"):][:2] + "."), f"{key} is declared in {module}"
        assert f"def {name}(" in (TESTS / module).read_text(), f"{key}: {module}::{name} does not exist"
