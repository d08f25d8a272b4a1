"""The grader: checkers that grade a learner's exercise in one line, and the reference solutions they must accept.

The notebooks reach it through two names of the toolbox, ``H.exercise`` and ``H.grade_solution``::

    def residual_block(x, w, b, r, y):      # the learner's cell: a skeleton with ... where the work goes
        ...
    H.exercise("02.residual_block", residual_block)

prints one line and returns a ``Verdict`` (which a notebook does not display again as the cell's value):

    ✓ 02.residual_block: correct — one kernel, rel err 1.7e-03
    ✗ 02.residual_block: the output is correct but it launched 3 kernels; the point is one
    … 02.residual_block: not done yet — replace the ... in residual_block

An exercise is three things: its checker, registered with ``@checker("NN.name")`` in ``grader/nbNN.py``; its
reference solution, the function named after the exercise below that module's ``SOLUTIONS_MARK`` (the hand-out cuts
the file there); and its wrong answers, in ``tests/test_exercises_nbNN.py``. A checker calls the answer on its own
inputs (``grader/inputs.py``), compares with a PyTorch reference, returns a short success message or raises
``Wrong("one line")``, and traces who wrote each graded output (``provenance.tracing``). Every reach into the
frontend's or torch's private parts is in ``grader/internals.py``.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
import traceback
import types
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

from helpers.device import require_gpu, working_dtype
from helpers.errors import CourseError, FeatureUnavailable, NoGPUError, first_line
from helpers.features import FEATURES, missing_feature
from helpers.libcudnn import load_cudnn

_CHECKERS: dict[str, Callable] = {}
_NEEDS: dict[str, tuple] = {}
_DEVICE = ["cuda"]


def grading_device() -> str:
    """Where the checkers make their inputs: ``"cuda"``, or ``"cpu"`` inside ``grading_on("cpu")`` (where the unit
    tests grade answers that need no cuDNN, such as torch doing the work)."""
    return _DEVICE[0]


@contextmanager
def grading_on(device: str):
    """Checkers that can grade on ``device`` make their inputs there inside the block."""
    previous, _DEVICE[0] = _DEVICE[0], device
    try:
        yield
    finally:
        _DEVICE[0] = previous


def grading_setup():
    """``(device, dtype)`` a checker makes its inputs with: the GPU and its working dtype (one line if there is no
    GPU), or, inside ``grading_on("cpu")``, the CPU in float32."""
    if grading_device() == "cpu":
        return "cpu", torch.float32
    require_gpu()
    return "cuda", working_dtype()


def on_gpu():
    """``(cudnn, dtype)`` for a checker that needs a GPU whatever it grades: the frontend and the GPU's working
    dtype, or one line if there is no GPU."""
    require_gpu()
    return load_cudnn(need_gpu=False), working_dtype()


class Wrong(AssertionError):
    """Raised by a checker: the answer runs but is wrong. The message is the one line the learner reads."""


class NotDone(Exception):
    """Raised by a checker (or found by ``exercise``): the skeleton is not filled in yet."""


class Unsupported(Exception):
    """Raised by a checker: this machine cannot run the exercise (the message says why, in one line)."""


@dataclass(frozen=True)
class Verdict:
    exercise: str
    status: str  # "passed", "failed", "not done" or "skipped" (this machine cannot run it)
    message: str

    def __bool__(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        mark = {"passed": "✓", "failed": "✗", "not done": "…", "skipped": "–"}[self.status]
        return f"{mark} {self.exercise}: {self.message}"

    def _ipython_display_(self) -> None:
        """Show nothing as a cell's value: ``exercise`` has printed the verdict's line already."""


def agrees(out, ref, tol: float | None = None):
    """``H.check`` of ``out`` against ``ref`` (by norm and element-wise, at ``tol`` or the tolerance of ``out``'s
    dtype) without printing or raising: the ``CheckResult`` (``.ok``, ``.rel_err``, ``.unwritten``)."""
    from helpers.checking import check

    return check("", out, ref, tol=tol, quiet=True, raise_on_fail=False)


def grade_output(out, right, wrong: dict, *, name: str = "y", what: str | None = None,
                 all_nan_hint: str = "") -> float:
    """The grading cascade of an output tensor: the relative error of ``out`` against ``right`` when it passes
    ``H.check`` at ``out``'s dtype (by norm and element-wise); otherwise ``Wrong`` in one line, the first of:
    a wrong shape; nothing written (still all NaN; ``all_nan_hint`` says how to fix it); some elements
    unwritten; the named mistake whose formula ``out`` matches instead (``wrong``: message -> formula); how far
    off it is; where it is off. ``name`` is the output's name in the messages, ``what`` (default ``name``) the
    subject of the last two (e.g. "the output")."""
    from helpers.checking import check

    what = what or name
    if tuple(out.shape) != tuple(right.shape):
        raise Wrong(f"{name} has shape {tuple(out.shape)}, want {tuple(right.shape)}")
    n = out.numel()
    unwritten = int(torch.isnan(out.detach().float()).sum().item())
    if unwritten == n:
        raise Wrong(f"{name} is still all NaN: nothing was written into it" + (f" — {all_nan_hint}" if all_nan_hint else ""))
    if unwritten:
        raise Wrong(f"{unwritten} of {n} elements of {name} were never written (still NaN)")
    result = check(name, out, right, quiet=True, raise_on_fail=False)
    if result.ok:
        return result.rel_err
    for mistake, formula in wrong.items():
        matched = agrees(out, formula, result.tol)
        if matched.ok:
            raise Wrong(f"{mistake} (rel err {result.rel_err:.2g} against the right answer, {matched.rel_err:.1e} "
                        f"against that formula)")
    if result.rel_err > result.tol:
        raise Wrong(f"{what} is wrong: rel err {result.rel_err:.2g} against the reference (tolerance {result.tol:g})")
    raise Wrong(f"{what} is wrong in places: {result.elements}")


def checker(key: str, needs: tuple = ()) -> Callable:
    """Register ``fn(answer) -> message`` as the checker of exercise ``key`` ("NN.name"). ``needs`` names the
    feature gates (``helpers.features.FEATURES``) the exercise needs: where one is missing, the verdict is
    "skipped" with the gate's reason, and the checker is not called."""
    _split(key)
    unknown = set(needs) - set(FEATURES)
    if unknown:
        raise ValueError(f"{key}: unknown features {sorted(unknown)}; known: {sorted(FEATURES)}")

    def register(fn: Callable) -> Callable:
        _CHECKERS[key] = fn
        _NEEDS[key] = tuple(needs)
        return fn

    return register


