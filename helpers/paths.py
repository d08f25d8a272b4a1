"""Machine-specific folders out of text that a notebook stores.

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
