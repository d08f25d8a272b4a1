"""The headline numbers: the ``recorded …`` lines ``H.record`` prints in the stored outputs, and the
``results/<gpu>.csv`` derived from them (so the committed numbers and the notebooks cannot drift)."""
from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

from helpers.results import read as read_results
from helpers.results import results_dir as default_results_dir
from helpers.results import write

from .notebooks import notebook_paths, stamp


RECORD_LINE = re.compile(r"^recorded (?P<notebook>\S+) · (?P<metric>.+) = (?P<value>\S+)(?: (?P<unit>.*))?$")


def recorded_numbers(nb) -> dict:
    """``{(notebook, metric): (value, unit)}`` from the ``recorded …`` lines ``H.record`` printed (last wins)."""
    found = {}
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        for out in cell.get("outputs", []):
            if out.get("output_type") != "stream" or out.get("name") != "stdout":
                continue
            text = out["text"] if isinstance(out["text"], str) else "".join(out["text"])
            for line in text.splitlines():
                m = RECORD_LINE.match(line.rstrip())
                if m:
                    found[(m["notebook"], m["metric"])] = (m["value"], (m["unit"] or "").strip())
    return found


def _backend_int(version: str | None) -> str:
    """'9.19.0' -> '91900' (the form ``H.record`` writes)."""
    try:
        major, minor, patch = (int(x) for x in str(version).split(".")[:3])
        return str(major * 10000 + minor * 100 + patch)
    except (TypeError, ValueError):
        return str(version)


def derived_results(notebooks: dict) -> dict:
    """``{gpu_slug: [rows]}``: the results CSVs that the stored notebooks imply, from their recorded lines
    and stamps. ``notebooks`` maps a name to a loaded notebook."""
    from helpers.device import slugify

    tables: dict = {}
    for name in sorted(notebooks):
        nb = notebooks[name]
        entry = stamp(nb) or {}
        if not entry.get("gpu"):
            continue
        for (notebook, metric), (value, unit) in recorded_numbers(nb).items():
            tables.setdefault(slugify(entry["gpu"]), []).append({
                "notebook": notebook, "metric": metric, "value": value, "unit": unit, "gpu": entry["gpu"],
                "torch": entry.get("torch", ""), "cudnn_backend": _backend_int(entry.get("cudnn_backend")),
                "recorded_at": entry.get("date", "")})
    return tables


def results_problems(notebooks: dict, results_dir: Path) -> list[str]:
    """Differences between each committed ``<gpu>.csv`` and the numbers printed in the stored outputs."""
    problems = []
    for slug, rows in derived_results(notebooks).items():
        path = Path(results_dir) / f"{slug}.csv"
        if not path.exists():
            problems.append(f"{path.name} is missing; the stored notebooks recorded {len(rows)} numbers")
            continue
        stored = {(r["notebook"], r["metric"]): (r["value"], r["unit"]) for r in read_results(path)}
        printed = {(r["notebook"], r["metric"]): (r["value"], r["unit"]) for r in rows}
        for key in sorted(printed.keys() | stored.keys()):
            if key not in stored:
                problems.append(f"{path.name}: {key[0]} · {key[1]} is printed in the notebook but not in the CSV")
            elif key not in printed:
                problems.append(f"{path.name}: {key[0]} · {key[1]} is in the CSV but no stored output records it")
            elif stored[key] != printed[key]:
                problems.append(f"{path.name}: {key[0]} · {key[1]} is {' '.join(stored[key])} in the CSV but "
                                f"{' '.join(printed[key])} in the notebook")
    return problems


def sync_results(paths=None, results_dir: Path | None = None) -> list[Path]:
    """Rewrite ``results/<gpu>.csv`` from the stored outputs of the notebooks (all by default)."""
    import nbformat

    folder = Path(results_dir or default_results_dir())
    notebooks = {Path(p).name: nbformat.read(p, as_version=4) for p in (paths or notebook_paths())}
    written = []
    for slug, rows in derived_results(notebooks).items():
        path = folder / f"{slug}.csv"
        write(path, sorted(rows, key=lambda r: r["notebook"]))
        written.append(path)
    return written


def plain(value: float, digits: int = 4) -> str:
    """A number with ``digits`` significant digits as a plain decimal (never scientific notation)."""
    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def headline_table(gpu_slug: str | None = None) -> str:
    """One GPU's recorded numbers (this GPU's by default) as text, grouped by notebook, plain decimals with units:
    what ``make run`` prints at the end."""
    if gpu_slug is None:
        from helpers.device import device_info

        gpu_slug = device_info().slug
    rows = sorted(read_results(default_results_dir() / f"{gpu_slug}.csv"), key=lambda r: r["notebook"])   # stable
    if not rows:
        return "  (none recorded)"
    width = max(len(r["metric"]) for r in rows)
    lines = []
    for notebook, group in itertools.groupby(rows, key=lambda r: r["notebook"]):
        lines.append(f"  {notebook}")
        lines += [f"      {r['metric']:<{width}}  {plain(r['value']):>12} {r['unit']}".rstrip() for r in group]
    return "\n".join(lines)
