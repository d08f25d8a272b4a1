"""Checks on the committed notebooks that need no GPU (these run in CI)."""
import re
from pathlib import Path

import nbformat
import pytest

from tools import notebooks as N
from tools import fork as FK
from tools import hygiene as HY
from tools import results_csv as RC
from tools import student as ST
from tools.gates import read_needs
from tools.notebooks import META_KEY, code_hash, stamp

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
NOTEBOOKS = N.notebook_paths(NB_DIR)
SLUG = FK.repository(ROOT)


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"


def test_numbering_is_contiguous_from_01():
    numbers = [p.name[:3] for p in NOTEBOOKS]
    assert all(re.fullmatch(r"\d\d_", n) for n in numbers), f"every notebook is named NN_name.ipynb: {numbers}"
    assert [int(n[:2]) for n in numbers] == list(range(1, len(numbers) + 1)), numbers
    assert NOTEBOOKS == sorted(NB_DIR.glob("*.ipynb")), "every notebook in notebooks/ is named NN_name.ipynb"


@pytest.fixture(params=NOTEBOOKS, ids=lambda p: p.name)
def nb(request):
    raw = nbformat.read(request.param, as_version=nbformat.NO_CONVERT)
    raw["_path"] = request.param  # not written back
    return raw


def _path(nb):
    return nb["_path"]


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_valid_nbformat_45_with_cell_ids(nb):
    path = _path(nb)
    clean = nbformat.read(path, as_version=nbformat.NO_CONVERT)
    nbformat.validate(clean)
    assert (clean.nbformat, clean.nbformat_minor) >= (4, 5), f"{path.name}: nbformat {clean.nbformat}.{clean.nbformat_minor}"
    ids = [c.get("id") for c in clean.cells]
    assert all(ids) and len(set(ids)) == len(ids), f"{path.name}: every cell needs a unique id"


def test_kernelspec_and_colab_metadata(nb):
    meta = nb.metadata
    assert meta.get("kernelspec", {}).get("name") == "python3"
    assert meta.get("accelerator") == "GPU", "Colab must open it with a GPU runtime"
    assert "colab" in meta and meta["colab"].get("gpuType"), "Colab metadata with a gpuType"


def test_needs_are_read_from_the_code_and_no_metadata_copies_them(nb):
    """A notebook's gates live in its lines (tools/gates.py); its metadata holds only the SM floor its title states."""
    needs = read_needs(nb)   # raises on a gate it cannot read
    assert needs.gpu, "the setup cell calls H.require_gpu()"
    assert set(nb.metadata.get(META_KEY, {})) <= {"execution", "min_sm"}, nb.metadata[META_KEY].keys()
    floor = nb.metadata.get(META_KEY, {}).get("min_sm")
    assert floor is None or (isinstance(floor, int) and f"sm{floor}" in nb.cells[0].source), (
        f"min_sm {floor}: the title cell's Hardware needs states the floor")
    copies = [c.id for c in nb.cells if META_KEY in c.get("metadata", {})]
    assert not copies, f"cells with {META_KEY} metadata (a gate goes in the code): {copies}"


def test_title_cell_has_badge_to_own_path(nb):
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith(f"# {_path(nb).name[:2]} · ")
    badge = f"https://colab.research.google.com/github/{SLUG}/blob/main/notebooks/{_path(nb).name}"
    assert badge in first.source, f"badge must point at {badge}"
    assert "What you will learn" in first.source and "Hardware needs" in first.source


def test_setup_cell_imports_helpers(nb):
    setup = [c for c in _code(nb) if "setup" in c.metadata.get("tags", [])]
    assert setup, "a code cell tagged 'setup'"
    src = setup[0].source
    assert "import helpers" in src and "google.colab" in src and "H.require_gpu()" in src
    assert src.index("H.require_gpu()") < src.index("H.load_cudnn()"), (
        "no GPU is the first thing a machine without one should hear: require_gpu() before load_cudnn()")
    assert _code(nb).index(setup[0]) == 0, "the setup cell is the first code cell"


def test_has_parameters_cell(nb):
    assert any("parameters" in c.metadata.get("tags", []) for c in _code(nb))


def test_ends_with_takeaways_and_exercises(nb):
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert "Takeaways" in text and "Exercise" in text


def test_no_absolute_local_paths(nb):
    bad = re.compile(r"(/work/|/home/[a-z]|/Users/|/root/|/tmp/bash_jobs|C:\\\\Users)")
    for cell in nb.cells:
        assert not bad.search(cell.source), f"{_path(nb).name}: absolute local path in a cell: {bad.search(cell.source)[0]}"


