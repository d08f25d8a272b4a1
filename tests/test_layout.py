"""The package's shape: roles kept apart, no import cycles, no programs held in strings."""
import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tools.notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"


PACKAGES = ("helpers", "grader", "tools")   # the import graph covers all three
TOOLBOX_ENTRIES = {"helpers": {"grader"}}   # helpers/__init__: H.exercise and H.grade_solution, imported on call


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = ROOT, packages=PACKAGES) -> set[str]:
    """Dotted names from ``packages`` a module imports, at any level (a function-level import is still a
    dependency)."""
    tree = ast.parse(path.read_text())
    package = _module_name(path, root) if path.name == "__init__.py" else _module_name(path, root).rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names]
            found.update(n for n in [target, *names] if n.split(".")[0] in packages)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] in packages)
    return found


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    """``{module: the modules importing it runs}`` over ``packages``. Importing ``a.b.c`` runs the packages
    ``a`` and ``a.b`` first: they count, except the importer's own packages (already running when it does),
    unless it names one itself (``import helpers as H`` in a worker)."""
    modules = {_module_name(p, root): p for top in packages for p in (root / top).rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        deps = set()
        for target in _imports(path, root, packages):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                prefix = ".".join(parts[:i])
                if prefix in modules and prefix != name and (i == len(parts) or prefix not in own):
                    deps.add(prefix)
        graph[name] = deps
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of ``graph``: each group of modules that import one another, directly or not (a strongly
    connected component of more than one module), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(m):
        index[m] = low[m] = len(index)
        stack.append(m)
        on_stack.add(m)
        for d in sorted(graph.get(m, ())):
            if d not in index:
                visit(d)
                low[m] = min(low[m], low[d])
            elif d in on_stack:
                low[m] = min(low[m], index[d])
        if low[m] == index[m]:
            group = []
            while not group or group[-1] != m:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                found.append(sorted(group))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    return sorted(found)


@pytest.mark.parametrize("package", ["helpers", "grader", "tools"])
def test_no_import_cycle(package):
    """No circle, but for the toolbox's two entry points into the grader (``TOOLBOX_ENTRIES``): they import it when
    called, after both packages have loaded, and the grader uses the toolbox."""
    graph = {m: deps - TOOLBOX_ENTRIES.get(m, set()) for m, deps in import_graph().items()}
    cycles = [c for c in import_cycles(graph) if c[0].split(".")[0] == package]
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_cycle_finder_sees_a_circle_through_a_package(tmp_path):
    """graphs imports timing.host, so importing it runs timing/__init__; were that to import timing.gpu, which
    imports graphs, the circle closes through the package, though no two modules name each other."""
    files = {"a/__init__.py": "from .graphs import build\n", "a/graphs.py": "from .timing.host import StepTimer\n",
             "a/timing/__init__.py": "from .gpu import gpu_time\n", "a/timing/host.py": "",
             "a/timing/gpu.py": "def gpu_time():\n    from ..graphs import get_handle\n", "b/tool.py": "import a.graphs\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    graph = import_graph(tmp_path, ("a", "b"))
    assert graph["a.graphs"] == {"a.timing", "a.timing.host"} and graph["b.tool"] == {"a", "a.graphs"}
    assert import_cycles(graph) == [["a.graphs", "a.timing", "a.timing.gpu"]]
    (tmp_path / "a/timing/__init__.py").write_text("")
    assert import_cycles(import_graph(tmp_path, ("a", "b"))) == []


def test_helpers_never_import_the_maintainer_tools():
    for path in HELPERS.rglob("*.py"):
        assert "tools" not in {n.split(".")[0] for n in _raw_imports(path)}, path


def _raw_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_importing_helpers_is_cheap_and_needs_no_gpu():
    code = "import helpers, sys; print(sorted(m for m in sys.modules if m.startswith('tools')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def _code_cells(path: Path):
    nb = json.loads(path.read_text())
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            yield "".join(cell["source"])


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name[:2])
def test_no_program_is_held_in_a_string_or_assembled_from_source(path):
    """Worker programs are modules (helpers/workers) run with `python -m`, never written from a string."""
    for src in _code_cells(path):
        assert "inspect.getsource" not in src, f"{path.name} assembles a program from function sources"
        tree = ast.parse("\n".join(l for l in src.splitlines() if not l.lstrip().startswith(("%", "!"))))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.count("\n") > 8:
                assert not any(k in node.value for k in ("import ", "def ")), (
                    f"{path.name} holds a program in a string: {node.value[:60]!r}")


# graph definitions that belong to a recipe, and the notebook that teaches each
TAUGHT = {"conv_fprop": "02", "sdpa(": "05"}


@pytest.mark.parametrize("op, teacher", sorted(TAUGHT.items()))
def test_recipe_graphs_are_written_out_only_where_they_are_taught(op, teacher):
    """A later notebook imports the recipe instead of writing the graph again."""
    for path in notebook_paths():
        if path.name.startswith(teacher):
            continue
        for src in _code_cells(path):
            assert f".{op}" not in src, f"{path.name} writes the {op.rstrip('(')} graph again; import its recipe"


def test_each_notebooks_checkers_hold_their_reference_solutions_below_the_mark():
    """grader.solution reads a checker module below ``SOLUTIONS_MARK`` (the package ships it, so an installed course
    finds it; the hand-out cuts it there): one checker module per notebook, each with its solutions at the end."""
    import grader as X

    modules = sorted((ROOT / "grader").glob("nb[0-9][0-9].py"))
    assert [p.name[2:4] for p in modules] == [p.name[:2] for p in notebook_paths()]
    for path in modules:
        checkers, mark, solutions = path.read_text().partition(X.SOLUTIONS_MARK)
        assert mark and "@checker(" in checkers and "@checker(" not in solutions, path.name


def test_the_toolbox_reaches_the_grader_only_through_its_two_entry_points():
    """The learner's toolbox (helpers/) and the grader (grader/) are apart: no toolbox module imports the grader,
    except ``helpers/__init__``'s ``exercise`` and ``grade_solution``."""
    graph = import_graph(ROOT, ("helpers", "grader"))
    reaching = {m: sorted(d for d in deps if d.split(".")[0] == "grader") for m, deps in graph.items()
                if m.split(".")[0] == "helpers"}
    bad = {m: deps for m, deps in reaching.items() if deps and set(deps) - TOOLBOX_ENTRIES.get(m, set())}
    assert not bad, bad
    init = (HELPERS / "__init__.py").read_text()
    assert init.count("from grader import") == 2


def _private_imports(source: str, importer: str) -> list[str]:
    """Modules named ``_x`` imported from outside their own package (relative imports resolved from ``importer``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = importer.split(".")[:-node.level]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target + "." + a.name for a in node.names] if target else []
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            for i, part in enumerate(parts):
                if part.startswith("_") and not part.startswith("__") and not importer.startswith(".".join(parts[:i]) + "."):
                    found.append(name)
                    break
    return found


def test_no_private_module_is_imported_outside_its_package():
    """One public way in: helpers' private modules (``recipes._common`` ...) are used only inside their package."""
    bad = []
    for path in sorted([*HELPERS.rglob("*.py"), *(ROOT / "grader").glob("*.py"), *(ROOT / "tools").glob("*.py"),
                        *(ROOT / "tests").glob("*.py")]):
        importer = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        bad += [f"{path.relative_to(ROOT)}: {name}" for name in _private_imports(path.read_text(), importer)
                if name.startswith("helpers.")]
    for nb in notebook_paths():
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        code = "\n".join(l for l in code.splitlines() if not l.lstrip().startswith(("%", "!")))
        bad += [f"{nb.name}: {name}" for name in _private_imports(code, "notebook") if name.startswith("helpers.")]
    assert not bad, "\n".join(bad)


def test_the_private_import_finder_catches_one():
    assert _private_imports("from helpers.recipes._common import new_graph", "tests.test_x") == [
        "helpers.recipes._common.new_graph"]
    assert _private_imports("from ._common import new_graph", "helpers.recipes.sdpa") == []
    assert _private_imports("from ..recipes._common import new_graph", "helpers.lessons.attention") == [
        "helpers.recipes._common.new_graph"]


# ------------------------------------------------------------------ the README's first screen
def _readme() -> str:
    return (ROOT / "README.md").read_text()


def test_the_readmes_first_screen_says_what_how_and_where():
    """What the course is, the two commands and the CPU rule, and where to read it (the website, Colab): all in the
    first screen, before the notebook table. The rest of what the README held lives on the website's pages, so the
    whole file stays short."""
    from tools.site import site_url

    readme = _readme()
    first = readme[:readme.index("| # | notebook |")]
    for needed in ("NVIDIA cuDNN Frontend graph API", "make test", "make run", "Colab", site_url(),
                   "A CPU box runs the tests; notebooks need an NVIDIA GPU or Colab"):
        assert needed in first, needed
    assert len(first.splitlines()) <= 35, "the first screen: at most 35 lines"
    assert len(readme.splitlines()) <= 120, "the README is a first screen and its tables; details go on the website"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than '-' dropped, spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_inside_the_readme_names_one_of_its_headings_or_a_page_of_the_website():
    """tests/test_site.py checks the same links, anchors included, against the built website."""
    from tools.site import site_url

    readme = _readme()
    anchors = {_slug(line.lstrip("#")) for line in readme.splitlines() if line.startswith("#")}
    linked = set(re.findall(r"\]\(#([^)]+)\)", readme))
    assert linked <= anchors, linked - anchors
    pages = re.findall(re.escape(site_url()) + r"([\w-]+)\.html", readme)
    missing = [p for p in pages if not (ROOT / "site" / f"{p}.md").exists()]
    assert pages and not missing, missing



def test_checkers_make_their_inputs_without_the_lesson_recipes():
    """What a grader accepts must not change with a lesson: checker code (a checker module above its reference
    solutions, every other grader module whole) imports neither ``helpers.recipes`` nor ``helpers.lessons``; the
    reference solutions below the mark may, as a learner would (``grader/inputs.py`` makes the checkers' own)."""
    import grader as X

    bad = []
    for path in sorted((ROOT / "grader").glob("*.py")):
        text = path.read_text()
        tree = ast.parse(text.partition("\n" + X.SOLUTIONS_MARK)[0] if path.name.startswith("nb") else text)
        for node in ast.walk(tree):
            names = ([node.module or ""] + [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            bad += [f"{path.name}:{node.lineno} {n}" for n in names if n.startswith(("helpers.recipes", "helpers.lessons"))]
    assert not bad, "checker code importing a lesson recipe: " + ", ".join(bad)
