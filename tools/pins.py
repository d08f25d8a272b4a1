"""The versions of the stored GPU run, as pip constraints: ``constraints.txt`` at the checkout's root.

``tools.execute`` rewrites it from every notebook's stamp after a run (``write_pins``, which leaves the file alone
when nothing changed); ``python -m tools.cli pins`` does only that. A fresh install on a GPU machine (``make run`` / ``make test``) installs with
it (``-c constraints.txt``), so a learner gets the torch, cuDNN runtime and frontend the stored outputs were made
with; ``make … LATEST=1`` takes the newest releases instead. ``helpers.libcudnn.stored_run_versions`` reads it back for
the setup cell's one-line note where another torch or cuDNN is already installed (Colab, a CI image).

torch is pinned by its public version (PyPI's Linux wheel of 2.11.0 is the CUDA 13.0 build that brings cuDNN
9.19.0.56, as pip's dry-run report showed on 2026-12-05), the cuDNN runtime by the wheel of the run's CUDA major at the backend version the stamp recorded
(``nvidia-cudnn-cu13==9.19.0.*``), the frontend exactly.
"""
from __future__ import annotations

from pathlib import Path

from .notebooks import ROOT, notebook_paths, stamp

PINS = ROOT / "constraints.txt"
RUN_KEYS = ("torch", "cuda", "cudnn_backend", "cudnn_frontend")   # what a stamp says of the versions that ran


def pins_from(entry: dict) -> list[str]:
    """The constraint lines for one stamp's versions."""
    cuda_major = str(entry["cuda"]).split(".")[0]
    return [f"torch=={str(entry['torch']).split('+')[0]}",
            f"nvidia-cudnn-cu{cuda_major}=={entry['cudnn_backend']}.*",
            f"nvidia-cudnn-frontend=={entry['cudnn_frontend']}"]


def stored_run(stamps: dict[str, dict]) -> tuple[dict | None, list[str]]:
    """(the versions every stamp agrees on, []), or (None, one line naming which notebooks ran on what) when the
    stamps disagree or one lacks a version. ``stamps``: notebook name -> stamp."""
    runs: dict[tuple, list[str]] = {}
    for name, entry in stamps.items():
        runs.setdefault(tuple((entry or {}).get(k) for k in RUN_KEYS), []).append(name[:2])
    if len(runs) == 1 and None not in next(iter(runs)):
        return dict(zip(RUN_KEYS, next(iter(runs)))), []
    said = "; ".join(f"{', '.join(names)} on " + ", ".join(f"{k} {v}" for k, v in zip(RUN_KEYS, run))
                     for run, names in runs.items())
    return None, [f"the notebooks' stamps name more than one set of versions ({said}): re-execute the odd ones on a "
                  f"GPU with the others' versions (python -m tools.execute notebooks/NN_*.ipynb)"]


def pins_text(stamps: dict[str, dict]) -> str:
    """``constraints.txt`` for these stamps (they must agree: ``stored_run``)."""
    versions, problems = stored_run(stamps)
    if problems:
        raise ValueError(problems[0])
    gpus = sorted({e.get("gpu") for e in stamps.values()})
    dates = sorted(e.get("date", "")[:10] for e in stamps.values())
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    header = [f"# The versions of the stored GPU run ({', '.join(gpus)}, {when}, notebooks "
              f"{min(stamps)[:2]}-{max(stamps)[:2]}),",
              "# written from the notebooks' stamps by `python -m tools.execute` (or `python -m tools.cli pins`).",
              "# `make run` / `make test` on a GPU machine install with these as pip constraints; LATEST=1 takes the",
              "# newest releases instead. See tools/pins.py."]
    return "\n".join(header + pins_from(versions)) + "\n"


def committed_stamps() -> dict[str, dict]:
    import nbformat

    return {p.name: stamp(nbformat.read(p, as_version=4)) or {} for p in notebook_paths()}


def pins_problems(path: Path = PINS) -> list[str]:
    """One line when ``constraints.txt`` is missing or is not what the committed stamps say."""
    stamps = committed_stamps()
    versions, problems = stored_run(stamps)
    if problems:
        return problems
    if not path.exists():
        return [f"{path.name} is missing: python -m tools.cli pins writes it from the notebooks' stamps"]
    if path.read_text() != pins_text(stamps):
        return [f"{path.name} is not the stored run's versions ({', '.join(pins_from(versions))}): it is written by "
                f"python -m tools.execute, never by hand; python -m tools.cli pins rewrites it from the stamps"]
    return []


def write_pins(path: Path = PINS) -> str:
    """Rewrite ``constraints.txt`` from the committed stamps; the line to print (what it pins, or why it did not)."""
    stamps = committed_stamps()
    versions, problems = stored_run(stamps)
    if problems:
        return f"{path.name} not written: {problems[0]}"
    text = pins_text(stamps)
    if not path.exists() or path.read_text() != text:   # an unchanged file keeps its date: no venv top-up follows
        path.write_text(text)
    return f"{path.name}: {', '.join(pins_from(versions))} (the versions a fresh GPU install takes)"
