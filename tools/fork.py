"""The repository everything points at: pyproject's Repository URL, every Colab badge and every setup cell's
clone URL name one repository; ``set_repository`` points them all at a fork (``make fork``).

Also the one home for the branch a badge opens and a setup cell clones: the full notebooks' badges open
``main``; the hand-out's (``tools/student.py``) open the hand-out branch, and its setup cells clone that branch
(``on_branch``)."""
from __future__ import annotations

import re
from pathlib import Path

from .notebooks import REPO_URL, ROOT, notebook_paths


def repository(root: Path = ROOT) -> str:
    """``OWNER/NAME`` from pyproject.toml's Repository URL: the one place a fork changes (see set-repo)."""
    m = re.search(r'^Repository = "([^"]+)"', (Path(root) / "pyproject.toml").read_text(), re.M)
    if not m or not REPO_URL.fullmatch(m[1]):
        raise ValueError("pyproject.toml needs [project.urls] Repository = \"https://github.com/OWNER/NAME\"")
    return REPO_URL.fullmatch(m[1])["slug"]


def pages_url(slug: str) -> str:
    """The GitHub Pages address of repository ``OWNER/NAME``, where its workflow publishes the course website."""
    owner, name = slug.split("/")
    return f"https://{owner.lower()}.github.io/{name}/"


def repo_files(root: Path = ROOT) -> list[Path]:
    root = Path(root)
    return [root / "pyproject.toml", root / "README.md", *notebook_paths(root / "notebooks")]


MAIN = "main"   # the branch the full notebooks' badges open and their setup cells clone (the default branch)
BRANCH_NAME = re.compile(r"[A-Za-z0-9_.-]+")   # a branch a Colab URL can name unambiguously (no "/")
COLAB_BADGE = re.compile(r"https://colab\.research\.google\.com/github/(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
                         r"/blob/(?P<branch>" + BRANCH_NAME.pattern + r")/(?P<path>notebooks/[^)\s\"]+\.ipynb)")
CLONE_URL = re.compile(r"\"git\", \"clone\"[^\n]*?" + REPO_URL.pattern)
# The start of a setup cell's clone command, with the branch it names if it names one.
CLONE_CMD = re.compile(r'(?P<cmd>"git", "clone", )(?:"--branch=(?P<branch>[^"]*)", )?')


def colab_badges(text: str) -> list[tuple[str, str, str]]:
    """``(OWNER/NAME, branch, notebooks/NN_x.ipynb)`` for every Colab badge URL in ``text``."""
    return [(m["slug"], m["branch"], m["path"]) for m in COLAB_BADGE.finditer(text)]


def cloned_branch(source: str) -> str | None:
    """The branch a setup cell's ``git clone`` names (``--branch=NAME``); None: the default branch. Raises when
    the source clones nothing."""
    m = CLONE_CMD.search(source)
    if not m:
        raise ValueError("no git clone command in this source")
    return m["branch"]


def on_branch(source: str, branch: str) -> str:
    """``source`` with every Colab badge opening ``branch`` and every ``git clone`` cloning ``branch``
    (``main``: no ``--branch``, the default branch). The repository they name is left as it is."""
    if not BRANCH_NAME.fullmatch(branch):
        raise ValueError(f"a branch name of letters, digits, '.', '_' and '-', got {branch!r}")
    source = COLAB_BADGE.sub(lambda m: m[0].replace(f"/blob/{m['branch']}/", f"/blob/{branch}/", 1), source)
    flag = "" if branch == MAIN else f'"--branch={branch}", '
    return CLONE_CMD.sub(lambda m: m["cmd"] + flag, source)


def repo_mentions(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(file, what, OWNER/NAME)`` for pyproject's Repository URL, every Colab badge (README and notebooks)
    and every setup cell's clone URL: all of them must name the same repository."""
    import nbformat

    root = Path(root)
    found = [("pyproject.toml", "Repository URL", repository(root))]
    found += [("README.md", _badge(m), m["slug"]) for m in COLAB_BADGE.finditer((root / "README.md").read_text())]
    for path in notebook_paths(root / "notebooks"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            found += [(path.name, _badge(m), m["slug"]) for m in COLAB_BADGE.finditer(cell.source)]
            if cell.cell_type == "code":
                found += [(path.name, "setup cell clone URL", m["slug"]) for m in CLONE_URL.finditer(cell.source)]
    return found


def _badge(m) -> str:
    """``badge for notebooks/NN_x.ipynb`` (on main), ``badge for notebooks/NN_x.ipynb on BRANCH`` (any other)."""
    return f"badge for {m['path']}" + ("" if m["branch"] == MAIN else f" on {m['branch']}")


def set_repository(slug: str, root: Path = ROOT) -> list[Path]:
    """Point pyproject.toml, every Colab badge (whichever branch it opens: the hand-out's too), every setup
    cell's clone URL and the README's link to the website at ``github.com/OWNER/NAME``."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", slug):
        raise ValueError(f"expected OWNER/NAME, got {slug!r}")
    old = repository(root)
    changed = []
    for path in repo_files(root):
        text = path.read_text()
        new = text.replace(f"github.com/{old}", f"github.com/{slug}").replace(
            f"colab.research.google.com/github/{old}/", f"colab.research.google.com/github/{slug}/").replace(
            pages_url(old), pages_url(slug))
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed
