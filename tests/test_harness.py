"""The test harness (conftest.py at the root) and the notebooks' gated cells: CPU checks.

- One harness whatever pytest is pointed at: nbval on one notebook gets the hardware skips too.
- A cell that needs a feature this machine lacks runs, is not compared, and is reported skipped with the
  reason; every other cell is still compared.
- Every stored output a gated section prints is declared: compared cells that use a gate carry
  ``cudnn_course.needs``, and each grading cell needs what its checker needs.
- Stored outputs do not depend on the working dtype's name beyond what the sanitizer maps.
"""
import os
import shutil
import subprocess
import sys
import uuid

import nbformat
import pytest
import torch

import helpers as H
from helpers import device, errors, exercises as X
from helpers.features import FEATURES
from tools.notebooks import ROOT, cell_needs, gate_uses, notebook_path, notebook_paths, requires

NOTEBOOKS = notebook_paths()
IGNORE = "nbval-ignore-output"
GPU = device.has_gpu()


def _pytest(*args, timeout=600):
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_RESULTS_DIR", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------ one harness
@pytest.mark.skipif(GPU, reason="checks what a machine without a GPU sees")
@pytest.mark.parametrize("target", [["notebooks/01_environment_setup.ipynb"],
                                    ["--nbval", "notebooks/05_sdpa_attention.ipynb"]])
def test_nbval_on_one_notebook_skips_without_a_gpu(target):
    run = _pytest("-q", "-rs", *target)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "failed" not in run.stdout and " skipped" in run.stdout, run.stdout[-2000:]
    assert "no NVIDIA GPU: this notebook re-executes on a GPU only" in run.stdout
    if target[0].endswith("01_environment_setup.ipynb"):  # without the harness the same command fails
        broken = _pytest("-q", "--noconftest", *target)
        assert broken.returncode != 0 and " failed" in broken.stdout, broken.stdout[-2000:]


@pytest.fixture
def scratch_notebook():
    """A notebook inside the checkout (as a user's would be), removed afterwards."""
    folder = ROOT / ".scratch" / f"harness-{uuid.uuid4().hex[:8]}"
    folder.mkdir(parents=True)
    yield folder / "gated.ipynb"
    shutil.rmtree(folder, ignore_errors=True)


def _cell(source, stored, **meta):
    cell = nbformat.v4.new_code_cell(source, metadata=meta)
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    return cell


def test_a_cell_whose_feature_is_missing_runs_uncompared_and_is_reported_skipped(scratch_notebook):
    """Needs a Jupyter kernel, not a GPU: the notebook declares no GPU, and 'sdpa' is missing on a CPU box."""
    if GPU and H.gate("sdpa"):
        pytest.skip("this machine has fused attention: the gated cell would be compared")
    nb = nbformat.v4.new_notebook()
    nb.metadata["cudnn_course"] = {"requires": {"gpu": False}}
    nb.cells = [
        _cell("print('same')", "same\n"),
        _cell("open('ran-the-skip-branch', 'w').close()\nprint('skipped: no attention here')",
              "PASS attention\n", cudnn_course={"needs": ["sdpa"]}),
        _cell("print('changed')", "stored\n"),
    ]
    nbformat.write(nb, scratch_notebook)
    run = _pytest("-rs", "-v", str(scratch_notebook.relative_to(ROOT)))
    out = run.stdout
    assert "Cell 0 PASSED" in out, out[-3000:]
    assert "Cell 1 SKIPPED" in out and "gated.ipynb cell 1: needs sdpa: " in out, out[-3000:]
    assert "Cell 2 FAILED" in out, "an ungated cell must still be compared"
    assert (scratch_notebook.parent / "ran-the-skip-branch").exists(), "the gated cell must still run"
    broken = _pytest("-v", "--noconftest", str(scratch_notebook.relative_to(ROOT)))
    assert "Cell 1 FAILED" in broken.stdout, "without the harness the gated cell is compared (and differs)"


# ------------------------------------------------------------------ gated cells are declared
def _nb(path):
    return nbformat.read(path, as_version=4)


def undeclared_gates(nb) -> list[str]:
    """Cells that use a gate their metadata does not declare (features the whole notebook needs aside)."""
    notebook_wide = set(requires(nb).get("features", []))
    return [f"cell {index} (id {cell.id}) uses {sorted(missing)}" for index, cell, used in gate_uses(nb)
            for missing in [used - set(cell_needs(cell)) - notebook_wide] if missing]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_that_depend_on_a_gate_declare_it(path):
    problems = undeclared_gates(_nb(path))
    assert not problems, (f"{path.name}: " + "; ".join(problems) + ": add the features to the cell's metadata "
                          "cudnn_course.needs, so a GPU without them does not compare its output")


def test_an_undeclared_gated_cell_is_found():
    nb = _nb(notebook_path("04"))
    checks = next(c for c in nb.cells if c.get("id") == "d59da24f")
    del checks.metadata["cudnn_course"]
    problems = undeclared_gates(nb)
    assert len(problems) == 1 and problems[0].endswith("(id d59da24f) uses ['fp8']"), problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_declared_needs_are_known_features(path):
    for cell in _nb(path).cells:
        assert set(cell_needs(cell)) <= set(FEATURES), (path.name, cell.get("id"), cell_needs(cell))


