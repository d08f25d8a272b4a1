"""The exercise framework (the grader package) and the student-version writer (tools/student.py), on CPU."""
from pathlib import Path

import nbformat
import pytest

import grader as X
from helpers.errors import CourseError
from tests.support import requires_gpu
from tools import student
from tools.notebooks import notebook_paths, split_core


@pytest.fixture
def demo():
    """A checker for exercise 99.double: the answer must double its argument."""
    @X.checker("99.double")
    def check(answer):
        if answer(0) is Ellipsis:
            raise X.NotDone("not done yet — return a value")
        got = answer(21)
        if got == 21:
            raise X.Wrong("it returns its input unchanged; double it")
        if got != 42:
            raise X.Wrong(f"double(21) gave {got!r}, want 42")
        return "correct"

    yield "99.double"
    X._CHECKERS.pop("99.double", None)


def test_a_correct_answer_passes_in_one_line(demo, capsys):
    def double(v):
        return 2 * v

    verdict = X.exercise(demo, double)
    assert verdict and verdict.status == "passed"
    assert capsys.readouterr().out == "✓ 99.double: correct\n"


def test_a_notebook_shows_the_verdict_once(demo, capsys):
    """``exercise`` prints the line; the returned Verdict, a cell's last value, adds nothing to the cell's output
    (IPython's formatter finds ``_ipython_display_`` and formats nothing), while callers still get the object."""
    pytest.importorskip("IPython")
    from IPython.core.formatters import DisplayFormatter

    verdict = X.exercise(demo, lambda v: 2 * v)
    assert capsys.readouterr().out == "✓ 99.double: correct\n"
    assert verdict.status == "passed" and str(verdict) == "✓ 99.double: correct"
    assert DisplayFormatter().format(verdict) == ({}, {})
    assert capsys.readouterr().out == "", "displaying the verdict prints nothing more"


@pytest.mark.parametrize("answer, expected", [
    (lambda v: v, "✗ 99.double: it returns its input unchanged; double it"),
    (lambda v: v + 2, "✗ 99.double: double(21) gave 23, want 42"),
    (lambda v: v / 0, "✗ 99.double: your code raised ZeroDivisionError: division by zero (in <lambda>, line 57)"),
])
def test_a_wrong_answer_gets_one_line_saying_what_is_wrong(demo, capsys, answer, expected):
    verdict = X.exercise(demo, answer)
    assert not verdict and verdict.status == "failed"
    assert capsys.readouterr().out.strip() == expected


def test_an_unfilled_skeleton_is_not_done_never_a_traceback(demo, capsys):
    def double(v):
        ...

    def half_done(v):
        return max(v, ...)

    assert X.exercise(demo, double).status == "not done"
    assert X.exercise(demo, half_done).status == "not done"
    assert X.exercise(demo, ...).status == "not done"
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "… 99.double: not done yet — replace the ... in double"
    assert "Traceback" not in "\n".join(out)


# ------------------------------------------------------------------ the grading cascade (checkers of 02 and 04)
def _outputs():
    """relu(v) on a 64x64 grid and, by the mistake that gives it, two wrong formulas (float64)."""
    import torch

    v = torch.linspace(-2.0, 2.0, 4096, dtype=torch.float64).reshape(64, 64)
    return v.clamp(min=0), {"the ReLU is missing": v, "the sign is flipped": -v.clamp(min=0)}


def _wrong_outputs(right, wrong):
    """A wrong output per line of the cascade, each with the start of the message it must get."""
    partly, one_bad = right.clone(), right.clone()
    partly[0] = float("nan")
    one_bad[5, 60] += 0.5                # far outside the element-wise bound, too small to move the norm past tol
    return [(right[:2], r"y has shape \(2, 64\), want \(64, 64\)"),
            (right * float("nan"), "y is still all NaN: nothing was written into it — execute it$"),
            (partly, "64 of 4096 elements of y were never written"),
            (wrong["the ReLU is missing"], r"the ReLU is missing \(rel err "),
            (wrong["the sign is flipped"], r"the sign is flipped \(rel err "),
            (3 * right, "the output is wrong: rel err 2 against the reference"),
            (one_bad, "the output is wrong in places: 1 of 4096 elements outside")]


