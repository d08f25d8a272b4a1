"""The ``DEEP_DIVES`` switch: every notebook is a core lesson, then deep dives a workshop can skip.

**The rewritten notebooks** open each deep dive with a visible guard, its first code cell::

    H.deep_dive("B", "the kernel ladder", DEEP_DIVES)

With ``DEEP_DIVES = True`` it does nothing. With ``False`` it raises ``DeepDivesOff``, shown as one line (no
traceback) that says the core ended above and how to go on: Jupyter, JupyterLab and Colab stop "Run all" at the
first error, so the cells below never run and the learner sees why. (A cell run by hand past the guard runs: the
learner chose it.) ``python -m tools.execute --core`` injects ``DEEP_DIVES = False`` and counts that stop as the core's end.

**Notebooks not yet rewritten** (until issue 56) use the old, hidden switch below: an input transformer.

A deep-dive code cell starts with a marker comment, ``# Deep dive B: <what it measures>``. Once
``H.check_parameters`` has run (the cell after the parameters cell), each cell is looked at before it
runs: with ``DEEP_DIVES = False`` a marked cell prints one line instead of running; with ``True`` (the
default, what nbval runs) nothing changes. Outside IPython (a script, a test) nothing is installed.

An IPython input transformer is a hidden way to skip a cell: the GPU issue replaces it with explicit guards in
the notebooks. Until then ``H.check_parameters`` calls ``switch`` after the parameter rules, which know nothing of it.
"""
from __future__ import annotations

import re

from .errors import CourseError

class DeepDivesOff(CourseError):
    """A deep dive's guard with ``DEEP_DIVES = False``: the core ends here."""


def deep_dive(letter: str, what: str, on: bool) -> None:
    """The first code cell of deep dive ``letter`` (``what`` it is about): nothing when ``on`` (the notebook's
    ``DEEP_DIVES``), else ``DeepDivesOff`` in one line, which stops "Run all" here."""
    if not isinstance(on, bool):
        raise TypeError(f"pass the parameters cell's {SWITCH} (True or False) as on=, got {on!r}")
    if not on:
        raise DeepDivesOff(f"stopped on purpose: {SWITCH} = False, so the core lesson ends above and deep dive "
                           f"{letter} ({what}) does not run. To run it: set {SWITCH} = True in the parameters cell, "
                           f"run that cell, then this one and the ones below.")


# ---------------------------------------------------------------- the old, hidden switch (until issue 56)
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
        print(f"{SWITCH} = False: the core only; the deep dives below do not run.")