def test_outputs_stored_without_errors(nb):
    code = _code(nb)
    assert all(c.get("execution_count") for c in code), f"{_path(nb).name}: some code cells were never executed"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{_path(nb).name}: stored error output {errors[0].ename}: {errors[0].evalue}"
    assert sum(len(c.outputs) for c in code) >= len(code) // 2, "most code cells have stored outputs"


def test_stamp_matches_current_code(nb):
    entry = stamp(nb)
    assert entry, f"{_path(nb).name}: not executed by tools.execute (no {META_KEY}.execution stamp)"
    for key in ("gpu", "torch", "cudnn_backend", "cudnn_frontend", "date", "runtime_s", "code_sha256"):
        assert entry.get(key), f"stamp lacks {key}"
    assert entry["code_sha256"] == code_hash(nb), (
        f"{_path(nb).name}: code changed since its last GPU run — re-execute it (make run)")


def test_every_stored_output_is_the_one_its_gpu_run_wrote():
    """Every code cell's stored outputs hash to what the notebook's GPU run wrote (text, HTML, figures; no number
    masked), and every compared cell's, sanitised as nbval sanitises them, to what it recorded: a hand-edited output
    fails here, on CPU, compared by nbval or not. One test for all notebooks; a stamp written before tools.execute
    recorded the hashes fails it with one line per notebook."""
    problems = [line for path in NOTEBOOKS for line in HY.output_problems(nbformat.read(path, as_version=4), path.name)]
    assert not problems, "\n".join(problems)


def test_the_course_code_each_run_used_is_the_code_as_it_is():
    """Each stamp hashes the helpers and grader files its GPU run used (``code_files_sha256``): editing one after
    the run fails here, naming the notebooks to re-execute. Stamps from before that record are listed as skipped."""
    stored = {p.name: nbformat.read(p, as_version=4) for p in NOTEBOOKS}
    problems = HY.code_file_problems(stored)
    assert not problems, "\n".join(problems)
    missing = HY.unrecorded(stored)
    if missing:
        pytest.skip(f"{len(missing)} stamps predate the record of the course files their run used "
                    f"({', '.join(n[:2] for n in missing)}): re-execute them on a GPU to record it")


def test_outputs_hold_no_machine_specific_paths(nb):
    problems = HY.path_problems(nb, _path(nb).name)
    assert not problems, "\n".join(problems)


def test_every_plotting_cell_stores_its_figure(nb):
    problems = HY.figure_problems(nb, _path(nb).name)
    assert not problems, "\n".join(problems) + "\nre-execute with `python -m tools.execute` (inline backend)"


def test_results_csv_matches_the_numbers_printed_in_the_stored_outputs():
    stored = {p.name: nbformat.read(p, as_version=4) for p in NOTEBOOKS}
    problems = RC.results_problems(stored, ROOT / "results")
    assert not problems, "\n".join(problems) + "\n(`python -m tools.cli sync-results` rewrites the CSV)"


def test_badges_clone_urls_and_pyproject_name_one_repository():
    mentions = FK.repo_mentions(ROOT)
    others = [m for m in mentions if m[2] != SLUG]
    assert not others, f"not {SLUG}: {others} (`make fork REPO=OWNER/NAME` rewrites them all)"
    readme_badges = {what.removeprefix("badge for ") for f, what, _ in mentions if f == "README.md"}
    assert readme_badges == {f"notebooks/{p.name}" for p in NOTEBOOKS} | {
        f"notebooks/{p.name} on {ST.HANDOUT_BRANCH}" for p in NOTEBOOKS}, \
        "one Open-in-Colab badge per notebook row, and one hand-out badge per notebook (README, Exercises)"
    clones = {f for f, what, _ in mentions if what == "setup cell clone URL"}
    assert clones == {p.name for p in NOTEBOOKS}, "every setup cell clones the course"


def test_the_full_notebooks_open_and_clone_main_and_the_readme_hands_out_the_student_branch():
    """The stored notebooks (answers included) open main and clone the default branch; the README's hand-out
    table opens the branch `make handout-branch` writes, one badge per notebook, in the Exercises section."""
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        assert {branch for cell in nb.cells for _, branch, _ in FK.colab_badges(cell.source)} == {FK.MAIN}, path.name
        setup = next(c.source for c in nb.cells if "setup" in c.metadata.get("tags", []))
        assert FK.cloned_branch(setup) is None, f"{path.name}: the full notebook clones the default branch"
    readme = (ROOT / "README.md").read_text()
    exercises = readme[readme.index("## Exercises"):readme.index("\n## ", readme.index("## Exercises") + 1)]
    handout = [(path, branch) for _, branch, path in FK.colab_badges(exercises)]
    assert handout == [(f"notebooks/{p.name}", ST.HANDOUT_BRANCH) for p in NOTEBOOKS]
    assert "hand-out (no answers)" in exercises and "make handout-branch" in exercises
    assert f"git push origin {ST.HANDOUT_BRANCH}" in exercises
