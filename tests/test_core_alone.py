"""DEEP_DIVES = False skips every deep-dive cell, so a core cell must never need a name that only a deep dive
defines: read from the code, for every notebook (a GPU run of the cores proves the same, more slowly)."""
import ast
import json

import pytest

from tools.notebooks import cell_source, notebook_paths, split_core


def _tree(source: str) -> ast.AST:
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]  # IPython magics
    return ast.parse("\n".join(lines))


def bound_names(tree: ast.AST) -> set[str]:
    """Every name a cell binds, at any depth: assignments, loop and with targets, defs, imports, arguments."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
    return names


def loaded_names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def core_needs_from_deep_dives(nb) -> dict[str, list[str]]:
    """{core cell id: names it reads that only deep-dive cells bind}."""
    core, deep = split_core(nb)
    trees = lambda cells: [(c.get("id", ""), _tree(cell_source(c))) for c in cells if c["cell_type"] == "code"]
    core_trees, deep_trees = trees(core), trees(deep)
    in_core = set().union(*(bound_names(t) for _, t in core_trees))
    only_deep = set().union(*(bound_names(t) for _, t in deep_trees)) - in_core
    found = {cid: sorted(loaded_names(t) & only_deep) for cid, t in core_trees}
    return {cid: names for cid, names in found.items() if names}


def _nb(*cells):
    return {"cells": [{"cell_type": kind, "source": src, "id": f"c{i}"} for i, (kind, src) in enumerate(cells)]}


def test_a_core_cell_reading_a_deep_dive_name_is_found():
    nb = _nb(("code", "x = 1\ndef f(a):\n    return a + x"), ("code", "print(f(2), total)"),
             ("markdown", "# Deep dives"), ("code", "# Deep dive A: a sum\ntotal = sum(range(3))\nx = 5"))
    assert core_needs_from_deep_dives(nb) == {"c1": ["total"]}
    nb["cells"][1]["source"] = "%matplotlib inline\nprint(f(2))"
    assert core_needs_from_deep_dives(nb) == {}


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.stem)
def test_every_core_runs_without_its_deep_dives(path):
    found = core_needs_from_deep_dives(json.loads(path.read_text()))
    assert not found, f"{path.name}: core cells read names only a deep dive defines (DEEP_DIVES = False fails): {found}"
