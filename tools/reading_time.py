"""How long each notebook takes to read, split into its core lesson and its deep dives.

    python -m tools.reading_time            # the table, and whether the workshop budget holds
    python -m tools.reading_time --check    # exit 1 if the budget is broken
    python -m tools.reading_time --careful  # the same cores read carefully, against the budget they must meet next

The table is shown where it is read: the course website's workshop page and its home page's agenda, generated at
build time (``tools/site.py``).

Minutes = markdown words / 200 + code lines / 10 + output lines / 60, where a code line is neither blank nor
a comment, and an output line is a line of printed text, a row of an HTML table, or a line of a plain-text
result (a figure counts one line). A notebook's core is every cell before its ``# Deep dives`` heading;
everything after it is deep dives. A rewritten notebook opens each deep dive with a visible guard
(``H.deep_dive("B", ...)``), and the cells after a guard need nothing more; a notebook not yet rewritten starts
each deep-dive code cell with a ``# Deep dive X: ...`` marker instead (``helpers/deep_dives.py``). The run times
beside the minutes are the stored full run (the stamp of ``tools.execute``) and its core cells' share of that run (``core_runtime_s`` in the same stamp: what a ``DEEP_DIVES = False`` run spends in cells).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from helpers.deep_dives import marker
from .frontend_api import API_REF
from .notebooks import notebook_paths, split_core, stamp

# The workshop budget (the website's workshop page, site/workshop.md)
CORE_MAX_MIN = 45          # one notebook's core
CORES_MAX_MIN = 300        # all eight cores: one day
MARKDOWN_MAX_WORDS = 150   # any markdown cell
CORE_CELL_MAX_LINES = 25   # any code cell of a core, every line counted

WORDS_PER_MIN, CODE_LINES_PER_MIN, OUTPUT_LINES_PER_MIN = 200, 10, 60


@dataclass(frozen=True)
class Rates:
    """How fast a reader goes: markdown words, code lines and output lines a minute, and minutes per figure (0: a
    figure reads as one output line)."""
    words: float
    code: float
    outputs: float
    figure_min: float = 0.0


SKIMMING = Rates(WORDS_PER_MIN, CODE_LINES_PER_MIN, OUTPUT_LINES_PER_MIN)
# A careful first read of unfamiliar API code (the rates issue 45 measured the cores at; a learner's own reading
# of the eight took about 6 h), and the
# budget the cores must meet at that rate once they are rewritten on a GPU (issue 45): each core 35 min, all eight
# 270, no core code cell over 20 lines nor a deep dive's over 40, the API referred to 1.5 times as often as H.*.
CAREFUL = Rates(120, 6, 30, figure_min=1.0)
CAREFUL_CORE_MAX_MIN, CAREFUL_CORES_MAX_MIN = 35, 270
CAREFUL_CORE_CELL_MAX_LINES, CAREFUL_DEEP_CELL_MAX_LINES, CAREFUL_API_PER_HELPER = 20, 40, 1.5

HELPER_REF = re.compile(r"\bH\.\w+")
GUARD = re.compile(r"^\s*H\.deep_dive\(")   # a deep dive's visible guard, its first code cell


def source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def markdown_words(text: str) -> int:
    text = re.sub(r"\]\([^)]*\)", "]", text)   # a link's target is not read
    text = re.sub(r"<[^>]+>", " ", text)        # nor HTML tags
    return sum(1 for w in text.split() if re.search(r"\w", w))


def code_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


def output_lines(cell) -> int:
    n = 0
    for out in cell.get("outputs", []):
        kind = out.get("output_type")
        if kind == "stream":
            n += len(_text(out.get("text")).splitlines())
        elif kind in ("execute_result", "display_data"):
            data = out.get("data", {})
            if any(k.startswith("image/") for k in data):
                n += 1
            elif "text/html" in data:
                n += max(1, _text(data["text/html"]).count("<tr"))
            else:
                n += len(_text(data.get("text/plain")).splitlines())
        elif kind == "error":
            n += len(out.get("traceback", []))
    return n


@dataclass
class Part:
    words: int = 0
    code: int = 0
    outputs: int = 0
    figures: int = 0
    api: int = 0
    helpers: int = 0
    longest_markdown: int = 0
    longest_code_cell: int = 0
    longest_code_cell_id: str = ""
    longest_markdown_id: str = ""

    @property
    def minutes(self) -> float:
        return self.minutes_at(SKIMMING)

    def minutes_at(self, rates: Rates) -> float:
        lines = self.outputs - (self.figures if rates.figure_min else 0)
        return (self.words / rates.words + self.code / rates.code + lines / rates.outputs
                + self.figures * rates.figure_min)


def measure(cells) -> Part:
    part = Part()
    for cell in cells:
        text = source(cell)
        if cell["cell_type"] == "markdown":
            w = markdown_words(text)
            part.words += w
            if w > part.longest_markdown:
                part.longest_markdown, part.longest_markdown_id = w, cell.get("id", "")
        elif cell["cell_type"] == "code":
            part.code += code_lines(text)
            part.outputs += output_lines(cell)
            part.figures += sum(1 for out in cell.get("outputs", [])
                                if any(k.startswith("image/") for k in out.get("data", {})))
            part.api += len(API_REF.findall(text))
            part.helpers += len(HELPER_REF.findall(text))
            lines = len(text.rstrip("\n").splitlines())
            if lines > part.longest_code_cell:
                part.longest_code_cell, part.longest_code_cell_id = lines, cell.get("id", "")
    return part


@dataclass
class Notebook:
    name: str
    core: Part
    deep: Part
    deep_dive_cells: int
    unmarked: list[str]          # deep-dive code cells without a marker
    marked_in_core: list[str]    # core code cells with one
    full_run_s: float | None
    core_run_s: float | None


def unguarded(deep_cells) -> list[str]:
    """Ids of the deep-dive code cells that nothing stops in a core-only run: neither a guard
    (``H.deep_dive(...)``) above them in the deep dives nor a ``# Deep dive X:`` marker of their own."""
    found, guarded = [], False
    for cell in deep_cells:
        if cell["cell_type"] != "code":
            continue
        guarded = guarded or bool(GUARD.match(source(cell)))
        if not guarded and marker(source(cell)) is None:
            found.append(cell.get("id", ""))
    return found


