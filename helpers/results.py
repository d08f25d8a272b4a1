"""Record each notebook's headline numbers in ``results/<gpu>.csv`` (committed: nothing else lives there)."""
from __future__ import annotations

import csv
import datetime as _dt
import os
from pathlib import Path

FIELDS = ["notebook", "metric", "value", "unit", "gpu", "torch", "cudnn_backend", "recorded_at"]


def results_dir() -> Path:
    """``$COURSE_RESULTS_DIR``, else ``results/`` at the checkout root, else ``./results``."""
    if os.environ.get("COURSE_RESULTS_DIR"):
        return Path(os.environ["COURSE_RESULTS_DIR"])
    from .paths import COURSE_ROOT, in_checkout

    return (COURSE_ROOT if in_checkout() else Path.cwd()) / "results"


def results_file(gpu_slug: str | None = None) -> Path:
    if gpu_slug is None:
        from .device import device_info

        gpu_slug = device_info().slug
    return results_dir() / f"{gpu_slug}.csv"


def read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write(path: Path, rows: list[dict]) -> None:
    """The one writer of a results CSV: ``rows`` under the ``FIELDS`` header, replaced atomically (a crash never
    leaves half a file). ``H.record`` upserts one row through it; ``tools.results_csv`` rewrites a whole file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    os.replace(tmp, path)


def record(notebook: str, metric: str, value: float, unit: str) -> None:
    """Upsert one headline number for this GPU (keyed by notebook + metric)."""
    import torch

    from .device import backend_version, device_info

    if not isinstance(value, (int, float)):
        raise TypeError(f"value for {metric!r} must be a number, got {type(value).__name__}")
    d = device_info()
    text = f"{float(value):.6g}"  # the same string in the CSV and in the printed line (the tests compare them)
    row = {"notebook": notebook, "metric": metric, "value": text, "unit": unit, "gpu": d.name,
           "torch": torch.__version__, "cudnn_backend": str(backend_version()),
           "recorded_at": _dt.datetime.now().isoformat(timespec="seconds")}
    path = results_file(d.slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    write(path, [r for r in read(path) if (r["notebook"], r["metric"]) != (notebook, metric)] + [row])
    print(f"recorded {notebook} · {metric} = {text} {unit}".rstrip())


def plain(value: float, digits: int = 4) -> str:
    """A number with ``digits`` significant digits as a plain decimal (never scientific notation)."""
    import math

    value = float(value)
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


def headline_table(gpu_slug: str | None = None) -> str:
    """The recorded numbers as text, grouped by notebook, plain decimals with units."""
    df = summary(gpu_slug)
    if not len(df):
        return "  (none recorded)"
    width = max(len(m) for m in df["metric"])
    lines = []
    for notebook, part in df.groupby("notebook", sort=True):
        lines.append(f"  {notebook}")
        for _, row in part.iterrows():
            lines.append(f"      {row['metric']:<{width}}  {plain(row['value']):>12} {row['unit']}".rstrip())
    return "\n".join(lines)


def summary(gpu_slug: str | None = None):
    """All recorded headline numbers for one GPU as a pandas table."""
    import pandas as pd

    rows = read(results_file(gpu_slug))
    if not rows:
        return pd.DataFrame(columns=["notebook", "metric", "value", "unit"])
    df = pd.DataFrame(rows)
    df["value"] = df["value"].astype(float)
    return df[["notebook", "metric", "value", "unit"]].sort_values(["notebook"], kind="stable").reset_index(drop=True)