def _grading_cells():
    import re

    for path in NOTEBOOKS:
        for cell in _nb(path).cells:
            m = re.search(r'H\.grade_solution\("([0-9]{2}\.\w+)"\)', cell.source)
            if cell.cell_type == "code" and m:
                yield pytest.param(path, cell, m[1], id=m[1])


def grading_mismatch(nb, cell, key) -> str | None:
    notebook_wide = set(requires(nb).get("features", []))
    declared, needed = set(cell_needs(cell)) - notebook_wide, set(X.needs(key)) - notebook_wide
    return None if declared == needed else f"{key}: the checker needs {sorted(needed)}, its cell declares {sorted(declared)}"


@pytest.mark.parametrize("path, cell, key", list(_grading_cells()))
def test_each_grading_cell_needs_what_its_checker_needs(path, cell, key):
    assert grading_mismatch(_nb(path), cell, key) is None


def test_a_grading_cell_without_its_checkers_needs_is_found():
    path, cell, key = next(p.values for p in _grading_cells() if p.values[2] == "08.swap_weights")
    cell = nbformat.from_dict(dict(cell, metadata={}))
    assert grading_mismatch(_nb(path), cell, key) == (
        "08.swap_weights: the checker needs ['native_cuda_graph'], its cell declares []")


def test_the_gated_correctness_cells_are_compared_where_their_feature_exists():
    compared = {cell.id: cell for path in NOTEBOOKS for cell in _nb(path).cells
                if cell.cell_type == "code" and IGNORE not in cell.metadata.get("tags", [])}
    for cid, feature in {"d59da24f": "fp8", "8b037d8b": "sdpa_serving", "1079d677": "sdpa_serving",
                         "67efe9c5": "sdpa_serving", "8ec71ab2": "sdpa_fp8"}.items():
        assert cid in compared and cell_needs(compared[cid]) == [feature], cid


def test_a_checker_needing_a_missing_feature_says_skipped_never_failed(monkeypatch):
    from helpers import features

    monkeypatch.setattr(features, "has_gpu", lambda: False)
    verdict = X.exercise("08.swap_weights", X.solution("08.swap_weights"), quiet=True)
    assert verdict.status == "skipped" and verdict.message.startswith(
        "skipped on this machine — native_cuda_graph: "), verdict
    for raised in (errors.FeatureUnavailable("native API: cuda-python is missing"), errors.NoGPUError("No NVIDIA GPU found")):
        def answer(*args, _exc=raised):
            raise _exc
        X._CHECKERS["99.raises"], X._NEEDS["99.raises"] = (lambda a: a()), ()
        try:
            assert X.exercise("99.raises", answer, quiet=True).status == "skipped"
        finally:
            X._CHECKERS.pop("99.raises"), X._NEEDS.pop("99.raises")


# ------------------------------------------------------------------ dtype-independent outputs
def _sanitize(text: str) -> str:
    from nbval.plugin import get_sanitize_patterns

    for regex, replace in get_sanitize_patterns((ROOT / "tests" / "nbval_sanitize.cfg").read_text()):
        text = __import__("re").sub(regex, replace, text)
    return text


def test_tensor_tables_print_the_same_for_bf16_and_fp16():
    def table(dtype):
        t = {"a": torch.empty(1, 8192, 1024, dtype=dtype), "bias": torch.empty(1, 1, 512, dtype=dtype),
             "y": torch.empty(1, 8192, 512, dtype=dtype).transpose(1, 2)}
        return H.describe_tensors(t, uids={"a": 1, "bias": 2, "y": 3})

    bf16, fp16 = table(torch.bfloat16), table(torch.float16)
    assert bf16 != fp16 and _sanitize(bf16) == _sanitize(fp16)
    assert bf16.splitlines()[1] == "uid 2: bias  shape (1, 1, 512) strides (512, 512, 1) torch.bfloat16"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_compared_outputs_hold_no_dtype_padded_into_a_column(path):
    """A dtype padded to a width (or a table cell) shifts what follows when bf16 becomes fp16 on an older GPU."""
    import re

    padded = re.compile(r"\b(?:bfloat16|float16)\b {2,}\S")
    for index, cell in enumerate(_nb(path).cells):
        if cell.cell_type != "code" or IGNORE in cell.metadata.get("tags", []):
            continue
        for out in cell.get("outputs", []):
            text = out.get("text") or "".join(out.get("data", {}).get("text/plain", ""))
            assert not padded.search(text), f"{path.name} cell {index} (id {cell.id}): {padded.search(text)[0]!r}"
            if out.get("output_type") == "execute_result" and "text/html" in out.get("data", {}):
                assert not re.search(r"\b(?:bfloat16|float16)\b", text), (
                    f"{path.name} cell {index}: a compared table shows the dtype; its columns move with the name")


def test_the_broken_padding_would_be_caught():
    import re

    padded = re.compile(r"\b(?:bfloat16|float16)\b {2,}\S")
    assert padded.search(f"{str(torch.bfloat16):15s} shape (1, 2)") and padded.search(f"{str(torch.float16):15s} s")
    assert not padded.search(H.describe_tensors({"x": torch.empty(2, dtype=torch.float16)}))
