"""The checks on stored notebooks catch what they are for: each one is shown failing on a
deliberately broken copy (a path in an output, a plotting cell without its PNG, a results CSV
that disagrees with the printed numbers, a badge pointing elsewhere). CPU only."""
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from tools import notebooks as N
from tools import fork as FK
from tools import hygiene as HY
from tools import results_csv as RC

from tests.support import colab_setup_cell

ROOT = Path(__file__).resolve().parent.parent


def _stamped(cells, gpu="Fake GPU"):
    nb = new_notebook(cells=cells)
    nb.metadata[N.META_KEY] = {"execution": {"gpu": gpu, "torch": "2.11.0", "cudnn_backend": "9.19.0",
                                             "date": "2026-12-03T00:00:00"}}
    return nb


def _recording_cell(*lines):
    cell = new_code_cell('H.record("02", "fused ms", t, "ms")')
    cell.outputs = [new_output("stream", name="stdout", text="".join(line + "\n" for line in lines))]
    return cell


# ------------------------------------------------------------------ machine-specific paths in outputs
@pytest.mark.parametrize("leak", [
    "/home/alice/course/helpers/plancache.py:212: PlanCacheWarning: rebuilt",
    "loaded /opt/env/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9",
    "wrote /tmp/cudnn06-x1y2/plan-cache/abc.plan",
    "C:\\Users\\bob\\course",
])
def test_a_path_in_any_output_is_reported_with_its_cell(leak):
    clean = new_code_cell("print(x)")
    clean.outputs = [new_output("stream", name="stdout", text="PASS case\n")]
    leaky = new_code_cell("warn()")
    leaky.outputs = [new_output("stream", name="stderr", text=leak)]
    assert HY.path_problems(new_notebook(cells=[clean]), "nb") == []
    problems = HY.path_problems(new_notebook(cells=[clean, leaky]), "06_x.ipynb")
    assert len(problems) == 1 and problems[0].startswith("06_x.ipynb cell 1")


def test_paths_in_display_data_and_tracebacks_count_too():
    table = new_code_cell("df")
    table.outputs = [new_output("execute_result", data={"text/plain": "0  /root/.cache/x"}, execution_count=1)]
    error = new_code_cell("boom()")
    error.outputs = [new_output("error", ename="OSError", evalue="no", traceback=["File /Users/bob/x.py, line 1"])]
    assert len(HY.path_problems(new_notebook(cells=[table, error]), "nb")) == 2


def test_tidied_paths_and_system_folders_pass():
    from helpers.paths import tidy_paths

    cell = new_code_cell("print(report)")
    text = tidy_paths(f"{sys.prefix}/lib/site-packages/cudnn/__init__.py {os.path.expanduser('~')}/x "
                      f"{ROOT}/helpers /usr/local/cuda/lib64/libcudart.so")
    cell.outputs = [new_output("stream", name="stdout", text=text)]
    assert HY.path_problems(new_notebook(cells=[cell]), "nb") == [], text


def test_a_real_notebook_with_a_path_planted_in_an_output_fails():
    path = N.notebook_paths()[0]
    nb = nbformat.read(path, as_version=4)
    broken = copy.deepcopy(nb)
    target = next(c for c in broken.cells if c.cell_type == "code" and c.outputs)
    target.outputs.append(new_output("stream", name="stderr", text="/home/someone/checkout/helpers/x.py:1: Warning"))
    assert len(HY.path_problems(broken, path.name)) == len(HY.path_problems(nb, path.name)) + 1


# ------------------------------------------------------------------ figures
@pytest.mark.parametrize("source", ['H.bar_compare(["a"], [1.0], ylabel="x", title="t")',
                                    "fig, ax = plt.subplots()\nax.plot([1, 2])\nplt.show()",
                                    'ax = H.line_compare(df, x="n", y="ms", hue="mode", ylabel="ms", title="t")'])
