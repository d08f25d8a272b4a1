"""Numbers the notebooks' prose states: every measured-looking number in a markdown cell, with its sentence.

    python -m tools.claims            # one line per claim: notebook, cell, number, sentence

Prose may quote a measurement only as a range seen on a named GPU ("0.08–0.10 ms across H200 runs") or as a
target ("at least 2×"); the stored run's own numbers belong in printed outputs. This inventory is where a
review of those claims starts (issue 14's claim table).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

# a number (or range) followed by a unit of something measured; "3×3", "56×56" (dimensions) are not claims
NUMBER = r"\d+(?:[.,]\d+)?"
CLAIM = re.compile(rf"(?<![\w.×])(?P<value>{NUMBER}(?:\s?[–-]\s?{NUMBER})?)\s?"
                   r"(?P<unit>TFLOP/s|GB/s|TB/s|ms|µs|us|s\b|%|×(?!\s?\d)|x\b(?!\s?\d))")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`*])|\n\s*[-*] |\n\n")


@dataclass(frozen=True)
class Claim:
    notebook: str
    cell: str
    value: str
    unit: str
    sentence: str

    def __str__(self) -> str:
        return f"{self.notebook} {self.cell}  {self.value} {self.unit}  | {self.sentence}"


def claims_in(text: str, notebook: str = "", cell: str = "") -> list[Claim]:
    """Every measured-looking number in ``text`` (code spans left out), with the sentence around it."""
    prose = re.sub(r"`[^`]*`", "`…`", text)
    found = []
    for sentence in SENTENCE_END.split(prose):
        for m in CLAIM.finditer(sentence):
            found.append(Claim(notebook, cell, m["value"], m["unit"], " ".join(sentence.split())[:220]))
    return found


def notebook_claims(path: Path) -> list[Claim]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out += claims_in(cell.source, Path(path).name[:2], cell.get("id", ""))
    return out


def main(argv=None) -> int:
    from .notebooks import notebook_paths

    paths = [Path(p) for p in (argv or sys.argv[1:])] or notebook_paths()
    total = 0
    for path in paths:
        for claim in notebook_claims(path):
            print(claim)
            total += 1
    print(f"{total} numeric claims in the markdown of {len(paths)} notebooks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
