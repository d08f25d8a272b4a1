"""The public surface: ``helpers/__init__.py`` exports exactly the names the notebooks and the reference
solutions use, and they reach ``helpers`` only through it, ``helpers.recipes``, ``helpers.lessons`` and the
worker programs of ``helpers.workers``."""
import ast
import json
from pathlib import Path

import pytest

import helpers
from tools.notebooks import notebook_paths
from tools.student import solutions_of

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "grader").glob("nb[0-9][0-9].py"))   # their reference solutions call H.X
WORKERS = sorted(p for p in (ROOT / "helpers" / "workers").glob("*.py") if p.name != "__init__.py")
PACKAGES = ("helpers.recipes", "helpers.lessons")          # imported as they are, beside the surface
PROGRAMS = {f"helpers.workers.{p.stem}" for p in WORKERS}  # a notebook may import a worker to show it


def _notebook_code(path: Path) -> str:
    """A notebook's code cells as one program, IPython's ``%`` and ``!`` lines left out."""
    cells = ["".join(c["source"]) for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    return "\n".join(line for line in "\n".join(cells).splitlines() if not line.lstrip().startswith(("%", "!")))


def _learner_code() -> dict[str, str]:
    """What a learner reads and runs: each notebook's code cells and each reference solution."""
    code = {path.name: _notebook_code(path) for path in notebook_paths()}
    code.update({f"grader/{path.name}": solutions_of(path.read_text()) for path in SOLUTIONS})
    return code


def surface_names(code: str) -> set[str]:
    """The ``X`` of every ``H.X`` in ``code``."""
    return {node.attr for node in ast.walk(ast.parse(code))
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "H"}


def reaches_past(code: str, surface) -> list[str]:
    """Where ``code`` reaches ``helpers`` other than through ``surface`` (``H.X`` with ``X`` in it), the packages
    ``PACKAGES`` or the worker programs ``PROGRAMS``: one entry per offending name."""
    found = [f"H.{name}" for name in sorted(surface_names(code) - set(surface))]
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.split(".")[0] == "helpers"]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "helpers":
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            inside = name.removeprefix("helpers.")
            if (name == "helpers" or inside in surface or name in PROGRAMS
                    or any(name == p or name.startswith(p + ".") for p in PACKAGES)):
                continue
            found.append(f"import {name}")
    return found


def test_the_surface_is_a_list_of_names_no_module():
    assert helpers.__all__ == sorted(set(helpers.__all__))
    modules = [name for name in helpers.__all__ if isinstance(getattr(helpers, name), type(helpers))]
    assert not modules, f"submodules on the surface: {modules}"


def test_every_export_is_used_by_a_notebook_or_a_solution():
    used = set().union(*(surface_names(code) for code in _learner_code().values()))
    unused = sorted(set(helpers.__all__) - used)
    assert not unused, f"helpers/__init__.py exports names no notebook or solution uses: {unused}"


SOURCES = {**_learner_code(), **{f"workers/{p.name}": p.read_text() for p in WORKERS}}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_no_notebook_solution_or_worker_reaches_past_the_surface(name):
    found = reaches_past(SOURCES[name], helpers.__all__)
    assert not found, f"{name} reaches past helpers' surface: {found}"


def test_the_finder_catches_each_way_past_the_surface():
    surface = ["check", "shared_legend"]
    assert reaches_past("H.check(a, b)\nH.shared_legend(fig)", surface) == []
    assert reaches_past("H.plotting.shared_legend(fig)", surface) == ["H.plotting"]
    assert reaches_past("H.has_gpu()", surface) == ["H.has_gpu"]
    assert reaches_past("from helpers import plotting", surface) == ["import helpers.plotting"]
    assert reaches_past("from helpers.timing.gpu import gpu_time", surface) == ["import helpers.timing.gpu.gpu_time"]
    assert reaches_past("import helpers.device", surface) == ["import helpers.device"]
    assert reaches_past("from helpers.workers import run_worker", surface) == ["import helpers.workers.run_worker"]
    allowed = ("import helpers as H\nfrom helpers import check\nfrom helpers.recipes import sdpa\n"
               "from helpers.lessons.transformer import Block\nfrom helpers.workers import plan_worker")
    assert reaches_past(allowed, surface) == []


def _course_imports(code: str) -> set[str]:
    """The course's modules (helpers, grader, tools) that ``code`` imports, and the names it takes from them."""
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return {name for name in found if name.split(".")[0] in ("helpers", "grader", "tools")}


def _resolves(name: str) -> bool:
    """Whether ``name`` is an importable module, or a name a module of the course defines."""
    import importlib

    try:
        importlib.import_module(name)
        return True
    except ImportError:
        module, _, attr = name.rpartition(".")
        try:
            return hasattr(importlib.import_module(module), attr)
        except ImportError:
            return False


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name[:2])
def test_every_course_module_a_notebook_imports_exists(path):
    """A rename in helpers or tools that a notebook's cells still import fails here, on the CPU, and not only when a
    GPU re-executes the notebook (01's deep dive B imports tools.gates)."""
    missing = sorted(n for n in _course_imports(_notebook_code(path)) if not _resolves(n))
    assert not missing, f"{path.name} imports what no longer exists: {missing}"


def test_the_import_finder_catches_a_renamed_module_or_name():
    code = "import helpers as H\nfrom tools.gates import read_needs\nfrom tools.renamed import x\nfrom helpers.graphs import gone\n"
    assert _course_imports(code) == {"helpers", "tools.gates", "tools.gates.read_needs", "tools.renamed",
                                     "tools.renamed.x", "helpers.graphs", "helpers.graphs.gone"}
    assert sorted(n for n in _course_imports(code) if not _resolves(n)) == [
        "helpers.graphs.gone", "tools.renamed", "tools.renamed.x"]
