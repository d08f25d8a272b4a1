"""Live progress bars for a learner, nothing stored for a headless run.

In Jupyter or Colab a loop shows tqdm's bar while it runs (``leave=False``: it clears itself). A
headless run (``tools.execute``, nbval under pytest: both set ``COURSE_HEADLESS=1``) would store
every redraw of the bar as stderr fragments, so there the bar is off and one line is printed at the end.
"""
from __future__ import annotations

import os
import time
from typing import Iterable, Iterator, TypeVar

HEADLESS_ENV = "COURSE_HEADLESS"
T = TypeVar("T")


def headless() -> bool:
    return os.environ.get(HEADLESS_ENV, "") not in ("", "0")


def progress(items: Iterable[T], desc: str) -> Iterator[T]:
    """Iterate ``items`` with a live bar named ``desc``; headless, one line '<desc>: n steps in t s' at the end."""
    if not headless():
        from tqdm import tqdm  # the text bar: tqdm.auto warns in a notebook without ipywidgets

        yield from tqdm(items, desc=desc, leave=False)
        return
    t0, n = time.perf_counter(), 0
    for n, item in enumerate(items, 1):
        yield item
    print(f"{desc}: {n} steps in {time.perf_counter() - t0:.1f} s")
