"""The public surface: ``helpers/__init__.py`` exports at most 30 names, each used by a notebook or a reference
solution or planned for a core (CONTRIBUTING.md's plan of the cores, whose cores call at most 20); notebooks reach
``helpers`` as ``H.`` only through it (a deep dive imports anything else from its module);
a name the surface dropped still resolves, with a DeprecationWarning naming its replacement, while a stored notebook
calls it (``OLD_NAMES_STILL_CALLED``, until issue 56)."""
import ast
import json
import re
import warnings
from pathlib import Path

import pytest

import helpers
from tools.notebooks import notebook_paths
from tools.student import solutions_of

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = sorted((ROOT / "grader").glob("nb[0-9][0-9].py"))   # their reference solutions call H.X
WORKERS = sorted(p for p in (ROOT / "helpers" / "workers").glob("*.py") if p.name != "__init__.py")


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
    """Where ``code`` reaches ``helpers`` through ``H.`` other than by a name of ``surface``: one entry per offending
    name (``H.has_gpu``, or a module's ``H.plotting``). Importing from a module (``from helpers.timing.sweep import
    perf_sweep``) is how a deep dive or a worker takes what the surface does not hold."""
    return [f"H.{name}" for name in sorted(surface_names(code) - set(surface))]


def test_the_surface_is_a_list_of_names_no_module():
    assert helpers.__all__ == sorted(set(helpers.__all__))
    modules = [name for name in helpers.__all__ if isinstance(getattr(helpers, name), type(helpers))]
    assert not modules, f"submodules on the surface: {modules}"


PLAN_HEADING = "## The plan of the eight cores"
PLAN_COLUMN = "`H.*` it calls"


