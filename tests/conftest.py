"""GPU-aware test harness.

nbval collects every notebook in notebooks/. Before a notebook's cells run, its
hardware needs (metadata ``cudnn_course.requires``) are compared with this
machine; when they are not met, every cell item of that notebook is skipped
with the reason, so a T4 or CPU-only runner never fails for hardware.
"""
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest


def pytest_configure(config):
    """Kernels draw inline; test runs never rewrite the committed results.

    nbval starts its kernels with this process's environment: give them ipykernel's inline matplotlib
    backend whatever MPLBACKEND the caller set (under Agg a plotting cell shows nothing, and its stored
    ``<Figure ...>`` output would not match). This process keeps a headless backend of its own.

    nbval re-executes the notebooks, and they record their headline numbers (``H.record``) in
    ``results/``. Point them at an empty scratch folder instead, so the committed numbers stay those
    of ``make run``. A caller who sets ``COURSE_RESULTS_DIR`` keeps it.
    """
    import matplotlib

    matplotlib.use("Agg")  # for this process; set before the variable below changes
    from tools.execute import INLINE_BACKEND

    os.environ["MPLBACKEND"] = INLINE_BACKEND
    if os.environ.get("COURSE_RESULTS_DIR"):
        return
    scratch = Path(tempfile.mkdtemp(prefix="course-results-"))
    os.environ["COURSE_RESULTS_DIR"] = str(scratch)
    config._course_results_scratch = scratch


def pytest_unconfigure(config):
    scratch = getattr(config, "_course_results_scratch", None)
    if scratch is not None:
        os.environ.pop("COURSE_RESULTS_DIR", None)
        shutil.rmtree(scratch, ignore_errors=True)


def pytest_report_header(config):
    from helpers.device import device_info, has_gpu

    return f"GPU: {device_info().name if has_gpu() else 'none (GPU tests and nbval re-execution will skip)'}"


def pytest_collection_modifyitems(config, items):
    from helpers.features import notebook_requirements_met
    from tools.notebooks import requires

    verdicts = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix != ".ipynb":
            continue
        if path not in verdicts:
            nb = json.loads(path.read_text())
            verdicts[path] = notebook_requirements_met(requires(nb))
        ok, reason = verdicts[path]
        if not ok:
            item.add_marker(pytest.mark.skip(reason=f"{path.name}: {reason}"))


requires_gpu = pytest.mark.skipif(
    not __import__("helpers").has_gpu(), reason="needs an NVIDIA GPU (none visible to torch)"
)