def read(path: Path) -> Notebook:
    nb = json.loads(Path(path).read_text())
    core, deep = split_core(nb)
    code_deep = [c for c in deep if c["cell_type"] == "code"]
    return Notebook(
        name=Path(path).stem, core=measure(core), deep=measure(deep), deep_dive_cells=len(code_deep),
        unmarked=unguarded(deep),
        marked_in_core=[c.get("id", "") for c in core if c["cell_type"] == "code" and marker(source(c))],
        full_run_s=(stamp(nb) or {}).get("runtime_s"),
        core_run_s=(stamp(nb) or {}).get("core_runtime_s"))


def read_all(paths=None) -> list[Notebook]:
    return [read(p) for p in (paths or notebook_paths())]


def problems(books: list[Notebook]) -> list[str]:
    """Every way the workshop budget is broken, one line each."""
    out = []
    for b in books:
        if b.core.minutes > CORE_MAX_MIN:
            out.append(f"{b.name}: the core reads in {b.core.minutes:.0f} min, over {CORE_MAX_MIN}")
        for part, label in ((b.core, "core"), (b.deep, "deep dives")):
            if part.longest_markdown > MARKDOWN_MAX_WORDS:
                out.append(f"{b.name}: markdown cell {part.longest_markdown_id} ({label}) has "
                           f"{part.longest_markdown} words, over {MARKDOWN_MAX_WORDS}")
        if b.core.longest_code_cell > CORE_CELL_MAX_LINES:
            out.append(f"{b.name}: core code cell {b.core.longest_code_cell_id} has {b.core.longest_code_cell} lines, "
                       f"over {CORE_CELL_MAX_LINES}")
        if b.core.api < b.core.helpers:
            out.append(f"{b.name}: the core has {b.core.api} cuDNN API references and {b.core.helpers} H.* calls: "
                       f"the API must be at least as visible")
        if b.unmarked:
            out.append(f"{b.name}: deep-dive code cells with neither a guard above them nor a '# Deep dive X: ...' "
                       f"first line: {b.unmarked}")
        if b.marked_in_core:
            out.append(f"{b.name}: core code cells marked as deep dives: {b.marked_in_core}")
    total = sum(b.core.minutes for b in books)
    if total > CORES_MAX_MIN:
        out.append(f"all cores read in {total:.0f} min, over {CORES_MAX_MIN}")
    return out


