"""What a stored notebook may hold: no machine-specific path in any output, a PNG for every cell that draws, and
compared outputs that are the ones its GPU run recorded."""
from __future__ import annotations

import json
import re

from .notebooks import cell_source, output_hashes, stamp


def output_texts(cell) -> list[str]:
    """Every piece of text a code cell stores: streams, text/JSON display data, error tracebacks."""
    texts = []
    for out in cell.get("outputs", []):
        if "text" in out:
            texts.append(out["text"] if isinstance(out["text"], str) else "".join(out["text"]))
        for mime, value in out.get("data", {}).items():
            if mime.startswith("text/") or mime.endswith("json"):
                texts.append(value if isinstance(value, str) else
                             "".join(value) if isinstance(value, list) else json.dumps(value))
        if out.get("output_type") == "error":
            texts += [out.get("ename", ""), out.get("evalue", ""), "\n".join(out.get("traceback", []))]
    return texts


# Folders that name a user, a checkout, a temp dir or a Python environment: they differ on every machine.
# System folders (/usr/..., /lib/...) are the same everywhere and may appear.
LOCAL_PATH = re.compile(
    r"(?<![\w.<>~-])(?:"
    r"/(?:home|Users|root|tmp|private|var/tmp|var/folders|work|workspace|content|mnt|scratch|data)(?=/)"
    r"|[\w./-]*/(?:site-packages|dist-packages|\.venv|venv|envs|\.pyenv|conda)(?=/)"
    r"|[A-Za-z]:\\Users\\)[^\s'\"<>]*")


def path_problems(nb, name: str) -> list[str]:
    """Stored outputs that hold a machine-specific absolute path, one line per cell."""
    problems = []
    for index, cell in enumerate(nb["cells"]):
        for text in output_texts(cell) if cell["cell_type"] == "code" else []:
            hit = LOCAL_PATH.search(text)
            if hit:
                problems.append(f"{name} cell {index} (id {cell.get('id')}): machine-specific path {hit[0][:80]!r}")
                break
    return problems


DRAWS = re.compile(r"\bplt\.|\bH\.(?:bar_compare|line_compare|plot_sweep)\(|\.plot\(")


def figure_problems(nb, name: str) -> list[str]:
    """Cells that draw (call the plotting helpers or ``plt.``) but store no PNG, one line per cell."""
    problems = []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code" or not DRAWS.search(cell_source(cell)):
            continue
        if not any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            problems.append(f"{name} cell {index} (id {cell.get('id')}) draws a figure but stores no image/png "
                            "(executed with a non-inline matplotlib backend?)")
    return problems


def output_problems(nb, name: str) -> list[str]:
    """Compared cells whose stored outputs are not the ones the notebook's GPU run recorded in its stamp
    (``outputs_sha256``, written by ``tools.execute``), one line per cell; one line for a stamp without that record.
    Only a GPU run writes outputs: any of these is fixed by re-executing the notebook there."""
    rerun = f"re-execute it on a GPU (python -m tools.execute notebooks/{name})"
    recorded = (stamp(nb) or {}).get("outputs_sha256")
    if recorded is None:
        return [f"{name}: its stamp records no hash of the compared outputs (stamped before tools.execute wrote one): "
                f"{rerun}"]
    now = output_hashes(nb)
    where = {cell.get("id") or f"#{i}": f"{name} cell {i} (id {cell.get('id')})" for i, cell in enumerate(nb["cells"])}
    problems = []
    for key in now:
        if key not in recorded:
            problems.append(f"{where[key]}: nbval compares its outputs, but its GPU run recorded none for it: {rerun}")
        elif now[key] != recorded[key]:
            problems.append(f"{where[key]}: its stored outputs are not the ones its GPU run recorded "
                            f"(edited by hand?): {rerun}")
    for key in recorded:
        if key not in now:
            problems.append(f"{where.get(key, f'{name} cell id {key}')}: its GPU run recorded compared outputs, but "
                            f"nbval no longer compares this cell (or it is gone): {rerun}")
    return problems
