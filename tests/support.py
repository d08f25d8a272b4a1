"""What the tests share: the GPU marker and grading that skips where the machine lacks a feature."""
import pytest

import helpers

requires_gpu = pytest.mark.skipif(not helpers.has_gpu(), reason="needs an NVIDIA GPU (none visible to torch)")


def graded(key, answer):
    """``X.exercise(key, answer)`` quietly; a test of that exercise is skipped, with the checker's reason,
    on a GPU (or COURSE_GPU profile) that cannot run it."""
    verdict = helpers.exercise(key, answer, quiet=True)
    if verdict.status == "skipped":
        pytest.skip(f"{key}: {verdict.message}")
    return verdict