def planned_core_names(text: str) -> dict[str, set[str]]:
    """``{notebook: {H names}}`` from the plan table of CONTRIBUTING.md (``text``): the column ``PLAN_COLUMN``."""
    rows = [line for line in plan_section(text).splitlines() if line.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    column = header.index(PLAN_COLUMN)
    plan = {}
    for row in rows[2:]:
        cells = [c.strip() for c in row.strip("|").split("|")]
        plan[re.match(r"\**(\d\d)", cells[0]).group(1)] = set(re.findall(r"`(?:H\.)?([A-Za-z_]\w*)\(?[^`]*`", cells[column]))
    return plan


def plan_section(text: str) -> str:
    return text.split(PLAN_HEADING, 1)[1].split("\n## ", 1)[0]


CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text()
PLAN = planned_core_names(CONTRIBUTING)
PLANNED = set(re.findall(r"\bH\.([A-Za-z_]\w*)", plan_section(CONTRIBUTING))) | set().union(*PLAN.values())


def test_the_surface_has_at_most_30_names_and_the_planned_cores_call_at_most_20():
    assert len(helpers.__all__) <= 30, f"{len(helpers.__all__)} names on the surface: {helpers.__all__}"
    assert sorted(PLAN) == [f"{n:02d}" for n in range(1, 9)], f"the plan has rows {sorted(PLAN)}"
    cores = set().union(*PLAN.values())
    assert cores <= set(helpers.__all__), f"the plan's cores call names off the surface: {sorted(cores - set(helpers.__all__))}"
    assert len(cores) <= 20, f"the eight cores call {len(cores)} names: {sorted(cores)}"


def test_every_export_is_used_by_a_notebook_or_a_solution_or_planned_for_a_core():
    used = set().union(*(surface_names(code) for code in _learner_code().values()), PLANNED)
    unused = sorted(set(helpers.__all__) - used)
    assert not unused, f"helpers/__init__.py exports names no notebook or solution uses and no core plans: {unused}"


# Every name the surface dropped that a notebook or a reference solution still calls, and who calls it. A rewrite
# that stops calling one updates this table; an empty row goes, and issue 56 removes the names with the table.
OLD_NAMES_STILL_CALLED = {
    "alternating_rounds": ["08"],
    "bar_compare": ["08"],
    "benchmark": ["08"],
    "build": ["06", "07", "08", "grader/nb02.py", "grader/nb04.py", "grader/nb05.py", "grader/nb06.py", "grader/nb07.py"],
    "color_for": ["06", "07", "08"],
    "cuda_call": ["08", "grader/nb08.py"],
    "dtype_name": ["06", "08"],
    "gpu_ms_or_reason": ["07", "08"],
    "GraphIO": ["07", "grader/nb02.py", "grader/nb04.py", "grader/nb05.py", "grader/nb07.py"],
    "heuristic_modes": ["grader/nb01.py"],
    "host_timing": ["08"],
    "host_us": ["08"],
    "line_compare": ["07", "08"],
    "mark_log_axes": ["06", "08"],
    "peak_tflops": ["07"],
    "perf_sweep": ["07", "08"],
    "plain_log_ticks": ["06"],
    "plot_sweep": ["07", "08"],
    "rel_error": ["08"],
    "shared_legend": ["08"],
    "timing_table": ["08"],
    "use_style": ["06"],
    "WorkerError": ["07"],
}
# Names the rewritten cores stopped calling. They stay resolvable (helpers.RENAMED / MOVED) until issue 56, so
# that helpers/__init__.py, which every stamp records, does not change before the last run of record.
NO_LONGER_CALLED = {
    'check_table', 'describe_tensors', 'device_info', 'feature_table', 'gpu_clocks', 'gpu_timing_or_reason',
    'HATCH', 'hatch_handle', 'kernel_times', 'legend_outside', 'libcudnn_candidates', 'loaded_library',
    'measured_bandwidth_gbps', 'measured_peak_tflops', 'notebook_requirements_met', 'power_verdict',
    'sample_clocks', 'short_kernel_name', 'to_fp8', 'versions',
}


def old_names_called() -> dict[str, list[str]]:
    dropped = set(helpers.RENAMED) | set(helpers.MOVED)
    found = {}
    for name, code in sorted(_learner_code().items()):
        for old in sorted(surface_names(code) & dropped):
            found.setdefault(old, []).append(name[:2] if name[:2].isdigit() else name)
    return found


def test_the_table_of_old_names_lists_each_notebook_still_calling_one():
    assert old_names_called() == OLD_NAMES_STILL_CALLED, (
        "rewrite OLD_NAMES_STILL_CALLED as: " + json.dumps(old_names_called(), indent=1))


def test_no_old_name_is_kept_that_nothing_calls():
    kept = set(helpers.RENAMED) | set(helpers.MOVED)
    assert sorted(kept - set(OLD_NAMES_STILL_CALLED) - NO_LONGER_CALLED) == [], "drop these from helpers.RENAMED / MOVED"
    assert NO_LONGER_CALLED <= kept and not NO_LONGER_CALLED & set(OLD_NAMES_STILL_CALLED)
    assert not kept & set(helpers.__all__)


@pytest.mark.parametrize("name", sorted(set(helpers.RENAMED) | set(helpers.MOVED)))
def test_an_old_name_resolves_with_a_deprecation_warning_naming_its_replacement(name):
    import importlib

    module = helpers.RENAMED[name][0] if name in helpers.RENAMED else helpers.MOVED[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(helpers, name)
    assert value is getattr(importlib.import_module(module), name)
    assert [w.category for w in caught] == [DeprecationWarning]
    message = str(caught[0].message)
    assert message.startswith(f"H.{name} has left the toolbox's surface: use ") and helpers.replacement(name) in message


def test_an_old_name_stays_quiet_under_pythons_default_filters():
    """A stored notebook's outputs, which nbval compares, must not gain a warning: the warning is attributed to
    helpers, which the default filters (and IPython's, that show only ``__main__``'s) keep quiet."""
    def in_a_notebook_cell():
        with warnings.catch_warnings(record=True) as caught:
            warnings.resetwarnings()
            warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
            warnings.filterwarnings("ignore", category=DeprecationWarning, append=True)
            exec("H.bar_compare", {"__name__": "__main__", "H": helpers})
        return caught

    assert in_a_notebook_cell() == []
    shown = warnings.warn   # the same filters do show a warning blamed on the cell: the check can fail
    try:
        warnings.warn = lambda message, category, stacklevel=1: shown(message, category, stacklevel=3)
        assert [w.category for w in in_a_notebook_cell()] == [DeprecationWarning]
    finally:
        warnings.warn = shown


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        helpers.no_such_name


SOURCES = {**_learner_code(), **{f"workers/{p.name}": p.read_text() for p in WORKERS}}


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_no_notebook_solution_or_worker_reaches_past_the_surface(name):
    found = reaches_past(SOURCES[name], set(helpers.__all__) | set(OLD_NAMES_STILL_CALLED))
    assert not found, f"{name} reaches past helpers' surface: {found}"


def test_the_finder_catches_each_way_past_the_surface():
    surface = ["check", "figure"]
    assert reaches_past("H.check(a, b)\nH.figure()", surface) == []
    assert reaches_past("H.plotting.shared_legend(fig)", surface) == ["H.plotting"]
    assert reaches_past("H.has_gpu()", surface) == ["H.has_gpu"]
    assert reaches_past("from helpers.timing.sweep import perf_sweep\nimport helpers as H", surface) == []


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
