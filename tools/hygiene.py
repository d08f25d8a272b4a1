"""What a stored notebook may hold: no machine-specific path in any output, a PNG for every cell that draws."""
from __future__ import annotations

import json
import re

from .notebooks import cell_source


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
