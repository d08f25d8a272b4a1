"""The cuDNN frontend's API as the course counts it: one list of the method names a graph, plan, handle or cache
has, the pattern of an API reference in a line of code, the frontend calls in a piece of code, and whether a
function's code reaches the frontend.

``tools.reading_time`` counts API references per notebook with ``API_REF``; the website's API index lists
``frontend_names``; the test of the reference solutions asks ``idle_reason`` whether each one does any frontend work
at all (a solution emptied by mistake, or one that lets torch compute the answer, would otherwise pass every CPU test).
"""
from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

# Methods of a graph, plan, handle or kernel cache (the module's own names, ``cudnn.X``, count whatever X is).
FRONTEND_METHODS = (
    "tensor", "tensor_like", "conv_fprop", "conv_dgrad", "conv_wgrad", "matmul", "pointwise", "add", "mul", "sub",
    "div", "relu", "gelu", "silu", "tanh", "sigmoid", "relu_backward", "gelu_backward", "scale", "bias",
    "reduction", "sdpa", "sdpa_backward", "sdpa_fp8", "sdpa_fp8_backward", "layernorm", "layernorm_backward",
    "rmsnorm", "rmsnorm_backward", "batchnorm", "batchnorm_backward", "batchnorm_inference", "genstats",
    "validate", "build_operation_graph", "create_execution_plans", "check_support", "build_plans", "build",
    "build_plan_at_index", "get_execution_plan_count", "execute", "execute_plan_at_index", "select_plan",
    "get_workspace_size", "get_workspace_size_plan_at_index", "deselect_engines", "deselect_workspace_greater_than",
    "deselect_behavior_notes", "deselect_numeric_notes", "select_behavior_notes", "select_numeric_notes",
    "set_uid", "set_output", "set_data_type", "set_dim", "set_stride", "set_name", "set_is_virtual", "get_uid",
    "serialize", "deserialize", "populate_cuda_graph", "update_cuda_graph", "get_plan_name_at_index",
    "get_engine_count", "get_knobs_for_plan_at_index", "query_tensor_attributes_of_uid", "get_behavior_notes",
    "get_behavior_notes_for_plan_at_index", "set_kernel_cache", "mark_output",
)
# Objects whose methods are not the frontend's, whatever their names (``H.build`` is the course's, ``torch.add``
# torch's).
NOT_FRONTEND = ("H", "torch", "F", "np", "plt", "pd", "math", "os", "sys", "json", "time", "re", "pathlib",
                "subprocess", "self", "ax", "axes", "fig")
API_REF = re.compile(r"(?<![\w.])cudnn\.\w+|\b(?!(?:" + "|".join(NOT_FRONTEND) + r")\b)\w+(?:\[[^\]]*\])?\.(?:"
                     + "|".join(FRONTEND_METHODS) + r")\(")

# Names a torch tensor (or a set) has too, with one operand fewer: ``g.add(a, b)`` is the frontend's, ``t.add(r)``
# torch's, ``g.relu(x)`` the frontend's, ``t.relu()`` torch's. Such a call counts with the frontend's operands only.
SHARED_WITH_TORCH = {"add": 2, "mul": 2, "sub": 2, "div": 2, "matmul": 2,
                     "relu": 1, "gelu": 1, "silu": 1, "tanh": 1, "sigmoid": 1}
# A graded output may also come from replaying a CUDA graph that captured frontend work (notebook 08).
REPLAY = "replay"
# A body that is one of these statements does nothing, whatever the rest of its module holds.
NO_OP = {"pass": "`pass`", "...": "`...`", "return": "a bare `return`", "return None": "`return None`",
         "raise NotImplementedError": "`raise NotImplementedError`"}


def _statement_kind(node: ast.stmt) -> str | None:
    """The ``NO_OP`` key ``node`` is, or None."""
    if isinstance(node, ast.Pass):
        return "pass"
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and node.value.value is Ellipsis:
        return "..."
    if isinstance(node, ast.Return):
        if node.value is None:
            return "return"
        if isinstance(node.value, ast.Constant) and node.value.value is None:
            return "return None"
    if isinstance(node, ast.Raise) and node.exc is not None:
        called = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        if isinstance(called, ast.Name) and called.id == "NotImplementedError":
            return "raise NotImplementedError"
    return None


def frontend_names(tree: ast.AST) -> list[str]:
    """The frontend names ``tree``'s code uses, in the order they stand, once each: ``cudnn.X`` (the module's own
    names, not ``torch.backends.cudnn``'s), or a method of ``FRONTEND_METHODS`` called on anything but the course's
    and torch's objects, a name torch's tensors share counted only with the frontend's operands
    (``SHARED_WITH_TORCH``)."""
    called = {id(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    found = []
    for sub in sorted((n for n in ast.walk(tree) if isinstance(n, ast.Attribute)), key=lambda n: (n.lineno, n.col_offset)):
        owner = sub.value.id if isinstance(sub.value, ast.Name) else None
        call = called.get(id(sub))
        if owner == "cudnn":
            found.append(f"cudnn.{sub.attr}")
        elif call is not None and sub.attr in FRONTEND_METHODS and owner not in NOT_FRONTEND \
                and len(call.args) >= SHARED_WITH_TORCH.get(sub.attr, 0):
            found.append(sub.attr)
    return list(dict.fromkeys(found))


def _reaches_frontend(node: ast.AST) -> bool:
    """Whether ``node``'s own code names the frontend (``frontend_names``), builds with ``H.build``, or replays a CUDA
    graph."""
    if frontend_names(node):
        return True
    return any(isinstance(sub, ast.Attribute) and (sub.attr == REPLAY or (sub.attr == "build" and
               isinstance(sub.value, ast.Name) and sub.value.id == "H")) for sub in ast.walk(node))


def idle_reason(fn) -> str | None:
    """Why the function ``fn`` does no frontend work, in one phrase, or None when it does some: its body (past its
    docstring) is one of ``NO_OP``, or neither it nor any function of its own module it calls, directly or through
    another, reaches the frontend (``_reaches_frontend``)."""
    path = Path(inspect.unwrap(fn).__code__.co_filename)
    tree = ast.parse(path.read_text())
    local = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    root = local.get(fn.__name__)
    if root is None:
        return f"it is not a function defined at the top of {path.name}"
    body = root.body[1:] if ast.get_docstring(root) is not None else root.body
    if not body:
        return "its body is only a docstring"
    if len(body) == 1 and _statement_kind(body[0]):
        return f"its body is only {NO_OP[_statement_kind(body[0])]}"
    todo, seen = [root], {root.name}
    while todo:
        node = todo.pop()
        if _reaches_frontend(node):
            return None
        for call in (c for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)):
            if call.func.id in local and call.func.id not in seen:
                seen.add(call.func.id)
                todo.append(local[call.func.id])
    return "it never reaches the frontend (no cudnn call, graph method, H.build or CUDA-graph replay)"
