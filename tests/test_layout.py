"""The package's shape: roles kept apart, no import cycles, no programs held in strings."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tools.notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent
HELPERS = ROOT / "helpers"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """helpers.* modules a module imports (at any level: a function-level import is still a dependency)."""
    tree = ast.parse(path.read_text())
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [f"{target}.{a.name}" for a in node.names]
            found.update(n for n in [target, *names] if n.startswith("helpers"))
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("helpers"))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in HELPERS.rglob("*.py")}
    return {name: {i for i in _imports(path) if i in modules and i != name} for name, path in modules.items()}


def test_no_import_cycle_among_helpers_modules():
    edges = _graph()
    state, stack = {}, []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for d in sorted(edges.get(m, ())):
            if state.get(d) == "open":
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(d):] + [d]))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)


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


def test_solutions_ship_inside_the_package_so_an_installed_helpers_finds_them():
    """H.solution reads helpers/exercises/solutions/ (a package, so setuptools installs it with helpers):
    nothing is looked up in a checkout folder outside the package."""
    import helpers.exercises as X

    package = Path(X.__file__).resolve().parent
    assert X.SOLUTIONS_DIR == package / "solutions"
    assert (X.SOLUTIONS_DIR / "__init__.py").exists()
    assert sorted(p.name[:2] for p in X.SOLUTIONS_DIR.glob("[0-9][0-9]_*.py")) == [p.name[:2] for p in notebook_paths()]


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
    for path in sorted([*HELPERS.rglob("*.py"), *(ROOT / "tools").glob("*.py"), *(ROOT / "tests").glob("*.py")]):
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
    assert _private_imports("from ..recipes._common import new_graph", "helpers.exercises.nb06") == [
        "helpers.recipes._common.new_graph"]
