"""What a stored notebook may hold: no machine-specific path in any output, a PNG for every cell that draws, and
outputs that are the ones its GPU run wrote."""
from __future__ import annotations

import json
import re

from .notebooks import CODE_FILES_SINCE, ROOT, cell_source, file_hash, output_hashes, stamp, stored_output_hashes


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
    """Cells whose stored outputs are not the ones the notebook's GPU run wrote, one line per cell: any output of any
    code cell changed since the run (``stored_outputs_sha256``: text, HTML, figures and errors, compared by nbval or
    not, no number masked), or a cell nbval now compares differently (``outputs_sha256``, sanitised as nbval
    sanitises); one line for a stamp without these records (both written by ``tools.execute``). Only a GPU run
    writes outputs: any of these is fixed by re-executing the notebook there."""
    rerun = f"re-execute it on a GPU (python -m tools.execute notebooks/{name})"
    entry = stamp(nb) or {}
    recorded, stored = entry.get("outputs_sha256"), entry.get("stored_outputs_sha256")
    if recorded is None or stored is None:
        what = "the compared outputs" if recorded is None else "every cell's stored outputs"
        return [f"{name}: its stamp records no hash of {what} (stamped before tools.execute wrote one): {rerun}"]
    now, stored_now = output_hashes(nb), stored_output_hashes(nb)
    where = {cell.get("id") or f"#{i}": f"{name} cell {i} (id {cell.get('id')})" for i, cell in enumerate(nb["cells"])}
    problems = []
    for key in stored_now:
        if stored_now[key] != stored.get(key):
            problems.append(f"{where[key]}: its stored outputs are not the ones its GPU run wrote (edited by hand?): "
                            f"{rerun}")
        elif key in now and key not in recorded:
            problems.append(f"{where[key]}: nbval compares its outputs, but its GPU run recorded none for it: {rerun}")
        elif key in now and now[key] != recorded[key]:
            problems.append(f"{where[key]}: its compared outputs, sanitised, are not the ones its GPU run recorded "
                            f"(tests/nbval_sanitize.cfg changed?): {rerun}")
    for key in recorded:
        if key not in now:
            problems.append(f"{where.get(key, f'{name} cell id {key}')}: its GPU run recorded compared outputs, but "
                            f"nbval no longer compares this cell (or it is gone): {rerun}")
    return problems


def code_file_problems(stored: dict, root=ROOT) -> list[str]:
    """One line per course file (``helpers/``, ``grader/``) that changed since a notebook's GPU run used it, naming
    the notebooks to re-execute, and one per stamp from ``CODE_FILES_SINCE`` on that records no such files;
    ``stored``: notebook name -> notebook. Older stamps without the record are not judged: ``unrecorded`` lists them."""
    from pathlib import Path

    stale: dict[str, list[str]] = {}
    missing = [f"{name}: its stamp of {(stamp(nb) or {}).get('date')} records no course files its run used: "
               f"re-execute it on a GPU (python -m tools.execute notebooks/{name})"
               for name, nb in stored.items() if name not in unrecorded({name: nb}) and
               (stamp(nb) or {}).get("code_files_sha256") is None]
    for name, nb in stored.items():
        for path, recorded in ((stamp(nb) or {}).get("code_files_sha256") or {}).items():
            now = file_hash(Path(root) / path) if (Path(root) / path).is_file() else None
            if now != recorded:
                stale.setdefault(path, []).append(name)
    return missing + [f"{path} {'is gone' if not (Path(root) / path).is_file() else 'changed'} since the GPU run of "
            f"{', '.join(names)}, which used it: re-execute "
            f"{'it' if len(names) == 1 else 'them'} on a GPU (python -m tools.execute "
            f"{' '.join(f'notebooks/{n}' for n in names)})" for path, names in sorted(stale.items())]


def unrecorded(stored: dict) -> list[str]:
    """The notebooks whose stamp, written before ``CODE_FILES_SINCE``, does not record the course files their run
    used."""
    return [name for name, nb in stored.items() if (stamp(nb) or {}).get("code_files_sha256") is None
            and str((stamp(nb) or {}).get("date", "")) < CODE_FILES_SINCE]
