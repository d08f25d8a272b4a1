"""Write the student version of the notebooks (the hand-out): outputs cleared, solutions left out.

    python -m tools.student handout/            # = make student OUT=handout: a folder
    python -m tools.student --branch student    # = make handout-branch: a git branch Colab can open

The hand-out lives on its own branch, ``student`` by default (``HANDOUT_BRANCH``): the whole course at the
commit it was made from, with ``notebooks/`` replaced by the student copies and every checker module of
``grader/`` cut where its reference solutions begin (``grader.SOLUTIONS_MARK``). In the copies every Colab badge
opens that branch and the setup cell clones that branch (``git clone --branch=student``), so a learner's Colab gets
``helpers`` and ``grader`` from the same commit as the notebook and no answers; the full notebooks' badges stay on ``main``. ``write_branch`` commits it
through a temporary ``git worktree`` (each new hand-out on top of the previous one, so publishing is a
fast-forward) and pushes nothing: the maintainer runs the ``git push origin student`` it prints.

A cell tagged ``solution`` (the stored notebook grading the reference solution, e.g.
``H.grade_solution("02.residual_block")``) is dropped; every other cell is kept with its
outputs and execution counts cleared, so the learner starts from the skeletons; the grader keeps its checkers and
loses its reference solutions. ``leaks(folder)`` lists any solution line that still appears in the copies.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from grader import SOLUTIONS_MARK

from .fork import BRANCH_NAME, MAIN, on_branch
from .notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
GRADER = ROOT / "grader"
SOLUTION_TAG = "solution"
HANDOUT_BRANCH = "student"   # the branch the hand-out is published on; the README's hand-out badges open it
HANDOUT_TRAILER = "Handout-Of:"   # last line of a hand-out commit: the course commit it was made from


def student_copy(nb, branch: str = HANDOUT_BRANCH):
    """A copy of ``nb`` without solution cells, outputs or execution counts, its badges opening ``branch`` and
    its setup cell cloning ``branch``."""
    import copy

    nb = copy.deepcopy(nb)
    nb.cells = [c for c in nb.cells if SOLUTION_TAG not in c.get("metadata", {}).get("tags", [])]
    for cell in nb.cells:
        cell.source = on_branch(cell.source, branch)
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata.get("cudnn_course", {}).pop("execution", None)  # not executed: no stamp
    return nb


def write(out_dir: Path, nb_dir: Path = NB_DIR, branch: str = HANDOUT_BRANCH) -> list[Path]:
    import nbformat

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebook_paths(nb_dir):
        nb = student_copy(nbformat.read(path, as_version=4), branch)
        target = out_dir / path.name
        nbformat.write(nb, target)
        written.append(target)
    return written


def solutions_of(text: str) -> str:
    """The reference solutions in a checker module's text: the lines after ``SOLUTIONS_MARK``'s ("" if none)."""
    return text.partition(SOLUTIONS_MARK)[2].partition("\n")[2]


def without_solutions(text: str) -> str:
    """A checker module's text cut where its reference solutions begin."""
    return text.partition(SOLUTIONS_MARK)[0].rstrip() + "\n"


def solution_lines(grader_dir: Path = GRADER) -> set[str]:
    """The reference solutions' code lines that could give an answer away (not blank, comments, imports or defs)."""
    lines = set()
    for path in sorted(Path(grader_dir).glob("nb[0-9][0-9].py")):
        for line in solutions_of(path.read_text()).splitlines():
            text = line.strip()
            if len(text) < 12 or text.startswith(("#", "import ", "from ", "def ", '"""', "return", "@")):
                continue
            lines.add(text)
    return lines


def exercise_cells(nb) -> list:
    """The cells from the exercises heading (a markdown heading naming "Exercise") to the deep dives heading
    (the core's end) or the notebook's end; all cells when there is no exercises heading."""
    from .notebooks import DEEP_DIVES_HEADING

    def first(cell):
        return cell.source.lstrip().splitlines()[0] if cell.source.strip() else ""

    start = next((i for i, c in enumerate(nb.cells) if c.cell_type == "markdown" and first(c).startswith("#")
                  and "exercise" in first(c).lower()), None)
    if start is None:
        return nb.cells
    end = next((i for i, c in enumerate(nb.cells) if i > start and c.cell_type == "markdown"
                and DEEP_DIVES_HEADING.match(first(c))), len(nb.cells))
    return nb.cells[start:end]


def leaks(out_dir: Path, grader_dir: Path = GRADER) -> list[str]:
    """``notebook: line`` for every solution line found in the exercises of a student copy (empty: nothing
    leaks). The lesson above the exercises may share lines with a solution (an exercise extends what was
    taught): only the exercise part is searched."""
    import nbformat

    wanted = solution_lines(grader_dir)
    found = []
    for path in sorted(Path(out_dir).glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        text = {line.strip() for cell in exercise_cells(nb) for line in cell.source.splitlines()}
        found += [f"{path.name}: {line}" for line in sorted(wanted & text)]
    found += [f"{path.name}: its reference solutions were copied" for path in sorted(Path(out_dir).rglob("nb*.py"))
              if solutions_of(path.read_text()).strip()]
    return found


# ---------------------------------------------------------------- the hand-out branch
class HandoutError(Exception):
    """Why the hand-out branch was not written (one line)."""


def _git(root: Path, *args) -> str:
    run = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    if run.returncode != 0:
        raise HandoutError(f"git {' '.join(args[:2])} failed: {(run.stderr.strip().splitlines() or ['?'])[-1]}")
    return run.stdout.strip()


def _is_handout(root: Path, rev: str) -> bool:
    return any(line.startswith(HANDOUT_TRAILER) for line in _git(root, "log", "-1", "--format=%B", rev).splitlines())


def handout_refusal(root: Path, branch: str) -> str | None:
    """Why ``branch`` cannot be (re)written from ``root``'s HEAD now, or None."""
    if not BRANCH_NAME.fullmatch(branch) or branch in (MAIN, "HEAD"):
        return f"branch {branch!r}: give a name of letters, digits, '.', '_' and '-' other than main (Colab URLs name it)"
    try:
        _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}")
    except HandoutError:
        return f"{root} is not a git checkout with a commit"
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    if dirty:
        return f"the working tree has uncommitted changes ({len(dirty.splitlines())} file(s)): commit or stash them first"
    if _is_handout(root, "HEAD"):
        return "HEAD is a hand-out commit: run this from the course branch (main), not from the hand-out"
    ref = f"refs/heads/{branch}"
    if subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", ref], capture_output=True).returncode == 0:
        if not _is_handout(root, ref):
            return (f"branch {branch} exists and is not a hand-out (its last commit has no '{HANDOUT_TRAILER}' line): "
                    f"pick another BRANCH= or delete it")
        if f"branch {ref}" in _git(root, "worktree", "list", "--porcelain").splitlines():
            return f"branch {branch} is checked out in a worktree: switch that worktree away from it first"
    return None


def write_branch(branch: str = HANDOUT_BRANCH, root: Path = ROOT) -> tuple[str, bool]:
    """Commit the hand-out of ``root``'s HEAD onto ``branch``; returns ``(commit, new)`` (``new`` False: the branch
    already held this hand-out). Raises ``HandoutError`` with one line when the tree is dirty, the branch exists
    and is not a previous hand-out, or a solution line would leak. Nothing is pushed."""
    root = Path(root)
    refusal = handout_refusal(root, branch)
    if refusal:
        raise HandoutError(refusal)
    source = _git(root, "rev-parse", "HEAD")
    ref = f"refs/heads/{branch}"
    previous = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", ref],
                              capture_output=True, text=True).stdout.strip() or None
    with tempfile.TemporaryDirectory(prefix="handout-") as tmp:
        wt = Path(tmp) / "tree"
        _git(root, "worktree", "add", "-q", "--detach", str(wt), source)
        try:
            write(wt / "notebooks", nb_dir=wt / "notebooks", branch=branch)
            problems = leaks(wt / "notebooks", wt / "grader")
            if problems:
                raise HandoutError(f"a solution line leaks into the hand-out: {problems[0]}")
            for module in sorted((wt / "grader").glob("nb[0-9][0-9].py")):
                module.write_text(without_solutions(module.read_text()))
            _git(wt, "add", "-A", "notebooks", "grader")
            tree = _git(wt, "write-tree")
        finally:
            _git(root, "worktree", "remove", "--force", str(wt))
    if previous and _git(root, "rev-parse", f"{previous}^{{tree}}") == tree:
        return previous, False
    message = (f"hand-out of {source[:12]}: student notebooks (no solution cells, outputs cleared), badges and "
               f"setup-cell clone on {branch}, grader without its reference solutions\n\n{HANDOUT_TRAILER} {source}\n")
    commit = _git(root, "commit-tree", tree, "-p", previous or source, "-m", message)
    _git(root, "update-ref", ref, commit, *([previous] if previous else []))
    return commit, True


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", nargs="?", help="folder for the student notebooks (created); "
                        "without it, --branch is written as a git branch")
    parser.add_argument("--branch", help=f"the hand-out branch the badges open and the setup cells clone "
                        f"(default {HANDOUT_BRANCH}); without a folder, commit the hand-out onto it")
    args = parser.parse_args(argv)
    if args.out_dir is None:
        if args.branch is None:
            parser.error("give a folder (make student OUT=handout) or --branch NAME (make handout-branch)")
        try:
            commit, new = write_branch(args.branch, ROOT)
        except HandoutError as e:
            print(f"hand-out branch not written: {e}", file=sys.stderr)
            return 2
        if not new:
            print(f"{args.branch} already holds the hand-out of this commit ({commit[:12]}); nothing to do")
        else:
            print(f"{args.branch} -> {commit[:12]}: the hand-out of HEAD (student notebooks, badges and setup-cell "
                  f"clone on {args.branch}, no solutions); nothing was pushed")
        print(f"publish it: git push origin {args.branch}")
        return 0
    branch = args.branch or HANDOUT_BRANCH
    if not BRANCH_NAME.fullmatch(branch):
        parser.error(f"--branch {branch!r}: letters, digits, '.', '_' and '-' only")
    written = write(Path(args.out_dir), branch=branch)
    problems = leaks(Path(args.out_dir))
    for p in problems:
        print("LEAK", p)
    print(f"{len(written)} student notebooks in {args.out_dir}" + (f"; {len(problems)} leak(s)" if problems else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
