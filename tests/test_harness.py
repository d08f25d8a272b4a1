"""The test harness (conftest.py at the root) and the notebooks' gated cells: CPU checks.

- One harness whatever pytest is pointed at: nbval on one notebook gets the hardware skips too.
- A cell gated by a feature this machine lacks (its gate read from the cell's own lines) runs, is not compared,
  and is reported skipped with the reason; every other cell is still compared.
- The course's compared correctness cells are gated where their section is.
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
import grader as X
from helpers import device, errors
from tools.gates import read_needs
from tools.notebooks import ROOT, notebook_paths

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


def _cell(source, stored):
    cell = nbformat.v4.new_code_cell(source)
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    return cell


def test_a_gated_cell_whose_feature_is_missing_runs_uncompared_and_is_reported_skipped(scratch_notebook):
    """Needs a Jupyter kernel, not a GPU: the notebook never calls H.require_gpu(), and on a CPU box 'sdpa' and
    'native_cuda_graph' are missing. The gates are read from the cells' own lines, as a learner reads them."""
    if GPU and (H.gate("sdpa") or H.gate("native_cuda_graph")):
        pytest.skip("this machine has a gated feature: its cell would be compared")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        _cell(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport helpers as H\nprint('same')", "same\n"),
        _cell('ATTN = H.gate("sdpa")\nprint("attention:", "runs" if ATTN else "skipped")', "attention: runs\n"),
        nbformat.v4.new_markdown_cell("A markdown cell: nbval does not count it."),
        _cell('if ATTN:\n    print("PASS attention")\nelse:\n    open("ran-the-skip-branch", "w").close()\n'
              '    print("skipped:", ATTN.reason)', "PASS attention\n"),
        _cell('H.grade_solution("08.swap_weights")', "✓ 08.swap_weights: correct\n"),
        _cell("print('changed')  # ATTN in a comment gates nothing", "stored\n"),
    ]
    nbformat.write(nb, scratch_notebook)
    run = _pytest("-rs", "-v", str(scratch_notebook.relative_to(ROOT)))
    out = run.stdout
    assert "Cell 0 PASSED" in out, out[-3000:]
    assert "Cell 1 SKIPPED" in out and "gated.ipynb cell 1: needs sdpa: " in out, out[-3000:]
    assert "Cell 2 SKIPPED" in out and "gated.ipynb cell 2: needs sdpa: " in out, out[-3000:]
    assert "Cell 3 SKIPPED" in out and "gated.ipynb cell 3: needs native_cuda_graph: " in out, out[-3000:]
    assert "Cell 4 FAILED" in out, "an ungated cell must still be compared"
    assert (scratch_notebook.parent / "ran-the-skip-branch").exists(), "the gated cell must still run"
    broken = _pytest("-v", "--noconftest", str(scratch_notebook.relative_to(ROOT)))
    assert "Cell 2 FAILED" in broken.stdout and "Cell 3 FAILED" in broken.stdout, (
        "without the harness the gated cells are compared (and differ)")


# ------------------------------------------------------------------ the gated cells of the course
def _nb(path):
    return nbformat.read(path, as_version=4)


def test_compared_cells_are_gated_where_their_section_is():
    """Cells whose outputs are compared (correctness lines, not ignored): one that prints a section's results is
    gated by its feature, so a GPU with it compares them and one without it does not; one that only defines
    functions and constants (None) prints nothing anywhere, so every GPU compares it."""
    gated = {}
    for path in NOTEBOOKS:
        nb = _nb(path)
        code = [c for c in nb.cells if c.cell_type == "code"]
        gated.update({c.id: (c, features) for c, features in zip(code, read_needs(nb).cells)})
    for cid, feature in {"d59da24f": "fp8", "8b037d8b": "sdpa_serving", "1079d677": "sdpa_serving",
                         "67efe9c5": None, "cccb8081": None, "8caf9352": "sdpa_serving", "8ec71ab2": "sdpa_fp8",
                         "5bc4d39b": "native_cuda_graph", "7b3069c1": "native_cuda_graph",
                         "ca2fd206": "sdpa", "c2430f0f": "sdpa", "c0c65e9a": "sdpa"}.items():
        cell, features = gated[cid]
        assert IGNORE not in cell.metadata.get("tags", []), cid
        assert features == ((feature,) if feature else ()), (cid, features)


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
