"""What a notebook needs, read from the lines a learner reads: its code. The rules of each feature live in one
table, ``helpers.features.FEATURES``; a notebook only names the features, once, where it uses them:

- ``NAME = H.gate("feature")`` declares a gate. Every code cell from there on that names ``NAME`` (typically
  ``if NAME: ... else: print("skipped:", NAME.reason)``), or that calls ``H.gate("feature")`` itself, is gated
  by the feature.
- ``H.grade_solution("NN.name")`` is gated by what the exercise's checker declares, ``@checker(needs=...)``.
- ``NAME.require()`` (or ``H.gate("feature").require()``) as a statement of its own stops the notebook where the
  feature is missing: the whole notebook needs it.
- ``H.require_gpu()``: the notebook needs a GPU.

One fact has no code line: the SM floor a title cell states ("sm70 or newer"), kept in the notebook's metadata
as ``cudnn_course.min_sm`` and read here with the rest.

The test harness (conftest.py), ``make run`` (tools/execute.py) and the website's GPU table (tools/gpu_matrix.py)
read a notebook's needs through ``read_needs``.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from .notebooks import META_KEY, cell_source

HELPERS = "H"   # the name every setup cell imports helpers under


@dataclass(frozen=True)
class Needs:
    gpu: bool                           # H.require_gpu() is called
    min_sm: int | None                  # cudnn_course.min_sm
    features: tuple[str, ...]           # required: the notebook stops without them
    cells: tuple[tuple[str, ...], ...]  # per code cell, numbered as nbval numbers them: the features gating it

    @property
    def requires(self) -> dict:
        """``{"gpu": bool, "min_sm": int (when set), "features": [...]}``, as
        ``helpers.features.notebook_requirements_met`` evaluates it."""
        found = {"gpu": self.gpu, "features": list(self.features)}
        return found if self.min_sm is None else dict(found, min_sm=self.min_sm)

    @property
    def gated(self) -> list[str]:
        """Features that gate some cells but not the whole notebook, in order of first appearance."""
        seen = []
        for features in self.cells:
            seen += [f for f in features if f not in seen and f not in self.features]
        return seen


def read_needs(nb) -> Needs:
    """Read a notebook's needs from its code cells, in order (a gate named in a cell above its declaration does
    not gate it). Raises ``ValueError``, naming the cell and line, for a gate or exercise key that is not a string
    literal, an unknown feature, or an exercise without a checker."""
    gates, cells, required, gpu = {}, [], [], False
    for number, cell in enumerate(c for c in nb["cells"] if c["cell_type"] == "code"):
        try:
            tree = _parse(cell_source(cell))
            gates.update(_declared_gates(tree))
            found = _cell_features(tree, gates)
            required += [f for f in _required(tree, gates) if f not in required]
        except ValueError as exc:
            raise ValueError(f"code cell {number} (id {cell.get('id')}): {exc}") from None
        gpu = gpu or any(_helpers_call(node, "require_gpu") for node in ast.walk(tree))
        cells.append(found)
    min_sm = nb.get("metadata", {}).get(META_KEY, {}).get("min_sm")
    return Needs(gpu, None if min_sm is None else int(min_sm), tuple(required), tuple(cells))


def _parse(src: str) -> ast.Module:
    try:
        return ast.parse(src)
    except SyntaxError:  # IPython syntax (%magic, !shell): read what IPython runs
        from IPython.core.inputtransformer2 import TransformerManager

        return ast.parse(TransformerManager().transform_cell(src))


def _helpers_call(node, name: str) -> bool:
    """Is ``node`` a call ``H.name(...)``?"""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == name
            and isinstance(node.func.value, ast.Name) and node.func.value.id == HELPERS)


def _literal(call: ast.Call, what: str) -> str:
    arg = call.args[0] if call.args else None
    if not (isinstance(arg, ast.Constant) and isinstance(arg.value, str)):
        raise ValueError(f"line {call.lineno}: {HELPERS}.{what}() needs its name as a string literal, so that the "
                         "harness can read it")
    return arg.value


def _feature(call: ast.Call) -> str:
    from helpers.features import FEATURES

    feature = _literal(call, "gate")
    if feature not in FEATURES:
        raise ValueError(f"line {call.lineno}: unknown feature {feature!r}; known: {sorted(FEATURES)}")
    return feature


def _declared_gates(tree: ast.Module) -> dict:
    """``{NAME: feature}`` for each ``NAME = H.gate("feature")`` in the cell."""
    return {node.targets[0].id: _feature(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
            and _helpers_call(node.value, "gate")}


def _cell_features(tree: ast.Module, gates: dict) -> tuple[str, ...]:
    """The features gating one cell, in the order the source names them."""
    found = []
    for node in ast.walk(tree):
        if _helpers_call(node, "gate"):
            found.append((node.lineno, node.col_offset, (_feature(node),)))
        elif _helpers_call(node, "grade_solution"):
            found.append((node.lineno, node.col_offset, _checker_needs(node)))
        elif isinstance(node, ast.Name) and node.id in gates:
            found.append((node.lineno, node.col_offset, (gates[node.id],)))
    ordered = []
    for *_, features in sorted(found):
        ordered += [f for f in features if f not in ordered]
    return tuple(ordered)


def _checker_needs(call: ast.Call) -> tuple[str, ...]:
    """What ``@checker(needs=...)`` declares for the exercise a ``H.grade_solution("NN.name")`` call grades."""
    from helpers.errors import CourseError
    from grader import needs

    try:
        return needs(_literal(call, "grade_solution"))
    except CourseError as exc:
        raise ValueError(f"line {call.lineno}: {exc}") from None


def _required(tree: ast.Module, gates: dict) -> list[str]:
    """Features the cell ``.require()``s in a statement of its own, outside any branch or function."""
    found = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "require"):
            continue
        target = call.func.value
        if isinstance(target, ast.Name) and target.id in gates:
            found.append(gates[target.id])
        elif _helpers_call(target, "gate"):
            found.append(_feature(target))
    return found