def test_grade_output_passes_a_right_answer_and_returns_its_error():
    import torch

    right, wrong = _outputs()
    assert X.grade_output(right.to(torch.bfloat16), right, wrong) < 1e-2


def test_grade_output_names_the_first_thing_that_is_wrong():
    import torch

    right, wrong = _outputs()
    for out, message in _wrong_outputs(right, wrong):
        with pytest.raises(X.Wrong, match="^" + message):
            X.grade_output(out.to(torch.bfloat16), right, wrong, what="the output", all_nan_hint="execute it")


def test_a_formula_matched_by_norm_but_not_element_wise_is_not_named():
    import torch

    right, wrong = _outputs()
    near_miss = wrong["the sign is flipped"].clone()   # that formula, with one element far off: no longer it
    near_miss[3, 60] += 0.5
    assert X.agrees(near_miss, wrong["the sign is flipped"], 1.5e-2).rel_err < 1.5e-2   # the norm alone would match
    assert not X.agrees(near_miss, wrong["the sign is flipped"], 1.5e-2).ok
    with pytest.raises(X.Wrong, match=r"^y is wrong: rel err"):
        X.grade_output(near_miss.to(torch.bfloat16), right, wrong)


def test_unknown_exercises_and_bad_keys_are_one_line_errors():
    with pytest.raises(CourseError, match="no checker for exercise '98.nothing'"):
        X.exercise("98.nothing", lambda: 1)
    with pytest.raises(ValueError, match="looks like '02.residual'"):
        X.checker("residual")


def test_solutions_load_by_exercise_name_from_below_the_mark():
    answer = X.solution("02.residual_block")
    source = Path(X.nb02.__file__).read_text()
    assert answer.__module__ == "grader.nb02" and source.index(X.SOLUTIONS_MARK) < source.index("def residual_block(")
    with pytest.raises(CourseError, match="has no reference solution 'check_residual_block' below"):
        X.solution("02.check_residual_block")          # a checker, not a solution
    with pytest.raises(CourseError, match="no checker module grader/nb97.py"):
        X.solution("97.double")


# ------------------------------------------------------------------ student versions
def _notebook(path: Path):
    nb = nbformat.v4.new_notebook()
    nb.metadata["cudnn_course"] = {"execution": {"gpu": "NVIDIA H200"}, "min_sm": 70}
    skeleton = nbformat.v4.new_code_cell("def double(v):\n    ...\nH.exercise('99.double', double)")
    skeleton.outputs = [nbformat.v4.new_output("stream", name="stdout", text="… 99.double: not done yet\n")]
    skeleton.execution_count = 3
    graded = nbformat.v4.new_code_cell("H.grade_solution('99.double')")
    graded.metadata["tags"] = ["solution", "nbval-ignore-output"]
    nb.cells = [nbformat.v4.new_markdown_cell("**Exercise.** Double it."), skeleton, graded]
    nbformat.write(nb, path)


def test_student_copy_drops_solution_cells_outputs_and_the_stamp(tmp_path):
    src = tmp_path / "nbs"
    src.mkdir()
    _notebook(src / "99_demo.ipynb")
    written = student.write(tmp_path / "handout", nb_dir=src)
    nb = nbformat.read(written[0], as_version=4)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code"]
    assert nb.cells[1].outputs == [] and nb.cells[1].execution_count is None
    assert "execution" not in nb.metadata["cudnn_course"] and nb.metadata["cudnn_course"]["min_sm"] == 70


ANSWER_LINE = "doubled = v + v  # the answer"


@pytest.fixture
def handout(tmp_path):
    """(grader folder, hand-out folder holding 99_demo.ipynb): nb99.py's reference solution holds ANSWER_LINE."""
    solutions = tmp_path / "grader"
    solutions.mkdir()
    (solutions / "nb99.py").write_text(f"ANSWERS_ABOVE_THE_MARK_ARE_NOT_SOLUTIONS = 'double it please'\n"
                                       f"{X.SOLUTIONS_MARK}\ndef double(v):\n    {ANSWER_LINE}\n    return doubled\n")
    out = tmp_path / "handout"
    out.mkdir()
    _notebook(out / "99_demo.ipynb")
    return solutions, out


