"""Numbers the notebooks' prose states: every measured-looking number in a markdown cell, with its sentence.

    python -m tools.claims                 # one line per claim: notebook, cell, number, sentence
    python -m tools.claims --changed       # claims whose number is not in the prose the notebook's GPU run saw
    python -m tools.claims --bars          # every bar the prose quotes, against the bars the code prints
    python -m tools.claims --comparatives  # comparative words no printed verdict backs, one per line

Prose may quote a measurement only as a range seen on a named GPU ("0.08–0.10 ms across H200 runs") or as a
target ("at least 2×"); the stored run's own numbers belong in printed outputs. This inventory is where a
review of those claims starts (issue 14's claim table).

A number changed in the prose after the notebook's GPU run is listed too (``--changed``, and ``!`` in the
inventory): ``tools.execute`` records every claim of the prose in the stamp (``prose_claims``, from
``prose_record``), and ``changed_claims`` lists those no longer in it, bar or not.

Two further checks (issue 25):

* **Bars.** A bar the prose quotes ("at least 2× faster", "the course's 50× bar") must be a bar the notebook's
  code prints in its stored outputs ("(at least 2×): met", "(bar 1.5x: NOT met)", ">= 10x faster -> met",
  "(target ≥ 1.3x)"), same value, same unit family (× and x are one unit; ms, µs and s are one family, as are
  GB/s and TB/s). See ``prose_bars``, ``printed_bars`` and ``bar_mismatches``.
* **Comparatives.** Conclusion words in the prose ("faster", "negligible", "within noise", ...) are listed with
  their sentence; an entry is *backed* when a nearby code cell prints a verdict about it (rule: ``backing``).
  A reviewer's reason that an unbacked entry holds on every run goes in ``tools/claims_reviewed.py``.
"""
from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass
from pathlib import Path

# a number (or range) followed by a unit of something measured; "3×3", "56×56" (dimensions) are not claims
NUMBER = r"\d+(?:[.,]\d+)?"
CLAIM = re.compile(rf"(?<![\w.×])(?P<value>{NUMBER}(?:\s?[–-]\s?{NUMBER})?)\s?"
                   r"(?P<unit>TFLOP/s|GB/s|TB/s|ms|µs|us|s\b|%|×(?!\s?\d)|x\b(?!\s?\d))")
# a bare number right after a claim and a connective takes the claim's unit ("870–1060 TFLOP/s against 630–700 for
# bf16"): it is the same quantity, measured elsewhere; one followed by a word of its own ("and 16 layers") is not
CONTINUED = re.compile(rf"\s+(?:against|vs\.?|versus|to|and|or|over)\s+(?:about\s+)?"
                       rf"(?P<value>{NUMBER}(?:\s?[–-]\s?{NUMBER})?)"
                       r"(?=\s*(?:[,;:.)]|$)|\s+(?:for|on|in|at|across|with|when|where)\b)")
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
            more = CONTINUED.match(sentence, m.end())
            if more:
                found.append(Claim(notebook, cell, more["value"], m["unit"], " ".join(sentence.split())[:220], prose))
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


# ---- numbers changed in the prose since the GPU run ------------------------------------------------------------

def _said(claim: Claim) -> str:
    return " ".join(f"{claim.value} {claim.unit}".split())


def prose_record(nb) -> dict[str, list[str]]:
    """``{markdown cell id: ["0.08–0.10 ms", ...]}``: every claim of the prose, as ``tools.execute`` records it in the
    stamp (``prose_claims``) when the notebook runs on a GPU."""
    record: dict[str, list[str]] = {}
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            said = [_said(c) for c in claims_in(cell.source, cell=cell.get("id", ""))]
            if said:
                record[cell.get("id", "")] = said
    return record


def changed_claims(nb_or_path, name: str = "") -> list[Claim] | None:
    """The claims of the prose that the notebook's GPU run did not see (a number changed, or added, since), with
    their cell; None when the stamp holds no record (a run before tools.execute recorded one). Counted over the
    whole notebook, so splitting or merging markdown cells changes nothing; a number changed anywhere does."""
    from collections import Counter

    from .notebooks import stamp

    nb, from_path = _notebook(nb_or_path)
    name = name or from_path
    record = (stamp(nb) or {}).get("prose_claims")
    if record is None:
        return None
    seen = Counter(said for claims in record.values() for said in claims)
    changed = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for claim in claims_in(cell.source, name, cell.get("id", "")):
            if seen[_said(claim)] > 0:
                seen[_said(claim)] -= 1
            else:
                changed.append(claim)
    return changed


