"""Drafts (``drafts/``): rewritten notebooks written on the CPU that wait for their run of record on a GPU, and
the patch each one lands with. They are not the course yet; these checks keep them ready to land:

- each draft replaces a notebook of ``notebooks/`` of the same name, and carries no output and no stamp (nothing
  in it has run, so nothing may look as if it had);
- it passes the structural checks every notebook passes (``tests/test_notebooks_static.py``);
- its core meets the careful-read budget on what can be counted before a run (words and code; the run's outputs
  come on top), every core cell ≤ 20 lines and every code line ≤ 88 columns, every code cell parses, and each
  deep dive opens with its visible guard;
- its patch still applies to this tree, after the patches named before it, so main has not moved away from it.
"""
import ast
import json
import re
import subprocess
from pathlib import Path

import nbformat
import pytest

from tests import test_notebooks_static as static
from tools import reading_time as rt
from tools.notebooks import META_KEY, notebook_paths, split_core

ROOT = Path(__file__).resolve().parent.parent
DRAFTS = ROOT / "drafts"
DRAFT_PATHS = sorted(DRAFTS.glob("*.ipynb"))
PATCHES = sorted(DRAFTS.glob("*.patch"))
MAX_COLUMNS = 88
MAGIC = re.compile(r"^\s*[%!]", re.M)

pytestmark = pytest.mark.skipif(not DRAFT_PATHS and not PATCHES, reason="no drafts are waiting for a GPU run")


@pytest.fixture(params=DRAFT_PATHS, ids=lambda p: p.name)
def nb(request):
    raw = nbformat.read(request.param, as_version=nbformat.NO_CONVERT)
    raw["_path"] = request.param
    return raw


def _code(nb):
    return [c for c in nb.cells if c.cell_type == "code"]


def test_each_draft_replaces_a_notebook_of_the_course(nb):
    assert static._path(nb).name in {p.name for p in notebook_paths()}, "a draft is named as the notebook it replaces"


def test_a_draft_has_no_outputs_and_no_stamp(nb):
    ran = [c.id for c in _code(nb) if c.outputs or c.execution_count is not None]
    assert not ran, f"cells with outputs or execution counts (a draft has not run): {ran}"
    assert "execution" not in nb.metadata.get(META_KEY, {}), "a draft carries no execution stamp"


@pytest.mark.parametrize("check", [static.test_valid_nbformat_45_with_cell_ids, static.test_kernelspec_and_colab_metadata,
                                   static.test_needs_are_read_from_the_code_and_no_metadata_copies_them,
                                   static.test_title_cell_has_badge_to_own_path, static.test_setup_cell_imports_helpers,
                                   static.test_has_parameters_cell, static.test_ends_with_takeaways_and_exercises,
                                   static.test_no_absolute_local_paths], ids=lambda f: f.__name__[5:])
def test_a_draft_passes_the_notebooks_structural_checks(nb, check):
    check(nb)


def test_every_code_cell_parses_and_no_line_is_over_88_columns(nb):
    for cell in _code(nb):
        ast.parse(MAGIC.sub("pass  # magic", cell.source))
        wide = [line for line in cell.source.splitlines() if len(line) > MAX_COLUMNS]
        assert not wide, f"cell {cell.id}: {len(wide)} lines over {MAX_COLUMNS} columns, e.g. {wide[0]!r}"


def test_the_core_meets_the_careful_budget_before_its_outputs(nb):
    book = rt.read(static._path(nb))
    found = rt.careful_problems([book])
    assert not [line for line in found if not line.startswith("all cores")], found


def test_every_deep_dive_opens_with_its_guard(nb):
    _, deep = split_core(json.loads(static._path(nb).read_text()))
    assert deep and rt.unguarded(deep) == []
    headings = [c.source.splitlines()[0] for c in nb.cells if c.cell_type == "markdown"
                and c.source.startswith("## Deep dive ")]
    guards = [c.source for c in _code(nb) if rt.GUARD.match(c.source)]
    assert len(guards) == len(headings), f"{len(headings)} deep dives, {len(guards)} guards"
    for heading, guard in zip(headings, guards):
        letter = heading.split()[3]
        assert guard.lstrip().startswith(f'H.deep_dive("{letter}", '), (heading, guard)


def test_the_patches_still_apply_in_order(tmp_path):
    """Applied in name order (issue-51 before issue-52), each to the tree the ones before it left: a copy of the files
    they touch, so main stays as it is."""
    if not PATCHES:
        pytest.skip("no patches are waiting")
    touched = {m for patch in PATCHES for m in re.findall(r"^diff --git a/(\S+) b/", patch.read_text(), re.M)}
    for name in touched:
        if (ROOT / name).exists():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    for patch in PATCHES:
        done = subprocess.run(["git", "apply", str(patch)], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, f"{patch.name} no longer applies after the ones before it: {done.stderr.strip()}"
