"""The website's Results page, a summary of ``results/*.csv`` (``tools.site`` stages it as ``results.md``).

Per GPU: the figures (ceilings, rates, and the ratios in two panels, one per reading direction), then per lesson
a table of its comparisons (the ratio at three significant digits, the rival it is measured against, the bar the
notebook's run printed and whether it was met) and a table of its other numbers, and the raw CSV one click away.

A ratio's reading comes from its name (``reading``): "A vs B" and "… speedup" say how many times faster the path
the lesson teaches is, so higher is better; "A / B" divides A's time by B's, and is lower-is-better where A is the
taught path (``LOWER_IS_BETTER``). The bars are the lines the notebook printed with a verdict
(``tools.claims.printed_bars``), matched to a number by the value the line prints.
"""
from __future__ import annotations

import csv
import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

from . import claims
from .notebooks import NB_DIR

# "A / B" ratios where A is the path the lesson teaches: its time over the rival's, so lower is better
LOWER_IS_BETTER = re.compile(r"^(pinned|dynamic|cached dynamic|capstone best rung|capstone train step)\b")
SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def significant(value: float, digits: int = 3) -> str:
    """``value`` at ``digits`` significant digits, never in e-notation: 5.26 × 10⁻⁵, 1240, 0.0829."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    exponent = math.floor(math.log10(abs(value)))
    if exponent < -3 or exponent >= 6:
        mantissa = f"{value / 10 ** exponent:.{digits - 1}f}"
        return f"{mantissa}\u00a0×\u00a010{str(exponent).translate(SUPERSCRIPT)}"
    rounded = round(value, digits - 1 - exponent)
    decimals = max(digits - 1 - exponent, 0)
    return f"{rounded:.{decimals}f}"


def cudnn_version(backend: str) -> str:
    """cuDNN's version number as the lessons write it: 91900 → 9.19.0 (90000 and up: major·10000 + minor·100 +
    patch; before 9: major·1000 + minor·100 + patch)."""
    try:
        n = int(backend)
    except ValueError:
        return backend
    if n >= 90000:
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"


def unit_shown(unit: str) -> str:
    return "×" if unit in ("x", "×") else unit


@dataclass(frozen=True)
class Reading:
    rival: str
    higher_is_better: bool


def reading(metric: str) -> Reading | None:
    """How a ratio reads, from its name: the rival it is measured against and which way is better."""
    name = re.sub(r"\s*\((?:GPU time|per call|host)\)\s*$", "", metric).strip()
    m = re.match(r"^(?P<a>.+?) vs (?P<b>.+?)(?: GPU time| per call)?$", name)
    if m:
        a, b = m["a"], m["b"]
        return Reading(a if re.match(r"fused\b", b) else b, True)
    m = re.search(r"speedup over (?P<rival>.+)$", name)
    if m:
        return Reading(m["rival"], True)
    if name.endswith("reload speedup"):
        return Reading("its cold build", True)
    m = re.match(r"^(?P<a>.+?) / (?P<b>.+)$", name)
    if m:
        lower = bool(LOWER_IS_BETTER.match(name))
        return Reading(m["b"] if lower else m["a"], not lower)
    return None


@dataclass(frozen=True)
class Verdict:
    met: str       # "met", "NOT met", "within the noise of the bar"
    bar: str       # "at least 2×"
    line: str      # the printed line


VERDICT = re.compile(r"NOT met|not met|within the noise of the bar|\bmet\b")
NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)")


def printed_verdicts(notebook: str, nb_dir: Path = NB_DIR) -> list[tuple[claims.Bar, Verdict]]:
    """Every bar the notebook's stored outputs print with a verdict."""
    import nbformat

    paths = sorted(Path(nb_dir).glob(f"{notebook}_*.ipynb"))
    if not paths:
        return []
    found, seen = [], set()
    for bar in claims.printed_bars(nbformat.read(paths[0], as_version=4), notebook):
        verdict = VERDICT.search(bar.text)
        if verdict and bar.text not in seen:
            seen.add(bar.text)
            found.append((bar, Verdict(verdict[0], f"{bar.shown}", bar.text)))
    return found


def matching_verdict(value: float, verdicts) -> Verdict | None:
    """The printed bar line that prints ``value`` (at the line's own precision, two significant digits at least),
    other than as the bar itself."""
    for bar, verdict in verdicts:
        for m in NUMBER.finditer(bar.text):
            text = m[1]
            if text == bar.value or len(text.replace(".", "").lstrip("0")) < 2:
                continue
            decimals = len(text.split(".")[1]) if "." in text else 0
            if round(value, decimals) == float(text):
                return verdict
    return None


def read_rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def _cell(text: str) -> str:
    return html.escape(text).replace("|", "&#124;")


def topic_tables(rows: list[dict], verdicts) -> list[str]:
    """A lesson's two tables: its comparisons (ratios and numbers a bar was printed for), then everything else."""
    compared, other = [], []
    for row in rows:
        value = float(row["value"]) if row["value"] else math.nan
        verdict = matching_verdict(value, verdicts) if math.isfinite(value) else None
        shown = significant(value) + (unit_shown(row["unit"]) if row["unit"] in ("x", "%") else
                                      f" {row['unit']}" if row["unit"] else "")
        if row["unit"] == "x" or verdict:
            read = reading(row["metric"]) if row["unit"] == "x" else None
            better = "" if not read else " (higher is better)" if read.higher_is_better else " (lower is better)"
            bar = f"{verdict.met} (bar {verdict.bar})" if verdict else "no bar"
            compared.append(f"| {_cell(row['metric'])} | {shown}{better} | {_cell(read.rival) if read else '—'} | "
                            f"{bar} |")
        else:
            other.append(f"| {_cell(row['metric'])} | {shown} |")
    lines = []
    if compared:
        lines += ["| comparison | result | rival | bar |", "|---|---|---|---|", *compared, ""]
    if other:
        lines += ["| measured | value |", "|---|---:|", *other, ""]
    return lines