def changed_problems(path: Path) -> list[str]:
    """One line per number in ``path``'s prose that its GPU run did not see, and one for a stamp with no record of
    the prose: each names the notebook, the cell and what to do."""
    rerun = f"re-execute it on a GPU (python -m tools.execute notebooks/{Path(path).name})"
    found = changed_claims(path)
    if found is None:
        return [f"{Path(path).name}: its stamp records no prose (executed before tools.execute recorded it): {rerun}"]
    return [f"{Path(path).name} cell {c.cell}: the prose says {_said(c)}, which its GPU run's prose did not "
            f"(\"…{_around(c.sentence, c.value)}…\"): say what the run saw, or say it without a number, or {rerun}"
            for c in found]


def _around(sentence: str, value: str, width: int = 45) -> str:
    """The words of ``sentence`` within ``width`` characters of ``value``."""
    at = max(sentence.find(value), 0)
    return sentence[max(0, at - width):at + len(value) + width].strip()


# ---- bars: what the prose quotes against what the code prints ------------------------------------------------

BAR_NUMBER = r"(?<![\w.])(?P<value>\d+(?:\.\d+)?)"
BAR_UNIT = r"TFLOP/s|GB/s|TB/s|ms|µs|us|s\b|%|×|x\b(?!\s?\d)"
# a bar is a number right after a cue ("at least 2×", "≥ 1.3x", "bar 1.5x", "target 5 ms"), or right before "bar"
# ("the course's 50× bar"); a number elsewhere in the sentence ("whose cold build took 0.3–0.9 s") is not one
BAR_CUE = r"(?:at least|no less than|not less than|≥|>=|≤|<=|\btarget(?:\s+(?:of|is))?:?|\bbars?(?:\s+(?:of|is|at))?:?)\s*"
PROSE_BAR = re.compile(rf"{BAR_CUE}{BAR_NUMBER}\s?(?P<unit>{BAR_UNIT})|{BAR_NUMBER.replace('value', 'value2')}"
                       rf"\s?(?P<unit2>{BAR_UNIT})\s+bars?\b", re.I)
# printed: the unit may be left out ("(bar 600: met)"): the line's first measured number gives it
PRINTED_BAR = re.compile(rf"{BAR_CUE}{BAR_NUMBER}\s?(?P<unit>{BAR_UNIT})?", re.I)
BAR_LINE = re.compile(r"\bbar\b|\btarget\b|\bmet\b", re.I)       # an output line that states a bar or its verdict
MEASURED = re.compile(rf"{BAR_NUMBER}\s?(?P<unit>{BAR_UNIT})")
# unit -> (family, factor to the family's base): × and x are one unit; times and bandwidths compare across scales
UNITS = {"×": ("×", 1.0), "x": ("×", 1.0), "%": ("%", 1.0), "TFLOP/s": ("TFLOP/s", 1.0),
         "GB/s": ("B/s", 1e9), "TB/s": ("B/s", 1e12), "s": ("s", 1.0), "ms": ("s", 1e-3), "µs": ("s", 1e-6),
         "us": ("s", 1e-6), "": ("", 1.0)}
UNITS_BY_CASEFOLD = {unit.casefold(): value for unit, value in UNITS.items()}


@dataclass(frozen=True)
class Bar:
    notebook: str
    cell: str
    value: str
    unit: str
    text: str          # the prose sentence, or the printed line

    @property
    def key(self) -> tuple[str, float]:
        family, factor = UNITS.get(self.unit) or UNITS_BY_CASEFOLD[self.unit.casefold()]
        return family, round(float(self.value) * factor, 12)

    @property
    def shown(self) -> str:
        unit = "×" if self.unit.lower() == "x" else self.unit
        return f"{self.value}{unit}" if unit in ("×", "%", "") else f"{self.value} {unit}"


def _prose(text: str) -> str:
    return re.sub(r"`[^`]*`", "`…`", text)


def _sentences(prose: str) -> list[str]:
    return [" ".join(s.split()) for s in SENTENCE_END.split(prose)]


def _cell_id(cell) -> str:
    return cell.get("id", "")


def _notebook(nb_or_path):
    if isinstance(nb_or_path, (str, Path)):
        import nbformat

        return nbformat.read(nb_or_path, as_version=4), Path(nb_or_path).name[:2]
    return nb_or_path, ""


def output_lines(cell) -> list[str]:
    """The lines a code cell printed: its streams and its text/plain results (what a reader sees)."""
    lines = []
    for out in cell.get("outputs", []):
        texts = [out.get("text", "")] + [out.get("data", {}).get("text/plain", "")]
        for text in texts:
            lines += ("".join(text) if isinstance(text, list) else text).splitlines()
    return lines


