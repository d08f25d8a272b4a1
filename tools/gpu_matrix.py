"""What runs where: for each notebook and each GPU users have, what runs and what is skipped, and why.

Generated from the needs the notebooks' own lines declare (``tools/gates.py``: the gates a notebook requires,
the gates of its cells), the feature gates' rules (``helpers.features.gate_for``) and the GPU profiles
(``helpers.device.PROFILES``), so the table cannot drift from what the code does. The course website shows it (its
home page and GPU page, generated at build time by ``tools/site.py``).

    python -m tools.gpu_matrix            # print the table
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helpers.device import PROFILES
from helpers.features import FEATURES, gate_for, requirements_met_on

from .gates import read_needs
from .notebooks import NB_DIR, notebook_paths, stamp

# The cuDNN backend the table assumes: Colab's pip cuDNN and the one the stored outputs were made with.
BACKEND = 91900
COLUMNS = {"t4": "T4 (sm75)", "l4": "L4 (sm89)", "a100": "A100 (sm80)", "h100": "H100 / H200 (sm90)"}
COLAB_ORDER = ["t4", "l4", "a100", "h100"]  # cheapest first
# What a gated cell's feature is, as a learner would name the part of the notebook it skips.
SECTION = {"sdpa": "fused attention", "sdpa_serving": "serving attention", "sdpa_fp8": "FP8 attention",
           "fp8": "FP8 GEMM", "native_cuda_graph": "native CUDA-graph API", "override_shapes": "override shapes",
           "kernel_cache": "kernel cache", "kernel_cache_serialize": "saved kernel cache", "bf16": "bf16",
           "graph_wrapper": "cudnn.Graph wrapper", "norm_graphs": "norm deep dives"}


def verdict(nb, profile_key: str) -> tuple[str, list[str]]:
    """("runs" | "runs, skips …" | "skipped: …", the features skipped) for one notebook on one profile."""
    p, needs = PROFILES[profile_key], read_needs(nb)
    ok, why = requirements_met_on(needs.requires, p.name, p.sm, BACKEND)
    if not ok:
        return f"skipped: {why.replace(p.name, p.name.split()[-1])}", ["notebook"]
    skipped = [f for f in needs.gated if not gate_for(f, p.name, p.sm, BACKEND).ok]
    if not skipped:
        return "runs", []
    return "runs; skips " + ", ".join(f"{SECTION[f]} ({_short_need(f)})" for f in skipped), skipped


def _needs_newer_cudnn(feature: str) -> bool:
    """True when no GPU runs ``feature`` with the backend the table assumes."""
    return not gate_for(feature, "any GPU", (10, 0), BACKEND).ok


def _short_need(feature: str) -> str:
    (major, minor), backend, _ = FEATURES[feature]
    needs = []
    if feature == "fp8":
        needs.append("sm89+")
    elif (major, minor) > (0, 0):
        needs.append(f"sm{10 * major + minor}+")
    if backend > BACKEND:
        needs.append(f"cuDNN ≥ {backend // 10000}.{(backend // 100) % 100}")
    return ", ".join(needs) or "—"


def _memory_verdict(nb, reserved_gib: float | None) -> str:
    """'3.2 GiB: fits every GPU it runs on', or the profiles it runs on but does not fit (the allocator cap
    stops it there in a rehearsal)."""
    if reserved_gib is None:
        return "not recorded"
    runs_on = [key for key in COLAB_ORDER if verdict(nb, key)[1] != ["notebook"]]
    over = [key.upper() for key in runs_on if reserved_gib > PROFILES[key].memory_gb]
    return f"{reserved_gib:.1f} GiB: " + (f"over {', '.join(over)}" if over else "fits every GPU it runs on")


def table(nb_dir: Path = NB_DIR) -> str:
    """The markdown table (without the markers)."""
    import nbformat

    header = ["notebook", *COLUMNS.values(), "Colab tier that runs all of it", "peak GPU memory (H200 run)"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for path in notebook_paths(nb_dir):
        nb = nbformat.read(path, as_version=4)
        cells = [verdict(nb, key)[0] for key in COLUMNS]
        later = [f for f in read_needs(nb).gated if _needs_newer_cudnn(f)]
        full = next((key for key in COLAB_ORDER if not set(verdict(nb, key)[1]) - set(later)), None)
        tier = f"{full.upper()} ({PROFILES[full].colab})" if full else "none"
        if later:
            tier += "; " + ", ".join(f"{SECTION[f]}: {_short_need(f)}" for f in later)
        peak = (stamp(nb) or {}).get("peak_memory_gib") or {}
        memory = _memory_verdict(nb, peak.get("reserved"))
        lines.append(f"| {path.stem[:2]} | " + " | ".join([*cells, tier, memory]) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