def test_a_plotting_cell_without_its_png_is_reported(source):
    drawn = new_code_cell(source)
    drawn.outputs = [new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"})]
    assert HY.figure_problems(new_notebook(cells=[drawn]), "nb") == []
    blank = new_code_cell(source)
    blank.outputs = [new_output("display_data", data={"text/plain": "<Figure size 880x462 with 1 Axes>"})]
    problems = HY.figure_problems(new_notebook(cells=[drawn, blank]), "04_x.ipynb")
    assert len(problems) == 1 and "04_x.ipynb cell 1" in problems[0] and "image/png" in problems[0]


def test_cells_that_do_not_draw_need_no_png():
    assert HY.figure_problems(new_notebook(cells=[new_code_cell("table.round(2)")]), "nb") == []


# ------------------------------------------------------------------ results CSV vs printed numbers
def test_results_csv_is_derived_from_the_printed_lines(tmp_path):
    nb = _stamped([_recording_cell("recorded 02 · fused ms = 0.0829312 ms", "recorded 02 · fused vs eager = 2.4 x",
                                   "recorded 02 · fp8 rel err = 0.0375467")])
    nbformat.write(nb, tmp_path / "02_x.ipynb")
    [csv_path] = RC.sync_results([tmp_path / "02_x.ipynb"], tmp_path / "results")
    assert csv_path.name == "fake-gpu.csv"
    assert RC.results_problems({"02_x.ipynb": nb}, tmp_path / "results") == []
    text = csv_path.read_text()
    assert "02,fused ms,0.0829312,ms,Fake GPU,2.11.0,91900,2026-12-03T00:00:00" in text
    assert "02,fp8 rel err,0.0375467,," in text


@pytest.mark.parametrize("breakage, expected", [
    (lambda t: t.replace("0.0829312", "0.0829313"), "is 0.0829313 ms in the CSV but 0.0829312 ms in the notebook"),
    (lambda t: t + "02,stale metric,1,ms,Fake GPU,2.11.0,91900,2026-12-01T00:00:00\n", "in the CSV but no stored output"),
    (lambda t: "\n".join(l for l in t.splitlines() if "vs eager" not in l) + "\n", "printed in the notebook but not in the CSV"),
])
def test_a_changed_stale_or_missing_csv_value_is_reported(tmp_path, breakage, expected):
    nb = _stamped([_recording_cell("recorded 02 · fused ms = 0.0829312 ms", "recorded 02 · fused vs eager = 2.4 x")])
    nbformat.write(nb, tmp_path / "02_x.ipynb")
    [csv_path] = RC.sync_results([tmp_path / "02_x.ipynb"], tmp_path)
    csv_path.write_text(breakage(csv_path.read_text()))
    problems = RC.results_problems({"02_x.ipynb": nb}, tmp_path)
    assert len(problems) == 1 and expected in problems[0], problems


def test_a_missing_csv_is_reported(tmp_path):
    nb = _stamped([_recording_cell("recorded 02 · fused ms = 0.08 ms")])
    assert "fake-gpu.csv is missing" in RC.results_problems({"02_x.ipynb": nb}, tmp_path)[0]


def test_record_prints_the_string_it_writes(tmp_path, monkeypatch, capsys):
    from helpers import device, results

    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    fake = device.DeviceInfo("Fake GPU", 0, (9, 0), 1, 1.0, 1, {}, None)
    monkeypatch.setattr(device, "device_info", lambda index=None: fake)
    results.record("02", "fused ms", 0.08293123456, "ms")
    results.record("04", "fp8 rel err", 0.037546712, "")
    printed = capsys.readouterr().out
    nb = _stamped([_recording_cell(*printed.splitlines())])
    assert RC.results_problems({"nb": nb}, tmp_path) == []


def test_headline_table_uses_plain_decimals(tmp_path, monkeypatch):
    from helpers import results

    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    (tmp_path / "fake-gpu.csv").write_text(
        "notebook,metric,value,unit,gpu,torch,cudnn_backend,recorded_at\n"
        "02,fused ms,8.293e-05,ms,F,t,1,d\n02,fused TFLOP/s,713.812,TFLOP/s,F,t,1,d\n04,speedup,1.5649,x,F,t,1,d\n")
    table = results.headline_table("fake-gpu")
    assert "e-05" not in table and "0.00008293 ms" in table and "713.8 TFLOP/s" in table
    assert table.index("02") < table.index("fused ms") < table.index("04") < table.index("speedup")
    assert [results.plain(v) for v in (1234.5678, 0.5, 0)] == ["1,235", "0.5000", "0"]


# ------------------------------------------------------------------ one repository everywhere
def _copy_repo_files(dst: Path) -> Path:
    (dst / "notebooks").mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dst / name)
    for path in N.notebook_paths():
        shutil.copy(path, dst / "notebooks" / path.name)
    return dst


def test_set_repo_repoints_every_badge_clone_url_and_pyproject_without_staling_stamps(tmp_path):
    root = _copy_repo_files(tmp_path)
    hashes = {p.name: N.code_hash(nbformat.read(p, as_version=4)) for p in N.notebook_paths(root / "notebooks")}
    FK.set_repository("someone/my-fork", root)
    mentions = FK.repo_mentions(root)
    assert {slug for *_, slug in mentions} == {"someone/my-fork"}
    assert sum(1 for f, what, _ in mentions if what == "setup cell clone URL") == len(hashes)
    handout = [b for b in FK.colab_badges((root / "README.md").read_text()) if b[1] != FK.MAIN]
    assert len(handout) == len(hashes) and {slug for slug, *_ in handout} == {"someone/my-fork"}
    assert all(N.code_hash(nbformat.read(p, as_version=4)) == hashes[p.name] for p in N.notebook_paths(root / "notebooks"))


def test_a_badge_pointing_elsewhere_is_seen(tmp_path):
    root = _copy_repo_files(tmp_path)
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace(f"github/{FK.repository(root)}/blob", "github/other/repo/blob", 1))
    assert {slug for *_, slug in FK.repo_mentions(root)} == {FK.repository(root), "other/repo"}


# ------------------------------------------------------------------ the Colab branch of the setup cell
def test_colab_branch_clones_the_course_and_imports_helpers_from_the_clone(tmp_path):
    """Pretend to be Colab (google.colab imported), clone this checkout from a file URL into a fresh
    folder, and check that `import helpers` then finds the clone. pip is recorded, not run."""
    if shutil.which("git") is None or subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                                                     capture_output=True).returncode != 0:
        pytest.skip("needs git and a git checkout with at least one commit")
    nb = nbformat.read(N.notebook_paths()[0], as_version=4)
    setup = next(c.source for c in nb.cells if "setup" in c.metadata.get("tags", []))
    course = tmp_path / "content" / "cudnn-frontend-course"
    helpers_file, installed = colab_setup_cell(setup, ROOT.as_uri(), course, tmp_path)
    assert Path(helpers_file).resolve().is_relative_to(course.resolve()), helpers_file
    assert Path(installed).resolve() == course.resolve() and (course / "pyproject.toml").exists()