def needs(key: str) -> tuple:
    """The feature gates exercise ``key`` needs: its grading cell is gated by them (``tools/gates.py``)."""
    checker_for(key)
    return _NEEDS[key]


def _missing_feature(key: str) -> str | None:
    """``'feature: reason'`` for the first gate of ``key`` this machine fails, or None."""
    return missing_feature(_NEEDS.get(key, ()))


def _split(key: str) -> tuple[str, str]:
    if not isinstance(key, str) or "." not in key or not key[:2].isdigit():
        raise ValueError(f"an exercise key looks like '02.residual', got {key!r}")
    notebook, name = key.split(".", 1)
    return notebook, name


def exercise_keys() -> list[str]:
    """Every exercise with a checker, "01.matmul_bias_relu" to "08.swap_weights" (each notebook's module loaded)."""
    for module in sorted(Path(__file__).parent.glob("nb[0-9][0-9].py")):
        importlib.import_module(f"{__name__}.{module.stem}")
    return sorted(k for k in _CHECKERS if not k.startswith("99."))


def checker_for(key: str) -> Callable:
    """The checker registered for exercise ``key`` (its notebook's module loaded first), or one line why none."""
    notebook, _ = _split(key)
    if key not in _CHECKERS:
        try:
            importlib.import_module(f"{__name__}.nb{notebook}")
        except ModuleNotFoundError:
            pass
    if key not in _CHECKERS:
        known = ", ".join(sorted(k for k in _CHECKERS if k.startswith(notebook + "."))) or "none"
        raise CourseError(f"no checker for exercise {key!r} (notebook {notebook} has: {known})")
    return _CHECKERS[key]