def test_leaks_finds_a_solution_line_in_a_student_copy(handout):
    solutions, out = handout
    assert student.leaks(out, solutions) == []
    nb = nbformat.read(out / "99_demo.ipynb", as_version=4)
    nb.cells[1].source = f"def double(v):\n    {ANSWER_LINE}\n    return doubled"
    nbformat.write(nb, out / "99_demo.ipynb")
    assert student.leaks(out, solutions) == [f"99_demo.ipynb: {ANSWER_LINE}"]


def test_a_solution_line_taught_above_the_exercises_is_not_a_leak(handout):
    """An exercise extends the lesson: a line both taught and used by a solution only leaks in the exercises."""
    solutions, out = handout
    nb = nbformat.read(out / "99_demo.ipynb", as_version=4)
    nb.cells = [nbformat.v4.new_code_cell(ANSWER_LINE), nbformat.v4.new_markdown_cell("## Exercises")] + nb.cells
    nbformat.write(nb, out / "99_demo.ipynb")
    assert student.leaks(out, solutions) == []
    nb.cells[-1].source += "\n" + ANSWER_LINE
    nbformat.write(nb, out / "99_demo.ipynb")
    assert student.leaks(out, solutions) == [f"99_demo.ipynb: {ANSWER_LINE}"]


def test_a_solution_line_in_the_deep_dives_after_the_exercises_is_not_a_leak(handout):
    """The exercises end where the deep dives begin: a deep dive may teach a line a solution also uses."""
    solutions, out = handout
    nb = nbformat.read(out / "99_demo.ipynb", as_version=4)
    nb.cells = [nbformat.v4.new_markdown_cell("## Exercises")] + nb.cells
    nb.cells += [nbformat.v4.new_markdown_cell("# Deep dives\n\nOptional."),
                 nbformat.v4.new_code_cell("# Deep dive A: the same line, taught\n" + ANSWER_LINE)]
    nbformat.write(nb, out / "99_demo.ipynb")
    assert student.leaks(out, solutions) == []
    nb.cells[-1].source = ANSWER_LINE
    nb.cells[-2].source = "## More"   # no deep dives heading: the exercises run to the end again
    nbformat.write(nb, out / "99_demo.ipynb")
    assert student.leaks(out, solutions) == [f"99_demo.ipynb: {ANSWER_LINE}"]


def test_the_course_student_version_is_clean(tmp_path):
    """Every notebook is written; no output, stamp or solution cell survives; no solution line leaks."""
    written = student.write(tmp_path / "handout")
    assert len(written) == len(notebook_paths())
    for path in written:
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and not any(c.outputs or c.execution_count for c in code), path.name
        assert not any("solution" in c.metadata.get("tags", []) for c in nb.cells), path.name
        assert "execution" not in nb.metadata.get("cudnn_course", {}), path.name
    assert student.leaks(tmp_path / "handout") == []


def test_grade_solution_raises_when_the_checker_rejects_the_reference(demo, monkeypatch, capsys):
    monkeypatch.setattr(X, "solution", lambda key: (lambda v: v))        # a "reference" that is wrong
    with pytest.raises(AssertionError, match="rejected its reference solution: it returns its input unchanged"):
        X.grade_solution(demo)
    monkeypatch.setattr(X, "solution", lambda key: (lambda v: 2 * v))
    assert X.grade_solution(demo).status == "passed"


def test_a_machine_that_cannot_run_an_exercise_skips_it_in_one_line(capsys):
    @X.checker("99.unsupported")
    def check(answer):
        raise X.Unsupported("FP8 needs sm89+")

    try:
        verdict = X.exercise("99.unsupported", lambda: 1)
        assert verdict.status == "skipped" and not verdict
        assert capsys.readouterr().out == "– 99.unsupported: skipped on this machine — FP8 needs sm89+\n"
    finally:
        X._CHECKERS.pop("99.unsupported", None)


