"""The course's test harness, whatever pytest is pointed at.

It sits at the repository root so that ``pytest``, ``pytest tests/``, ``pytest notebooks/`` and
``pytest --nbval notebooks/05_sdpa_attention.ipynb`` all load it. It

- gives the notebook kernels ipykernel's inline backend and an empty scratch results folder;
- skips every cell of a notebook whose hardware needs this machine lacks, with the reason;
- for a cell gated by a feature this machine lacks, runs the cell (its skip branch) without comparing its
  outputs, and reports it as skipped with the gate's reason.

Both are read from the notebook's own lines (``H.require_gpu()``, ``NAME = H.gate("feature")`` and the cells
that name it, ``NAME.require()``, ``H.grade_solution(key)``): ``tools/gates.py``.

``COURSE_GPU=t4|l4|a100|h100`` rehearses another GPU (``helpers.device.PROFILES``): the gates above follow it.
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
    os.environ["COURSE_HEADLESS"] = "1"  # nbval's kernels: no progress-bar redraws in the compared outputs
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
    from helpers.device import PROFILE_ENV, active_profile, device_info, has_gpu

    if not has_gpu():
        return "GPU: none (GPU tests and nbval re-execution will skip)"
    d = device_info()
    if active_profile():
        return f"GPU: {d.name} rehearsed on the real {d.rehearsed_on} ({PROFILE_ENV}={active_profile().key})"
    return f"GPU: {d.name}"


def _run_without_comparing(item, reason: str) -> None:
    """Execute the cell (its skip branch must still run cleanly), compare nothing, report a skip."""
    item.options["check"] = False
    run = item.runtest

    def runtest():
        run()
        pytest.skip(reason)

    item.runtest = runtest


def pytest_collection_modifyitems(config, items):
    from helpers.features import missing_feature, notebook_requirements_met
    from tools.gates import read_needs

    readings = {}
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix != ".ipynb":
            continue
        if path not in readings:
            needs = read_needs(json.loads(path.read_text()))
            readings[path] = notebook_requirements_met(needs.requires), needs.cells
        (ok, reason), cells = readings[path]
        if not ok:
            item.add_marker(pytest.mark.skip(reason=f"{path.name}: {reason}"))
            continue
        number = getattr(item, "cell_num", None)  # nbval's: the code cells, counted from 0
        missing = missing_feature(cells[number]) if number is not None else None
        if missing:
            _run_without_comparing(item, f"{path.name} cell {number}: needs {missing}")
