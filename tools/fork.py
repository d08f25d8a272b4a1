"""The repository everything points at: pyproject's Repository URL, every Colab badge and every setup cell's
clone URL name one repository; ``set_repository`` points them all at a fork (``make fork``)."""
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


def repo_files(root: Path = ROOT) -> list[Path]:
    root = Path(root)
    return [root / "pyproject.toml", root / "README.md", *notebook_paths(root / "notebooks")]


COLAB_BADGE = re.compile(r"https://colab\.research\.google\.com/github/(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
                         r"/blob/main/(?P<path>notebooks/[^)\s\"]+\.ipynb)")
CLONE_URL = re.compile(r"\"git\", \"clone\"[^\n]*?" + REPO_URL.pattern)


def repo_mentions(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(file, what, OWNER/NAME)`` for pyproject's Repository URL, every Colab badge (README and notebooks)
    and every setup cell's clone URL: all of them must name the same repository."""
    import nbformat

    root = Path(root)
    found = [("pyproject.toml", "Repository URL", repository(root))]
    found += [("README.md", f"badge for {m['path']}", m["slug"]) for m in COLAB_BADGE.finditer((root / "README.md").read_text())]
    for path in notebook_paths(root / "notebooks"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            found += [(path.name, f"badge for {m['path']}", m["slug"]) for m in COLAB_BADGE.finditer(cell.source)]
            if cell.cell_type == "code":
                found += [(path.name, "setup cell clone URL", m["slug"]) for m in CLONE_URL.finditer(cell.source)]
    return found


def set_repository(slug: str, root: Path = ROOT) -> list[Path]:
    """Point pyproject.toml, every Colab badge and every setup cell's clone URL at ``github.com/OWNER/NAME``."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", slug):
        raise ValueError(f"expected OWNER/NAME, got {slug!r}")
    old = repository(root)
    changed = []
    for path in repo_files(root):
        text = path.read_text()
        new = text.replace(f"github.com/{old}", f"github.com/{slug}").replace(
            f"colab.research.google.com/github/{old}/", f"colab.research.google.com/github/{slug}/")
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed
