"""Where the course keeps files, and machine-specific folders out of text a notebook stores.

``artifacts_dir()`` is the one place a notebook leaves a file for a later one (03's autotune
choice, read by 06): ``$COURSE_ARTIFACTS_DIR``, else ``artifacts/`` in the checkout (not
committed), else ``./artifacts``. Committed headline numbers live in ``results/`` instead.

A stored output that holds ``/home/alice/...`` or a temp folder differs on every
other machine (nbval then fails there) and leaks the author's layout. ``tidy_paths``
replaces such folders with stable placeholders before a notebook prints them.
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parent.parent


def in_checkout() -> bool:
    """True when ``helpers`` is imported from a course checkout (not from an installed copy)."""
    return (COURSE_ROOT / "pyproject.toml").exists()


def artifacts_dir() -> Path:
    """The folder for files one notebook hands to a later one (created on first use)."""
    if os.environ.get("COURSE_ARTIFACTS_DIR"):
        folder = Path(os.environ["COURSE_ARTIFACTS_DIR"])
    else:
        folder = (COURSE_ROOT if in_checkout() else Path.cwd()) / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    return folder

# Any folder up to and including site-packages/dist-packages, wherever the environment lives.
_SITE = re.compile(r"(?:[A-Za-z]:)?[^\s:;'\"=,()\[\]]*?[/\\](?:site|dist)-packages(?=[/\\]|\b)")
_HOME = re.compile(r"/(?:home|Users)/[^/\s:;'\"]+")


def _prefixes() -> list[tuple[str, str]]:
    pairs = [(str(COURSE_ROOT), "<course>")]
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        if prefix and prefix not in ("/", "/usr", "/usr/local"):
            pairs.append((prefix, "<python-env>"))
    pairs.append((os.path.realpath(tempfile.gettempdir()), "<tmp>"))
    pairs.append((tempfile.gettempdir(), "<tmp>"))
    home = os.path.expanduser("~")
    if home not in ("/", ""):
        pairs.append((home, "~"))
    # longest first, so /opt/env/lib/... is matched before /opt/env
    return sorted({p for p in pairs if p[0]}, key=lambda p: -len(p[0]))


def tidy_paths(text) -> str:
    """``text`` with site-packages, the Python environment, this checkout, the temp folder and the home
    folder replaced by ``<site-packages>``, ``<python-env>``, ``<course>``, ``<tmp>`` and ``~``."""
    if text is None:
        return ""
    text = str(text)
    text = _SITE.sub("<site-packages>", text)
    for prefix, placeholder in _prefixes():
        text = text.replace(prefix, placeholder)
    return _HOME.sub("~", text)
