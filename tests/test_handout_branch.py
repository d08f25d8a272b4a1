"""The hand-out branch (``make handout-branch``, ``tools.student --branch``), written into a throwaway git
repository made from a copy of this checkout's course files: what the branch holds, where its badges and setup
cells point, what Colab's clone of it brings, and the refusals. CPU only; nothing is pushed."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from tests.support import colab_setup_cell
from tools import fork as FK
from tools import student as ST
from tools.notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
GRADER = ROOT / "grader"


@pytest.fixture(autouse=True)
def _identity(monkeypatch):
    """Commits in the throwaway repositories need an author, whatever this machine's git config says."""
    for k, v in IDENTITY.items():
        monkeypatch.setenv(k, v)


def git(repo: Path, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    """A git repository on ``main`` holding this checkout's course files (as they are now) in one commit."""
    root = tmp_path / "course"
    root.mkdir()
    for name in ("pyproject.toml", "README.md", "requirements.txt", "requirements-test.txt"):
        shutil.copy(ROOT / name, root / name)
    for folder in ("notebooks", "helpers", "grader"):
        shutil.copytree(ROOT / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "the course")
    return root


def tree(repo: Path, rev: str) -> set[str]:
    return set(git(repo, "ls-tree", "-r", "--name-only", rev).splitlines())


def checkout(repo: Path, rev: str, dst: Path) -> Path:
    """The files of ``rev`` in ``dst`` (git archive: the repository's worktrees are left alone)."""
    dst.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)
    return dst


def test_the_branch_holds_the_course_with_the_student_notebooks_and_no_answers(repo, tmp_path):
    head = git(repo, "rev-parse", "HEAD")
    commit, new = ST.write_branch("student", repo)
    assert new and git(repo, "rev-parse", "refs/heads/student") == commit
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == ""   # main untouched
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1                 # temp one removed
    assert git(repo, "rev-parse", f"{commit}^") == head
    assert git(repo, "log", "-1", "--format=%B", commit).splitlines()[-1] == f"{ST.HANDOUT_TRAILER} {head}"

    files = tree(repo, commit)
    assert files == tree(repo, head)
    assert "helpers/__init__.py" in files and "pyproject.toml" in files   # what the setup cell installs
    out = checkout(repo, commit, tmp_path / "student")
    assert ST.leaks(out / "notebooks", GRADER) == [] and ST.leaks(out / "grader") == []
    changed = git(repo, "diff", "--name-only", head, commit).splitlines()
    assert {f for f in changed if not f.startswith("notebooks/")} == {
        f"grader/{p.name}" for p in GRADER.glob("nb[0-9][0-9].py")}               # cut, not removed
    for module in (out / "grader").glob("nb[0-9][0-9].py"):
        text = module.read_text()
        assert ST.SOLUTIONS_MARK not in text and "@checker(" in text, module.name
    for path in notebook_paths(out / "notebooks"):
        nb = nbformat.read(path, as_version=4)
        assert not any(ST.SOLUTION_TAG in c.metadata.get("tags", []) for c in nb.cells), path.name
        assert not any(c.outputs for c in nb.cells if c.cell_type == "code"), path.name
        badges = [b for c in nb.cells for b in FK.colab_badges(c.source)]
        assert badges == [(FK.repository(repo), "student", f"notebooks/{path.name}")], path.name
        setup = next(c.source for c in nb.cells if "setup" in c.metadata.get("tags", []))
        assert FK.cloned_branch(setup) == "student", path.name
    # the full notebooks on main keep their answers, badges and clone
    for path in notebook_paths(repo / "notebooks"):
        nb = nbformat.read(path, as_version=4)
        assert {b[1] for c in nb.cells for b in FK.colab_badges(c.source)} == {FK.MAIN}


def test_colab_clones_the_branch_and_finds_helpers_there(repo, tmp_path):
    """The hand-out's setup cell, run as Colab runs it against the throwaway repository: it clones the
    hand-out branch, which brings helpers (without the solutions) and what pip installs."""
    ST.write_branch("student", repo)
    nb = nbformat.read(notebook_paths(checkout(repo, "student", tmp_path / "src") / "notebooks")[0], as_version=4)
    setup = next(c.source for c in nb.cells if "setup" in c.metadata.get("tags", []))
    course = tmp_path / "content" / "cudnn-frontend-course"
    helpers_file, installed = colab_setup_cell(setup, repo.as_uri(), course, tmp_path)
    assert Path(helpers_file).resolve().is_relative_to(course.resolve()), helpers_file
    assert Path(installed).resolve() == course.resolve() and (course / "pyproject.toml").exists()
    assert git(course, "rev-parse", "--abbrev-ref", "HEAD") == "student"
    assert not any(ST.solutions_of(p.read_text()).strip() for p in (course / "grader").glob("nb*.py"))


def test_a_new_hand_out_goes_on_top_of_the_previous_one(repo):
    first, _ = ST.write_branch("student", repo)
    assert ST.write_branch("student", repo) == (first, False)   # nothing changed: nothing committed
    readme = repo / "README.md"
    readme.write_text(readme.read_text() + "\nmore\n")
    git(repo, "commit", "-q", "-am", "a change on main")
    second, new = ST.write_branch("student", repo)
    assert new and git(repo, "rev-parse", f"{second}^") == first   # a fast-forward for `git push`
    assert git(repo, "show", f"{second}:README.md").endswith("more")


def test_refuses_a_dirty_tree(repo):
    (repo / "README.md").write_text("changed\n")
    with pytest.raises(ST.HandoutError, match="uncommitted changes"):
        ST.write_branch("student", repo)
    assert subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "-q", "refs/heads/student"],
                          capture_output=True).returncode != 0


def test_refuses_a_branch_that_is_not_a_hand_out(repo):
    git(repo, "branch", "student")
    before = git(repo, "rev-parse", "student")
    with pytest.raises(ST.HandoutError, match="exists and is not a hand-out"):
        ST.write_branch("student", repo)
    assert git(repo, "rev-parse", "student") == before


@pytest.mark.parametrize("name", ["main", "feature/x", "a b"])
def test_refuses_a_branch_name_colab_cannot_open(repo, name):
    with pytest.raises(ST.HandoutError, match="give a name"):
        ST.write_branch(name, repo)


def test_refuses_to_start_from_a_hand_out(repo):
    ST.write_branch("student", repo)
    git(repo, "checkout", "-q", "student")
    with pytest.raises(ST.HandoutError, match="HEAD is a hand-out"):
        ST.write_branch("student2", repo)


def test_the_command_prints_one_line_on_refusal_and_the_push_on_success(repo):
    # this checkout first; other entries kept (a machine may keep nbformat and friends on PYTHONPATH)
    env = dict(os.environ) | IDENTITY | {"PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    code = f"import sys; from pathlib import Path; from tools import student as S; S.ROOT = Path({str(repo)!r}); " \
           "sys.exit(S.main(sys.argv[1:]))"

    def run(*args):
        return subprocess.run([sys.executable, "-c", code, *args], cwd=repo, env=env,
                              capture_output=True, text=True, timeout=120)

    ok = run("--branch", "workshop")
    assert ok.returncode == 0, ok.stderr
    assert "git push origin workshop" in ok.stdout and git(repo, "rev-parse", "--verify", "workshop")
    git(repo, "branch", "other")
    refused = run("--branch", "other")
    assert refused.returncode == 2 and refused.stdout == ""
    assert len(refused.stderr.strip().splitlines()) == 1 and "not a hand-out" in refused.stderr
    assert run().returncode == 2   # neither a folder nor --branch


def test_student_folder_copies_point_at_the_hand_out_branch(tmp_path):
    written = ST.write(tmp_path / "handout", branch="workshop")
    for path in written:
        nb = nbformat.read(path, as_version=4)
        assert {b[1] for c in nb.cells for b in FK.colab_badges(c.source)} == {"workshop"}, path.name
        setup = next(c.source for c in nb.cells if "setup" in c.metadata.get("tags", []))
        assert FK.cloned_branch(setup) == "workshop"
        assert FK.CLONE_URL.search(setup)["slug"] == FK.repository()


def test_fork_repoints_the_hand_out_too(repo, tmp_path):
    FK.set_repository("someone/my-fork", repo)
    git(repo, "commit", "-q", "-am", "fork")
    ST.write_branch("student", repo)
    out = checkout(repo, "student", tmp_path / "student")
    (path, *_) = notebook_paths(out / "notebooks")
    nb = nbformat.read(path, as_version=4)
    assert {b[:2] for c in nb.cells for b in FK.colab_badges(c.source)} == {("someone/my-fork", "student")}
    setup = next(c.source for c in nb.cells if "setup" in c.metadata.get("tags", []))
    assert FK.CLONE_URL.search(setup)["slug"] == "someone/my-fork" and FK.cloned_branch(setup) == "student"
    readme = [b for b in FK.colab_badges((repo / "README.md").read_text()) if b[1] == "student"]
    assert readme and {b[0] for b in readme} == {"someone/my-fork"}