def unfinished(answer: Any) -> str | None:
    """Why ``answer`` is still a skeleton (it is ``...``, or its source still holds a ``...``), or None."""
    if answer is Ellipsis or answer is None:
        return "not done yet — fill in the cell above"
    if not callable(answer):
        return None
    try:
        source = textwrap.dedent(inspect.getsource(answer))
    except (OSError, TypeError):  # built in, or defined where no source is kept
        return None
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if any(isinstance(n, ast.Constant) and n.value is Ellipsis for n in ast.walk(tree)):
        return f"not done yet — replace the ... in {getattr(answer, '__name__', 'your answer')}"
    return None


def exercise(key: str, answer: Any, *, quiet: bool = False) -> Verdict:
    """Grade ``answer`` with exercise ``key``'s checker; print one line (never a traceback) and return it."""
    judge = checker_for(key)
    reason = unfinished(answer)
    missing = None if reason else _missing_feature(key)
    if reason:
        verdict = Verdict(key, "not done", reason)
    elif missing:
        verdict = Verdict(key, "skipped", f"skipped on this machine — {missing}")
    else:
        try:
            message = judge(answer)
            verdict = Verdict(key, "passed", message or "correct")
        except NotDone as exc:
            verdict = Verdict(key, "not done", str(exc) or "not done yet")
        except (Unsupported, FeatureUnavailable, NoGPUError) as exc:  # this machine cannot: never a failure
            verdict = Verdict(key, "skipped", f"skipped on this machine — {exc}")
        except Wrong as exc:
            verdict = Verdict(key, "failed", str(exc))
        except CourseError as exc:  # the helpers' own one-line errors
            verdict = Verdict(key, "failed", str(exc))
        except Exception as exc:  # the learner's code raised (say where), or the checker could not use what came back
            verdict = Verdict(key, "failed", raised(answer, exc))
    if not quiet:
        print(verdict)
    return verdict


def _code_objects(fn) -> set:
    """The code of ``fn`` and of every function defined inside it (a ``run`` it returns, a helper it defines)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    found, todo = set(), [code] if code is not None else []
    while todo:
        c = todo.pop()
        found.add(c)
        todo += [k for k in c.co_consts if isinstance(k, types.CodeType) and k not in found]
    return found


def raised(answer, exc: BaseException) -> str:
    """One line for an exception that left a checker: ``your code raised …`` with the function and line where the
    learner's code was when it did, or, when it rose in the checker itself (what the answer returned could not be
    used), the checker's one line."""
    codes = _code_objects(answer)
    grader = Path(__file__).resolve().parent   # a reference solution's file holds checkers too: only its own code
    files = {c.co_filename for c in codes if Path(c.co_filename).resolve().parent != grader}
    learner = None
    for frame, line in traceback.walk_tb(exc.__traceback__):
        if frame.f_code in codes or frame.f_code.co_filename in files:
            learner = (frame.f_code.co_name, line)
    if learner is None:
        return f"the checker could not use what your function returned: {first_line(exc, 140)}"
    return f"your code raised {first_line(exc, 140)} (in {learner[0]}, line {learner[1]})"


def grade_solution(key: str) -> Verdict:
    """Grade the reference solution of ``key`` (what a stored notebook's ``solution`` cell runs): prints the
    verdict, and raises ``AssertionError`` when the checker rejects it, so nbval fails on a checker that
    would fail a correct answer. A machine that cannot run the exercise prints why and passes."""
    verdict = exercise(key, solution(key))
    if verdict.status in ("failed", "not done"):
        raise AssertionError(f"the checker of {key} rejected its reference solution: {verdict.message}")
    return verdict


SOLUTIONS_MARK = "# ---- reference solutions"   # a checker module's reference solutions follow this line


def solution(key: str) -> Any:
    """The reference answer to exercise ``key``: the function named after the exercise in ``grader/nbNN.py``, below
    ``SOLUTIONS_MARK``."""
    notebook, name = _split(key)
    try:
        module = importlib.import_module(f"{__name__}.nb{notebook}")
    except ModuleNotFoundError:
        raise CourseError(f"no checker module grader/nb{notebook}.py for exercise {key!r}") from None
    source = Path(module.__file__).read_text()
    if SOLUTIONS_MARK not in source or f"\ndef {name}(" not in source[source.index(SOLUTIONS_MARK):]:
        raise CourseError(f"grader/nb{notebook}.py has no reference solution {name!r} below its "
                          f"{SOLUTIONS_MARK!r} line (the hand-out has none)")
    return getattr(module, name)