def _run(seconds) -> str:
    return "—" if seconds is None else f"{seconds / 60:.1f} min"


def table(books: list[Notebook]) -> str:
    rows = ["| notebook | core: read | deep dives: read | core: API refs / `H.*` | H200 run: core | H200 run: all |",
            "|---|---:|---:|---:|---:|---:|"]
    for b in books:
        rows.append(f"| {b.name} | {b.core.minutes:.0f} min | {b.deep.minutes:.0f} min | {b.core.api} / "
                    f"{b.core.helpers} | {_run(b.core_run_s)} | {_run(b.full_run_s)} |")
    core = sum(b.core.minutes for b in books)
    deep = sum(b.deep.minutes for b in books)
    api, helpers = sum(b.core.api for b in books), sum(b.core.helpers for b in books)
    core_run = sum(b.core_run_s for b in books) if all(b.core_run_s for b in books) else None
    full_run = sum(b.full_run_s for b in books) if all(b.full_run_s for b in books) else None
    rows.append(f"| **all** | **{core:.0f} min** | {deep:.0f} min | {api} / {helpers} | {_run(core_run)} | "
                f"{_run(full_run)} |")
    return "\n".join(rows)


def careful_problems(books: list[Notebook]) -> list[str]:
    """Every way the cores miss the budget of a careful read (``CAREFUL``), one line each."""
    out = []
    for b in books:
        minutes = b.core.minutes_at(CAREFUL)
        if minutes > CAREFUL_CORE_MAX_MIN:
            out.append(f"{b.name}: the core reads carefully in {minutes:.0f} min, over {CAREFUL_CORE_MAX_MIN}")
        for part, label, most in ((b.core, "core", CAREFUL_CORE_CELL_MAX_LINES),
                                  (b.deep, "deep-dive", CAREFUL_DEEP_CELL_MAX_LINES)):
            if part.longest_code_cell > most:
                out.append(f"{b.name}: {label} code cell {part.longest_code_cell_id} has {part.longest_code_cell} "
                           f"lines, over {most}")
        if b.core.api < CAREFUL_API_PER_HELPER * b.core.helpers:
            out.append(f"{b.name}: the core has {b.core.api} cuDNN API references and {b.core.helpers} H.* calls, "
                       f"under {CAREFUL_API_PER_HELPER:g} to 1")
    total = sum(b.core.minutes_at(CAREFUL) for b in books)
    if total > CAREFUL_CORES_MAX_MIN:
        out.append(f"all cores read carefully in {total:.0f} min, over {CAREFUL_CORES_MAX_MIN}")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="exit 1 if the budget breaks")
    parser.add_argument("--careful", action="store_true", help="minutes of a careful read, against its budget")
    parser.add_argument("paths", nargs="*", type=Path, help="notebooks to read (default: the eight in notebooks/)")
    args = parser.parse_args(argv)
    books = read_all(args.paths)
    if args.careful:
        for b in books:
            print(f"{b.name}: core {b.core.minutes_at(CAREFUL):.0f} min, deep dives {b.deep.minutes_at(CAREFUL):.0f} "
                  f"min, longest core code cell {b.core.longest_code_cell} lines, API / H.* {b.core.api} / "
                  f"{b.core.helpers}")
        print(f"all cores: {sum(b.core.minutes_at(CAREFUL) for b in books):.0f} min")
        found = careful_problems(books)
        for line in found:
            print("over the careful budget:", line)
        return 1 if (args.check and found) else 0
    print(table(books))
    found = problems(books)
    for line in found:
        print("over budget:", line)
    if not found:
        print(f"budget met: every core ≤ {CORE_MAX_MIN} min, all cores ≤ {CORES_MAX_MIN} min, markdown cells ≤ "
              f"{MARKDOWN_MAX_WORDS} words, core code cells ≤ {CORE_CELL_MAX_LINES} lines, API ≥ H.* in each core")
    return 1 if (args.check and found) else 0


if __name__ == "__main__":
    sys.exit(main())
