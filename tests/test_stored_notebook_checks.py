"""The checks on stored notebooks catch what they are for: each one is shown failing on a
deliberately broken copy (a path in an output, a plotting cell without its PNG, a results CSV
that disagrees with the printed numbers, a badge pointing elsewhere). CPU only."""
import copy
import os
import re
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
    fake = device.DeviceInfo(name="Fake GPU", index=0, sm=(9, 0), sm_count=1, memory_gb=1.0, l2_bytes=1)
    monkeypatch.setattr(device, "device_info", lambda index=None: fake)
    results.record("02", "fused ms", 0.08293123456, "ms")
    results.record("04", "fp8 rel err", 0.037546712, "")
    printed = capsys.readouterr().out
    nb = _stamped([_recording_cell(*printed.splitlines())])
    assert RC.results_problems({"nb": nb}, tmp_path) == []


def test_headline_table_uses_plain_decimals(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_RESULTS_DIR", str(tmp_path))
    (tmp_path / "fake-gpu.csv").write_text(
        "notebook,metric,value,unit,gpu,torch,cudnn_backend,recorded_at\n"
        "02,fused ms,8.293e-05,ms,F,t,1,d\n02,fused TFLOP/s,713.812,TFLOP/s,F,t,1,d\n04,speedup,1.5649,x,F,t,1,d\n")
    table = RC.headline_table("fake-gpu")
    assert "e-05" not in table and "0.00008293 ms" in table and "713.8 TFLOP/s" in table
    assert table.index("02") < table.index("fused ms") < table.index("04") < table.index("speedup")
    assert [RC.plain(v) for v in (1234.5678, 0.5, 0)] == ["1,235", "0.5000", "0"]


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
    outputs = {p.name: N.output_hashes(nbformat.read(p, as_version=4)) for p in N.notebook_paths(root / "notebooks")}
    FK.set_repository("someone/my-fork", root)
    mentions = FK.repo_mentions(root)
    assert {slug for *_, slug in mentions} == {"someone/my-fork"}
    assert sum(1 for f, what, _ in mentions if what == "setup cell clone URL") == len(hashes)
    handout = [b for b in FK.colab_badges((root / "README.md").read_text()) if b[1] != FK.MAIN]
    assert len(handout) == len(hashes) and {slug for slug, *_ in handout} == {"someone/my-fork"}
    assert all(N.code_hash(nbformat.read(p, as_version=4)) == hashes[p.name] for p in N.notebook_paths(root / "notebooks"))
    assert all(N.output_hashes(nbformat.read(p, as_version=4)) == outputs[p.name]
               for p in N.notebook_paths(root / "notebooks"))


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


# ------------------------------------------------------------------ compared outputs tied to the GPU run
NB02 = "02_fused_conv_bias_relu.ipynb"


def _with_recorded_hashes(nb):
    """A copy of ``nb`` whose stamp holds the hashes of its outputs as they are now (what tools.execute records)."""
    nb = copy.deepcopy(nb)
    entry = nb.metadata.setdefault(N.META_KEY, {}).setdefault("execution", {})
    entry.update(outputs_sha256=N.output_hashes(nb), stored_outputs_sha256=N.stored_output_hashes(nb))
    return nb


def _cell(nb, cell_id):
    return next(c for c in nb.cells if c.get("id") == cell_id)


@pytest.fixture(scope="module")
def nb02():
    return _with_recorded_hashes(nbformat.read(N.NB_DIR / NB02, as_version=4))


def test_every_stored_notebook_matches_the_hashes_its_run_would_record():
    for path in N.notebook_paths():
        nb = _with_recorded_hashes(nbformat.read(path, as_version=4))
        assert HY.output_problems(nb, path.name) == [], path.name
        assert nb.metadata[N.META_KEY]["execution"]["outputs_sha256"], f"{path.name}: no compared cell"
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert len(nb.metadata[N.META_KEY]["execution"]["stored_outputs_sha256"]) == len(code), path.name


def test_a_hand_edited_compared_output_fails_naming_the_notebook_and_the_cell(nb02):
    edited = copy.deepcopy(nb02)
    cell = _cell(edited, "6d378bf7")                          # PASS fused conv-bias-relu N32 C128 56x56 ...: compared
    assert N.compared(cell) and "56x56" in cell.outputs[0].text
    cell.outputs[0].text = cell.outputs[0].text.replace("56x56", "56x57", 1)
    (problem,) = HY.output_problems(edited, NB02)
    index = edited.cells.index(cell)
    assert problem.startswith(f"{NB02} cell {index} (id 6d378bf7): its stored outputs are not the ones its GPU run "
                              "wrote (edited by hand?)")
    assert problem.endswith(f"re-execute it on a GPU (python -m tools.execute notebooks/{NB02})")
    assert "\n" not in problem


@pytest.mark.parametrize("edit", [
    "added an output", "removed the output", "stdout became stderr", "an error",
])
def test_every_kind_of_change_nbval_would_see_is_seen(nb02, edit):
    edited = copy.deepcopy(nb02)
    cell = _cell(edited, "6d378bf7")                          # PASS fused conv-bias-relu ...: compared
    if edit == "added an output":
        cell.outputs.append(new_output("execute_result", data={"text/plain": "0"}, execution_count=1))
    elif edit == "removed the output":
        cell.outputs = []
    elif edit == "stdout became stderr":
        cell.outputs[0].name = "stderr"
    else:
        cell.outputs.append(new_output("error", ename="RuntimeError", evalue="boom", traceback=[]))
    assert len(HY.output_problems(edited, NB02)) == 1


def _masked_number(nb):
    passed = _cell(nb, "6d378bf7").outputs[0]                                    # compared; nbval masks rel err
    (shown,) = re.findall(r"rel err [0-9.]+e[-+][0-9]+", passed.text)
    passed.text = passed.text.replace(shown, "rel err 9.9e-09" if shown != "rel err 9.9e-09" else "rel err 1.1e-09")
    return "6d378bf7"


def _timing_line(nb):
    _cell(nb, "78cf1cac").outputs[0].text = "torch.compile (default): first call (compilation) took 99 s\n"
    return "78cf1cac"                                                            # nbval-ignore-output


def _benchmark_table(nb):
    """The issue-42 edit: 02's benchmark table (not compared) says 100 TFLOP/s more than the run printed."""
    table = _cell(nb, "13bade38")
    assert not N.compared(table)
    (shown,) = [out for out in table.outputs if "data" in out]
    row = next(line for line in shown.data["text/plain"].splitlines() if line.startswith("cuDNN fused graph"))
    rate = row.split()[-2]                                        # the TFLOP/s column, as the table printed it
    more = f"{float(rate) + 100:.{len(rate.partition('.')[2])}f}"
    for mime in ("text/plain", "text/html"):
        assert rate in shown.data[mime]
        shown.data[mime] = shown.data[mime].replace(rate, more, 1)
    return "13bade38"


def _figure(nb):
    figure = next(c for c in nb.cells if any("image/png" in o.get("data", {}) for o in c.get("outputs", [])))
    next(o for o in figure.outputs if "image/png" in o.get("data", {})).data["image/png"] = "iVBORw0KGgo="
    return figure.id


def _stream_in_two_pieces(nb):
    """The same stdout cut into other pieces: one piece if the run stored several, two if it stored one (a run may
    store either, as the kernel flushed it)."""
    split = _cell(nb, "934b6fa8")                                                # three PASS lines: compared
    text = "".join(out.text for out in split.outputs if out.output_type == "stream")
    first, rest = text.split("\n", 1)
    pieces = [first + "\n", rest] if len(split.outputs) == 1 else [text]
    split.outputs = [new_output("stream", name="stdout", text=piece) for piece in pieces]
    return "934b6fa8"


@pytest.mark.parametrize("edit", [_masked_number, _timing_line, _benchmark_table, _figure, _stream_in_two_pieces],
                         ids=lambda f: f.__name__.strip("_"))
def test_an_edit_nbval_would_not_see_leaves_the_compared_hash_alone_and_fails_on_cpu(nb02, edit):
    """What nbval masks or does not compare (a masked number, a timing, a table, a figure, a stream's pieces) keeps
    the compared hash, as nbval keeps its verdict; the stored hash still sees it: one line naming the cell."""
    edited = copy.deepcopy(nb02)
    cell_id = edit(edited)
    assert N.output_hashes(edited) == N.output_hashes(nb02)
    (problem,) = HY.output_problems(edited, NB02)
    index = next(i for i, c in enumerate(edited.cells) if c.get("id") == cell_id)
    assert problem == (f"{NB02} cell {index} (id {cell_id}): its stored outputs are not the ones its GPU run wrote "
                       f"(edited by hand?): re-execute it on a GPU (python -m tools.execute notebooks/{NB02})")


def test_execution_counts_are_not_outputs(nb02):
    edited = copy.deepcopy(nb02)
    for cell in edited.cells:
        if cell.cell_type == "code":
            cell.execution_count = (cell.execution_count or 0) + 100
            for out in cell.outputs:
                if "execution_count" in out:
                    out.execution_count = cell.execution_count
    assert HY.output_problems(edited, NB02) == []


def test_a_forks_repository_url_leaves_every_hash_alone(nb02):
    edited = copy.deepcopy(nb02)
    cell = next(c for c in edited.cells if c.cell_type == "code" and c.outputs and "text" in c.outputs[0])
    cell.outputs[0].text += "cloned https://github.com/cudnn-course/cudnn-frontend-course\n"
    again = _with_recorded_hashes(edited)
    forked = copy.deepcopy(again)
    _cell(forked, cell.id).outputs[0].text = cell.outputs[0].text.replace("cudnn-course/", "someone/")
    assert HY.output_problems(forked, NB02) == []


def test_a_cell_that_changed_whether_nbval_compares_it_is_named(nb02):
    ignored = copy.deepcopy(nb02)
    _cell(ignored, "6fdc180c").metadata["tags"] = ["nbval-ignore-output"]
    (problem,) = HY.output_problems(ignored, NB02)
    assert "(id 6fdc180c): its GPU run recorded compared outputs, but nbval no longer compares" in problem
    compared = copy.deepcopy(nb02)
    _cell(compared, "78cf1cac").metadata["tags"] = []
    (problem,) = HY.output_problems(compared, NB02)
    assert "(id 78cf1cac): nbval compares its outputs, but its GPU run recorded none" in problem


@pytest.mark.parametrize("key, what", [("outputs_sha256", "the compared outputs"),
                                       ("stored_outputs_sha256", "every cell's stored outputs")])
def test_a_stamp_without_the_hashes_is_one_line_saying_to_re_execute_on_a_gpu(nb02, key, what):
    old = copy.deepcopy(nb02)
    del old.metadata[N.META_KEY]["execution"][key]
    assert HY.output_problems(old, NB02) == [
        f"{NB02}: its stamp records no hash of {what} (stamped before tools.execute wrote one): "
        f"re-execute it on a GPU (python -m tools.execute notebooks/{NB02})"]


@pytest.mark.parametrize("tags, source, executed, expected", [
    ([], "print(1)", True, True),
    (["nbval-ignore-output"], "print(1)", True, False),
    (["nbval-skip"], "print(1)", True, False),
    (["raises-exception"], "raise ValueError", True, True),
    ([], "# NBVAL_IGNORE_OUTPUT\nprint(1)", True, False),
    (["nbval-ignore-output"], "# NBVAL_CHECK_OUTPUT\nprint(1)", True, True),   # a comment marker wins, as in nbval
    ([], "print(1)", False, False),                                             # never ran: nothing to compare
])
def test_compared_cells_are_the_ones_nbval_compares(tags, source, executed, expected):
    cell = new_code_cell(source, metadata={"tags": tags}, execution_count=1 if executed else None)
    assert N.compared(cell) is expected


def _nbval_equal(test_outputs, ref_outputs) -> bool:
    """nbval's own verdict on two cells' outputs, with the course's sanitising file (as ``IPyNbCell.runtest``
    compares them: both coalesced)."""
    from types import SimpleNamespace
    from nbval.plugin import IPyNbCell, coalesce_streams, nocolors

    parent = SimpleNamespace(skip_compare=("metadata", "traceback", "prompt_number", "output_type", "name",
                                           "execution_count", "application/vnd.jupyter.widget-view+json",
                                           "image/png", "image/jpeg"),
                             sanitize_patterns=dict(N.sanitize_patterns()))
    item = SimpleNamespace(parent=parent, colors=nocolors, format_output_compare=lambda *a: None)
    item.sanitize = lambda s: IPyNbCell.sanitize(item, s)
    return IPyNbCell.compare_outputs(item, coalesce_streams(copy.deepcopy(test_outputs)),
                                     coalesce_streams(copy.deepcopy(ref_outputs)))


def _hash_of(outputs):
    cell = new_code_cell("x", execution_count=1, id="c1")
    cell.outputs = copy.deepcopy(outputs)
    return N.output_hashes(new_notebook(cells=[cell]))["c1"]


def _stream(text, name="stdout"):
    return new_output("stream", name=name, text=text)


REF = [_stream("PASS case: rel err 1.2e-03 (tol 2e-02, bfloat16)\nshape (32, 256, 56, 56) in 0.08 ms\n"),
       new_output("display_data", data={"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="})]


@pytest.mark.parametrize("other, same", [
    (REF, True),
    ([_stream("PASS case: rel err 9.9e-04 (tol 1e-02, float16)\nshape (32, 256, 56, 56) in 0.11 ms\n"), REF[1]], True),
    ([_stream("PASS case: rel err 1.2e-03 (tol 2e-02, bfloat16)\n"), _stream("shape (32, 256, 56, 56) in 0.08 ms\n"),
      REF[1]], True),
    ([REF[1], REF[0]], True),                                                    # order across kinds: not compared
    ([REF[0], new_output("display_data", data={"text/plain": "<Figure>", "image/png": "AAAA"})], True),
    ([_stream("PASS case: rel err 1.2e-03 (tol 2e-02, bfloat16)\nshape (32, 256, 56, 57) in 0.08 ms\n"), REF[1]], False),
    ([_stream(REF[0].text, name="stderr"), REF[1]], False),
    ([REF[0], new_output("display_data", data={"text/plain": "<Figure>", "text/html": "<b>x</b>"})], False),
    ([REF[0]], False),
])
def test_two_outputs_hash_alike_exactly_when_nbval_finds_them_equal(other, same):
    assert _nbval_equal(other, REF) is same
    assert (_hash_of(other) == _hash_of(REF)) is same


def test_write_stamp_records_the_output_hashes(monkeypatch):
    from helpers import device

    fake = device.DeviceInfo(name="Fake GPU", index=0, sm=(9, 0), sm_count=1, memory_gb=1.0, l2_bytes=1)
    monkeypatch.setattr(device, "device_info", lambda index=None: fake)
    monkeypatch.setattr(device, "versions", lambda: {"torch": "2.13.0"})
    nb = nbformat.read(N.NB_DIR / NB02, as_version=4)
    entry = N.write_stamp(nb, runtime_s=1.0)
    assert entry["outputs_sha256"] == N.output_hashes(nb) and entry["code_sha256"] == N.code_hash(nb)
    assert entry["stored_outputs_sha256"] == N.stored_output_hashes(nb)
    assert HY.output_problems(nb, NB02) == []


def test_tools_execute_records_the_output_hashes_and_the_prose_in_the_stamp(tmp_path, monkeypatch):
    """tools.execute's own execute_one, a real kernel, on a notebook that needs no GPU (the device facts faked): the
    stamp it writes passes the output check, and a hand edit of a compared output then fails it."""
    from nbformat.v4 import new_markdown_cell

    from helpers import device
    from tools import execute as EX

    monkeypatch.setattr(EX, "LOG_DIR", tmp_path / "logs")
    fake = device.DeviceInfo(name="Fake GPU", index=0, sm=(9, 0), sm_count=1, memory_gb=1.0, l2_bytes=1)
    monkeypatch.setattr(device, "device_info", lambda index=None: fake)
    monkeypatch.setattr(device, "versions", lambda: {"torch": "2.13.0"})
    nb = new_notebook(cells=[
        new_markdown_cell("A step took 0.08 ms on the H200.", id="md"),
        new_code_cell('from helpers.paths import tidy_paths\nimport helpers.workers\n'
                      'helpers.workers.STARTED.add("plan_worker")   # as run_worker notes a worker it starts\n'
                      'print("PASS case: rel err 1.2e-03 (tol 2e-02, bfloat16)")', id="checked"),
        new_code_cell('print("12.3 ms")', id="timed", metadata={"tags": ["nbval-ignore-output"]})])
    nb.metadata[N.META_KEY] = {"requires": {"gpu": False}}
    nbformat.write(nb, tmp_path / "09_cpu.ipynb")
    name, status, _ = EX.execute_one(str(tmp_path / "09_cpu.ipynb"), str(tmp_path / "out"), 120, False)
    assert status == "ok"
    ran = nbformat.read(tmp_path / "out" / name, as_version=4)
    entry = N.stamp(ran)
    assert set(entry["outputs_sha256"]) == {"checked"} and entry["prose_claims"] == {"md": ["0.08 ms"]}
    assert set(entry["stored_outputs_sha256"]) == {"checked", "timed"}
    assert {"helpers/__init__.py", "helpers/paths.py"} <= set(entry["code_files_sha256"])      # what it imported
    assert "helpers/workers/plan_worker.py" in entry["code_files_sha256"]                 # a worker it started
    assert all(f.split("/")[0] in N.COURSE_CODE for f in entry["code_files_sha256"])
    assert HY.code_file_problems({name: ran}) == [] and HY.unrecorded({name: ran}) == []
    assert HY.output_problems(ran, name) == []
    for cell_id, text in (("checked", "FAIL case: rel err 1.2e-03 (tol 2e-02, bfloat16)\n"), ("timed", "1.3 ms\n")):
        edited = copy.deepcopy(ran)
        _cell(edited, cell_id).outputs[0].text = text
        assert len(HY.output_problems(edited, name)) == 1


# ------------------------------------------------------------------ the course's code each run used
# A module with what changes form between Python versions (f-strings, their quotes and format specs, a docstring
# of several lines, non-ASCII text, annotations) and its hash, as Python 3.10 to 3.13 make it: a stamp
# written by the GPU machine's 3.12 is checked by CI's 3.11, so the hash must not depend on the version.
PORTABLE_MODULE = '''"""A module.

Two lines of docstring, « ünïcode »."""
import math  # a comment


def rate(flops: float, ms: float) -> str:
    """TFLOP/s, said."""
    value = flops / ms / 1e9  # TFLOP/s
    return f"{value:,.1f} TFLOP/s · {'fast' if value > 1 else 'slow'} ({math.pi:.2f})"
'''
PORTABLE_HASH = "93752cca7717928287dabfbf5ec7e6271c9fb50248178803a6a14390e1bb33cf"


def test_a_files_hash_is_the_same_in_every_python_version(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(PORTABLE_MODULE, encoding="utf-8")
    assert N.file_hash(module) == PORTABLE_HASH


def test_a_files_hash_follows_its_code_not_its_comments_or_docstrings(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('"""A module."""\n\ndef f(x):\n    """Double."""\n    return 2 * x  # twice\n')
    before = N.file_hash(module)
    module.write_text('"""A module, said better."""\n\ndef f(x):\n    return 2 * x\n')
    assert N.file_hash(module) == before
    module.write_text('"""A module."""\n\ndef f(x):\n    """Double."""\n    return 3 * x  # twice\n')
    assert N.file_hash(module) != before
    data = tmp_path / "op.cpp"
    data.write_text("int f();\n")
    first = N.file_hash(data)
    data.write_text("int f(); // a comment\n")
    assert N.file_hash(data) != first                          # not Python: every byte counts


def test_a_course_file_changed_after_a_run_names_every_notebook_that_used_it(tmp_path):
    root = tmp_path / "course"
    (root / "helpers" / "recipes").mkdir(parents=True)
    for rel in ("helpers/paths.py", "helpers/recipes/sdpa.py"):
        (root / rel).write_text((ROOT / rel).read_text())
    used = {"05_sdpa_attention.ipynb": ["helpers/paths.py", "helpers/recipes/sdpa.py"],
            "06_plan_serialization.ipynb": ["helpers/recipes/sdpa.py"], "07_x.ipynb": ["helpers/paths.py"]}
    stored = {name: _stamped([]) for name in used}
    for name, files in used.items():
        stored[name].metadata[N.META_KEY]["execution"]["code_files_sha256"] = N.code_files_hashes(files, root)
    assert HY.code_file_problems(stored, root) == []
    sdpa = root / "helpers" / "recipes" / "sdpa.py"
    sdpa.write_text(sdpa.read_text() + "\nEXTRA = 1\n")
    (problem,) = HY.code_file_problems(stored, root)
    assert problem == ("helpers/recipes/sdpa.py changed since the GPU run of 05_sdpa_attention.ipynb, "
                       "06_plan_serialization.ipynb, which used it: re-execute them on a GPU (python -m tools.execute "
                       "notebooks/05_sdpa_attention.ipynb notebooks/06_plan_serialization.ipynb)")
    (root / "helpers" / "paths.py").unlink()
    assert HY.code_file_problems(stored, root)[0].startswith("helpers/paths.py is gone since the GPU run of 05_")
    assert HY.unrecorded({"08_x.ipynb": _stamped([])}) == ["08_x.ipynb"]
    recent = _stamped([])
    recent.metadata[N.META_KEY]["execution"]["date"] = f"{N.CODE_FILES_SINCE}T10:00:00"
    assert HY.unrecorded({"08_x.ipynb": recent}) == []
    assert HY.code_file_problems({"08_x.ipynb": recent}, root) == [
        f"08_x.ipynb: its stamp of {N.CODE_FILES_SINCE}T10:00:00 records no course files its run used: re-execute it "
        f"on a GPU (python -m tools.execute notebooks/08_x.ipynb)"]
