"""Notebook metadata shared by the executor and the tests: the code hash, the
execution stamp, and each notebook's hardware needs."""
from __future__ import annotations

import hashlib
import json

META_KEY = "cudnn_course"


def code_hash(nb) -> str:
    """sha256 over the notebook's code cells, in order (trailing spaces ignored)."""
    sources = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
            sources.append("\n".join(line.rstrip() for line in src.strip().splitlines()))
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def requires(nb) -> dict:
    """What the notebook needs: ``{"gpu": bool, "min_sm": int, "features": [...]}``."""
    return dict(nb.get("metadata", {}).get(META_KEY, {}).get("requires", {"gpu": True}))


def stamp(nb) -> dict | None:
    return nb.get("metadata", {}).get(META_KEY, {}).get("execution")


def write_stamp(nb, *, runtime_s: float) -> dict:
    """Record where, when and on what code the notebook was executed."""
    import datetime as _dt

    from .device import device_info, versions

    v = versions()
    d = device_info()
    entry = {
        "gpu": d.name,
        "sm": f"{d.sm[0]}.{d.sm[1]}",
        "driver": v.get("driver"),
        "torch": v.get("torch"),
        "cuda": v.get("cuda (torch build)"),
        "cudnn_backend": v.get("cudnn backend"),
        "cudnn_frontend": v.get("cudnn frontend"),
        "python": v.get("python"),
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "runtime_s": round(runtime_s, 1),
        "code_sha256": code_hash(nb),
    }
    nb.setdefault("metadata", {}).setdefault(META_KEY, {})["execution"] = entry
    return entry
