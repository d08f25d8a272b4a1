"""The ``DEEP_DIVES`` switch: every notebook is a core lesson, then deep dives a workshop can skip.

A deep-dive code cell starts with a marker comment, ``# Deep dive B: <what it measures>``. Once
``H.check_parameters`` has run (the cell after the parameters cell), each cell is looked at before it
runs: with ``DEEP_DIVES = False`` a marked cell prints one line instead of running; with ``True`` (the
default, what nbval runs) nothing changes. Outside IPython (a script, a test) nothing is installed.

An IPython input transformer is a hidden way to skip a cell: the GPU issue replaces it with explicit guards in
the notebooks. Until then ``H.check_parameters`` calls ``switch`` after the parameter rules, which know nothing of it.
"""
from __future__ import annotations

import re

# "# Deep dive B: the kernel ladder" (the letter names the section; the rest is free text)
MARKER = re.compile(r"^#\s*Deep dive\s+([A-Z])\b\s*[:·-]?\s*(.*?)\s*$")
SWITCH = "DEEP_DIVES"


def marker(source: str):
    """``(letter, text)`` when the cell's first line is a deep-dive marker, else ``None``."""
    first = source.lstrip("\n").split("\n", 1)[0]
    m = MARKER.match(first)
    return (m.group(1), m.group(2)) if m else None


def skip_line(letter: str, text: str) -> str:
    what = f"deep dive {letter}" + (f" ({text})" if text else "")
    return f"skipped: {what}, {SWITCH} = False"


def _transformer(shell):
    def skip_deep_dive(lines: list[str]) -> list[str]:
        found = marker("".join(lines[:1]))
        if found is None or shell.user_ns.get(SWITCH, True) is not False:
            return lines
        return [f"print({skip_line(*found)!r})\n"]

    skip_deep_dive.course_deep_dives = True
    return skip_deep_dive


def install() -> bool:
    """Put the switch in front of every cell of this IPython kernel (once); False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None or not hasattr(shell, "input_transformers_cleanup"):
        return False
    transformers = shell.input_transformers_cleanup
    if not any(getattr(t, "course_deep_dives", False) for t in transformers):
        transformers.append(_transformer(shell))
    return True


def switch(namespace: dict) -> None:
    """Install the switch (in IPython), and say once that it skips when ``namespace`` sets it to False."""
    if install() and namespace.get(SWITCH) is False:
        print(f"{SWITCH} = False: the core only. Each deep-dive cell prints one line and is skipped.")