def prose_bars(nb, name: str = "") -> list[Bar]:
    """Every bar a markdown cell quotes: a number with a unit right after "at least"/"≥"/"target"/"bar", or
    right before "bar"."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        for sentence in _sentences(_prose(cell.source)):
            for m in PROSE_BAR.finditer(sentence):
                value, unit = (m["value"], m["unit"]) if m["value"] else (m["value2"], m["unit2"])
                found.append(Bar(name, _cell_id(cell), value, unit, sentence[:220]))
    return found


def printed_bars(nb, name: str = "") -> list[Bar]:
    """Every bar the code prints in its stored outputs, on lines that state a bar or a verdict ("bar", "target",
    "met"): "(at least 2×): met", "(bar 1.5x: NOT met)", ">= 10x faster -> met", "(target ≥ 1.3x)". A bar printed
    without its unit ("(bar 600: met)") takes the unit of the line's first measured number; a bare number after
    another cue ("at B >= 16") is not a bar."""
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for line in output_lines(cell):
            if not BAR_LINE.search(line):
                continue
            for m in PRINTED_BAR.finditer(line):
                unit = m["unit"] or ""
                if not unit and not re.search(r"\bbar|\btarget", m.group(0), re.I):
                    continue   # a bare number after ">=" ("at B >= 16") is a condition, not a bar
                if not unit:
                    first = MEASURED.search(line)
                    unit = first["unit"] if first else ""
                found.append(Bar(name, _cell_id(cell), m["value"], unit, line.strip()[:220]))
    return found


def bar_mismatches(nb_or_path, name: str = "") -> list[str]:
    """One line for every bar the prose quotes that no printed bar of the same notebook equals (value and unit
    family), naming the notebook, the cell, the prose value and the bars the code prints."""
    nb, from_path = _notebook(nb_or_path)
    name = name or from_path
    printed = printed_bars(nb, name)
    keys = {b.key for b in printed}
    shown = ", ".join(dict.fromkeys(b.shown for b in printed)) or "none"
    return [f"{name} {b.cell}: prose bar {b.shown} is not a bar the code prints (printed: {shown}) | {b.text}"
            for b in prose_bars(nb, name) if b.key not in keys]


# ---- comparatives: conclusion words, and whether a printed verdict backs them ----------------------------------

COMPARATIVE_WORDS = ("faster", "slower", "ahead", "behind", "tie", "wins", "loses", "beats", "almost nothing",
                     "costs nothing", "gains less", "bandwidth-bound", "compute-bound", "negligible", "within noise")
# words about which path is quicker: a verdict line that names a side or a tie (ahead / behind / tie) backs them
SPEED_WORDS = {"faster", "slower", "ahead", "behind", "tie"}


def _word_pattern(word: str) -> re.Pattern:
    return re.compile(r"(?<![\w-])" + r"[-\s]+".join(map(re.escape, re.split(r"[-\s]", word))) + r"(?![\w-])", re.I)


WORD_PATTERNS = {w: _word_pattern(w) for w in COMPARATIVE_WORDS}
VERDICT = re.compile(r"\bahead\b|\bbehind\b|\btie\b", re.I)   # a bar's "met" says nothing of who is quicker
# The backing rule: the code cells nearest to the markdown cell (the one before, whose output prose often reads,
# "the lines above", and the next three, whose outputs it announces) print a line that contains the same word,
# or, for a speed word, a verdict (ahead / behind / tie).
BACK_BEFORE, BACK_AFTER = 1, 3


@dataclass(frozen=True)
class Comparative:
    notebook: str
    cell: str
    word: str
    sentence: str
    backed_by: str = ""    # "cell <id>: <the printed line>" where an output backs it
    reason: str = ""       # a reviewer's reason that it holds on every run (tools/claims_reviewed.py)

    def reviewed_by(self, key: tuple[str, str, str]) -> bool:
        """Whether the review ``(notebook, word, quote)`` is about this entry: same notebook and word, and the quote
        stands in its sentence (wherever the sentence's cell is: a split or merged cell keeps its reviews)."""
        notebook, word, quote = key
        return (notebook, word) == (self.notebook, self.word) and quote in self.sentence

    def __str__(self) -> str:
        line = f"{self.notebook} {self.cell}  {self.word}  | {self.sentence[:220]}"
        if self.backed_by:
            line += f"  [backed: {self.backed_by}]"
        if self.reason:
            line += f"  [reviewed: {self.reason}]"
        return line


def backing(cells, index: int, word: str) -> str:
    """Where the outputs near markdown cell ``index`` back ``word`` ("cell <id>: <line>"), or "" (rule above)."""
    code = [i for i, c in enumerate(cells) if c.cell_type == "code"]
    before = [i for i in code if i < index][-BACK_BEFORE:] if BACK_BEFORE else []
    after = [i for i in code if i > index][:BACK_AFTER]
    for i in after + before[::-1]:
        for line in output_lines(cells[i]):
            if WORD_PATTERNS[word].search(line) or (word in SPEED_WORDS and VERDICT.search(line)):
                return f"cell {_cell_id(cells[i])}: {line.strip()[:120]}"
    return ""


def reviewed_reasons() -> dict[tuple[str, str, str], str]:
    """A reviewer's reasons, (notebook, word, a quote from the sentence) -> why the entry holds on every run."""
    from .claims_reviewed import REVIEWED

    return dict(REVIEWED)


def comparatives(nb_or_path, name: str = "", reviewed: dict | None = None) -> list[Comparative]:
    """Every comparative or conclusion word in the markdown, with its sentence, its backing and any reviewed
    reason (``reviewed`` defaults to ``tools/claims_reviewed.py``)."""
    nb, from_path = _notebook(nb_or_path)
    name = name or from_path
    reviewed = reviewed_reasons() if reviewed is None else reviewed
    found = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for sentence in _sentences(_prose(cell.source)):
            for word, pattern in WORD_PATTERNS.items():
                for _ in pattern.finditer(sentence):
                    entry = Comparative(name, _cell_id(cell), word, sentence, backing(nb.cells, index, word))
                    reason = next((r for key, r in reviewed.items() if entry.reviewed_by(key)), "")
                    found.append(dataclasses.replace(entry, reason=reason))
    return found


def unbacked(entries: list[Comparative]) -> list[Comparative]:
    """Entries no printed verdict backs (a reviewed reason is shown with them, it does not back them)."""
    return [e for e in entries if not e.backed_by]


def stale_reviews(entries: list[Comparative], reviewed: dict) -> list[tuple[str, str, str]]:
    """Reviewed keys that match no entry any more (the sentence changed): review them again."""
    return [k for k in reviewed if not any(e.reviewed_by(k) for e in entries)]


def main(argv=None) -> int:
    from .notebooks import notebook_paths

    args = list(sys.argv[1:] if argv is None else argv)
    mode = next((a for a in args if a in ("--bars", "--comparatives", "--changed")), "")
    paths = [Path(p) for p in args if not p.startswith("--")] or notebook_paths()
    if mode == "--bars":
        checked = bad = 0
        for path in paths:
            checked += len(prose_bars(*_notebook(path)))
            for line in bar_mismatches(path):
                print(line)
                bad += 1
        print(f"{checked} bars quoted in the prose of {len(paths)} notebooks, {checked - bad} equal to a bar the code "
              f"prints, {bad} not")
        return 1 if bad else 0
    if mode == "--comparatives":
        reviewed = reviewed_reasons()
        entries = [e for path in paths for e in comparatives(path, reviewed=reviewed)]
        open_ = unbacked(entries)
        for entry in open_:
            print(("  " if entry.reason else "? ") + str(entry))
        for key in stale_reviews(entries, reviewed):
            print(f"stale review {key}: no such comparative any more")
        per = {p.name[:2]: 0 for p in paths}
        for entry in open_:
            per[entry.notebook] += 0 if entry.reason else 1
        reasons = sum(1 for e in open_ if e.reason)
        print(f"{len(open_) - reasons} unbacked comparatives ('?'; {reasons} more with a reviewer's reason) of "
              f"{len(entries)} in the markdown of {len(paths)} notebooks; per notebook: "
              + ", ".join(f"{k} {v}" for k, v in per.items()))
        return 1 if len(open_) > reasons or stale_reviews(entries, reviewed) else 0
    if mode == "--changed":
        problems = [line for path in paths for line in changed_problems(path)]
        for line in problems:
            print(f"! {line}")
        print(f"{len(problems)} numeric claims in the markdown of {len(paths)} notebooks changed since their GPU run")
        return 1 if problems else 0
    from collections import Counter

    total = 0
    for path in paths:
        changed = Counter(changed_claims(path) or [])
        for claim in notebook_claims(path):
            mark = "! " if changed[claim] > 0 else "  " if claim.qualified else "? "
            changed[claim] -= 1
            print(mark + str(claim))
            total += 1
    print(f"{total} numeric claims in the markdown of {len(paths)} notebooks ('?': no GPU, run range or target named; "
          f"'!': changed since the notebook's GPU run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