def _exercise_keys_in(nb) -> tuple[set, set]:
    """Keys graded in learner cells (``H.exercise("NN.name", fn)``) and in solution cells."""
    import re

    learner, graded = set(), set()
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if "solution" in cell.metadata.get("tags", []):
            # a deep dive's solution cell opens with its marker line, "# Deep dive D: ..."
            m = re.fullmatch(r'(#[^\n]*\n)?H\.grade_solution\("(\d\d\.\w+)"\)\s*(#.*)?', cell.source.strip())
            assert m, f"a solution cell grades one reference answer with H.grade_solution: {cell.source[:80]!r}"
            graded.add(m.group(2))
        else:
            learner |= set(re.findall(r'^H\.exercise\("(\d\d\.\w+)", \w+\)', cell.source, re.M))
            assert "H.solution" not in cell.source and "grade_solution" not in cell.source, cell.source[:80]
    return learner, graded


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name[:2])
def test_every_exercise_has_a_skeleton_a_graded_solution_and_a_checker(path):
    """2-3 exercises in each core, at most one more per deep dive; each: a learner cell with a skeleton, a solution
    cell, a checker, a solution."""
    nb = nbformat.read(path, as_version=4)
    learner, graded = _exercise_keys_in(nb)
    core, deep = split_core(nb)
    in_core = _exercise_keys_in(nbformat.from_dict(dict(nb, cells=core)))[0]
    sections = sum(1 for c in deep if c.cell_type == "markdown" and c.source.startswith("## Deep dive"))
    assert 2 <= len(in_core) <= 3, f"{path.name}: core exercises {sorted(in_core)}"
    assert len(learner) - len(in_core) <= sections, f"{path.name}: exercises {sorted(learner)}"
    assert learner == graded, f"{path.name}: learner cells {sorted(learner)}, solution cells {sorted(graded)}"
    for key in learner:
        assert key.startswith(path.name[:2] + "."), key
        X.checker_for(key)   # raises when no checker is registered (the solutions are tested below)
    skeletons = [c for c in nb.cells if c.cell_type == "code" and "H.exercise(" in c.source
                 and "solution" not in c.metadata.get("tags", [])]
    for cell in skeletons:
        assert "..." in cell.source, f"{path.name}: a learner cell without a skeleton to fill in: {cell.source[:80]!r}"


@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name[:2])
def test_every_unfilled_skeleton_prints_one_not_done_line(path, tmp_path, capsys):
    """Each learner cell, run as it stands (from a file, so its source can be read), prints one friendly line."""
    import importlib.util

    nb = nbformat.read(path, as_version=4)
    learner, _ = _exercise_keys_in(nb)
    cells = [c for c in nb.cells if c.cell_type == "code" and "H.exercise(" in c.source
             and "solution" not in c.metadata.get("tags", [])]
    for i, cell in enumerate(cells):
        file = tmp_path / f"skeleton_{path.name[:2]}_{i}.py"
        file.write_text("import torch\nimport cudnn\nimport helpers as H\nIO_DTYPE = torch.bfloat16\n" + cell.source + "\n")
        spec = importlib.util.spec_from_file_location(file.stem, file)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        out = capsys.readouterr().out
        assert out.count("\n") == 1 and out.startswith("… ") and ": not done yet — replace the ... in " in out, out
        assert out.split(":")[0][2:] in learner, out


def test_every_reference_solution_loads_and_is_filled_in():
    keys = set()
    for path in notebook_paths():
        keys |= _exercise_keys_in(nbformat.read(path, as_version=4))[1]
    assert len(keys) >= 16, sorted(keys)
    for key in sorted(keys):
        answer = X.solution(key)
        assert callable(answer) and X.unfinished(answer) is None, key


