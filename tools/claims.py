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


# A measured number in prose must say where it was seen (a GPU, "across runs"); a target or a formula is not a
# measurement. The qualifier may sit in the claim's sentence or anywhere in its cell (a paragraph about the H200).
WHERE = re.compile(r"H200|H100|A100|across (?:H200 )?runs|[Ss]een there|on your GPU|\*your\* GPU")
TARGET = re.compile(r"at least|target|\bbar\b|bars\b|set out to|aimed|not the \d|FLOP(?!/s)|\|Y\||bytes of traffic|within noise|±")


@dataclass(frozen=True)
class Claim:
    notebook: str
    cell: str
    value: str
    unit: str
    sentence: str
    cell_text: str = ""

    @property
    def qualified(self) -> bool:
        """It names where it was measured, or it is a target or a formula rather than a measurement."""
        return bool(TARGET.search(self.sentence) or WHERE.search(self.sentence) or WHERE.search(self.cell_text))

    def __str__(self) -> str:
        return f"{self.notebook} {self.cell}  {self.value} {self.unit}  | {self.sentence}"


def claims_in(text: str, notebook: str = "", cell: str = "") -> list[Claim]:
    """Every measured-looking number in ``text`` (code spans left out), with the sentence around it."""
    prose = re.sub(r"`[^`]*`", "`…`", text)
    found = []
    for sentence in SENTENCE_END.split(prose):
        for m in CLAIM.finditer(sentence):
            found.append(Claim(notebook, cell, m["value"], m["unit"], " ".join(sentence.split())[:220], prose))
    return found


def notebook_claims(path: Path) -> list[Claim]:
    import nbformat

    nb = nbformat.read(path, as_version=4)
    out = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            out += claims_in(cell.source, Path(path).name[:2], cell.get("id", ""))
    return out


def unqualified(claims: list[Claim]) -> list[Claim]:
    """Claims that quote a measurement without saying where it was seen."""
    return [c for c in claims if not c.qualified]


def main(argv=None) -> int:
    from .notebooks import notebook_paths

    paths = [Path(p) for p in (argv or sys.argv[1:])] or notebook_paths()
    total = 0
    for path in paths:
        for claim in notebook_claims(path):
            print(("  " if claim.qualified else "? ") + str(claim))
            total += 1
    print(f"{total} numeric claims in the markdown of {len(paths)} notebooks ('?': no GPU, run range or target named)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
