"""Write the student version of the notebooks: outputs cleared, solutions left out.

    python -m tools.student handout/          # = make student

A cell tagged ``solution`` (the stored notebook grading the reference solution, e.g.
``H.exercise("02.residual", H.solution("02.residual"))``) is dropped; every other cell is kept with its
outputs and execution counts cleared, so the learner starts from the skeletons. ``helpers/exercises/solutions/``
is not copied. ``leaks(folder)`` lists any solution line that still appears in the copies.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
SOLUTIONS = Path(__file__).resolve().parent.parent / "helpers" / "exercises" / "solutions"
SOLUTION_TAG = "solution"


def student_copy(nb):
    """A copy of ``nb`` without solution cells, outputs or execution counts."""
    import copy

    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.get("cudnn_course", {}).pop("execution", None)  # not executed: no stamp
    return nb


def write(out_dir: Path, nb_dir: Path = NB_DIR) -> list[Path]:
    import nbformat

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebook_paths(nb_dir):
        nb = student_copy(nbformat.read(path, as_version=4))
        target = out_dir / path.name
        nbformat.write(nb, target)
        written.append(target)
    return written


def solution_lines(solutions_dir: Path = SOLUTIONS) -> set[str]:
    """The solution files' code lines that could give an answer away (not blank, comments, imports or defs)."""
    lines = set()
    for path in sorted(Path(solutions_dir).glob("*.py")):
        for line in path.read_text().splitlines():
            text = line.strip()
            if len(text) < 12 or text.startswith(("#", "import ", "from ", "def ", '"""', "return", "@")):
                continue
            lines.add(text)
    return lines


def exercise_cells(nb) -> list:
    """The cells from the exercises heading (a markdown heading naming "Exercise") to the end; all cells
    when there is no such heading."""
    for i, cell in enumerate(nb.cells):
        first = cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""
        if cell.cell_type == "markdown" and first.startswith("#") and "exercise" in first.lower():
            return nb.cells[i:]
    return nb.cells


def leaks(out_dir: Path, solutions_dir: Path = SOLUTIONS) -> list[str]:
    """``notebook: line`` for every solution line found in the exercises of a student copy (empty: nothing
    leaks). The lesson above the exercises may share lines with a solution (an exercise extends what was
    taught): only the exercise part is searched."""
    import nbformat

    wanted = solution_lines(solutions_dir)
    found = []
    for path in sorted(Path(out_dir).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        text = {line.strip() for cell in exercise_cells(nb) for line in cell.source.splitlines()}
        found += [f"{path.name}: {line}" for line in sorted(wanted & text)]
    if (Path(out_dir) / "solutions").exists():
        found.append("solutions/ was copied into the student folder")
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", help="folder for the student notebooks (created)")
    args = parser.parse_args(argv)
    written = write(Path(args.out_dir))
    problems = leaks(Path(args.out_dir))
    for p in problems:
        print("LEAK", p)
    print(f"{len(written)} student notebooks in {args.out_dir}" + (f"; {len(problems)} leak(s)" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