def _idle_solutions(keys, load=X.solution) -> list[str]:
    """One line per reference solution that does no frontend work (``tools.frontend_api.idle_reason``)."""
    from tools.frontend_api import idle_reason

    lines = []
    for key in keys:
        answer = load(key)
        reason = idle_reason(answer)
        if reason:
            lines.append(f"grader/nb{key[:2]}.py: {answer.__name__} ({key}): {reason}; a reference solution must "
                         f"build, run or replay a cuDNN graph")
    return lines


def test_every_reference_solution_does_frontend_work():
    """On CPU, where no checker can grade: each reference solution's code reaches the frontend (see the next test for
    what counts as doing nothing). One line per solution that does not."""
    problems = _idle_solutions(_all_keys())
    assert not problems, "\n".join(problems)


TORCH_BODY = "y.copy_(torch.relu(torch.nn.functional.conv2d(x, w, padding=1) + b + r))"
IDLE_BODIES = {
    "pass": ("pass", "its body is only `pass`"),
    "ellipsis": ("...", "its body is only `...`"),
    "bare return": ("return", "its body is only a bare `return`"),
    "return None": ("return None", "its body is only `return None`"),
    "NotImplementedError": ("raise NotImplementedError", "its body is only `raise NotImplementedError`"),
    "NotImplementedError()": ("raise NotImplementedError('todo')", "its body is only `raise NotImplementedError`"),
    "docstring only": ('"""y = relu(conv(x, w) + b + r)."""', "its body is only a docstring"),
    "torch computes it": (TORCH_BODY, "it never reaches the frontend"),
    "cudnn loaded, unused": ("cudnn = H.load_cudnn()\n    " + TORCH_BODY, "it never reaches the frontend"),
    "torch's own add and relu": ("y.copy_((torch.nn.functional.conv2d(x, w, padding=1) + b).add(r).relu())",
                                 "it never reaches the frontend"),
    "the real body": (None, None),
    "a local helper does the work": ("g = _new_graph(x.dtype)\n    named = H.GraphIO(g, dtype=x.dtype)\n    "
                                     "named.output('y', g.relu(_conv3x3(g, named, x, w)), y)\n    "
                                     "_build_and_run(g, named)", None),
}


@pytest.mark.parametrize("body, expected", IDLE_BODIES.values(), ids=IDLE_BODIES.keys())
def test_what_counts_as_a_reference_solution_that_does_nothing(tmp_path, body, expected):
    """02's residual_block with its body replaced: `pass`, `...`, a bare `return` or `return None`,
    `raise NotImplementedError`, a docstring alone, torch computing the answer (with or without loading cudnn, with
    tensor methods named like graph ops) all do nothing; the real body, or one that leaves the work to a helper of its own module, does frontend work."""
    import re

    source = Path(X.solution("02.residual_block").__code__.co_filename).read_text()
    start = source.index("def residual_block(")
    end = source.index("\ndef ", start + 1)
    signature = source[start:source.index("\n", start)]
    if body is not None:
        source = source[:start] + f"{signature}\n    {body}\n\n" + source[end:]
    path = tmp_path / "nb02.py"
    path.write_text(source)
    stand_in = {}   # a function of that file's name, not the module run (its @checker would register again)
    exec(compile("def residual_block(): pass", str(path), "exec"), stand_in)
    problems = _idle_solutions(["02.residual_block"], load=lambda key: stand_in["residual_block"])
    if expected is None:
        assert problems == []
    else:
        (line,) = problems
        assert re.fullmatch(rf"grader/nb02\.py: residual_block \(02\.residual_block\): {re.escape(expected)}.*; a "
                            rf"reference solution must build, run or replay a cuDNN graph", line), line


def _all_keys() -> list[str]:
    keys = set()
    for path in notebook_paths():
        keys |= _exercise_keys_in(nbformat.read(path, as_version=4))[1]
    return sorted(keys)


@requires_gpu
@pytest.mark.parametrize("key", _all_keys())
def test_every_checker_accepts_its_reference_solution(key):
    """The notebooks' solution cells do this too (nbval); here it runs without the notebook."""
    verdict = X.exercise(key, X.solution(key), quiet=True)
    assert verdict.status in ("passed", "skipped") and verdict.message, verdict
