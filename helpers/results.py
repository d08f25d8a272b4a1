"""Record each notebook's headline numbers in ``results/<gpu>.csv`` (committed: nothing else lives there).
``tools/results_csv.py`` derives those files from the stored outputs and prints them as a table."""
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
    path = results_dir() / f"{d.slug}.csv"
    write(path, [r for r in read(path) if (r["notebook"], r["metric"]) != (notebook, metric)] + [row])
    print(f"recorded {notebook} · {metric} = {text} {unit}".rstrip())
