"""Notebook metadata and the checks on stored notebooks, shared by the executor and the tests:
the code hash, the execution stamp, each notebook's hardware needs, what a stored output may hold,
figures, the recorded headline numbers, and the repository the badges and setup cells point at.

    python -m tools.notebooks set-repo OWNER/NAME   # point badges, setup cells and pyproject at a fork
    python -m tools.notebooks sync-results          # rewrite results/<gpu>.csv from the stored outputs
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
from pathlib import Path

META_KEY = "cudnn_course"
ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"

# A GitHub repository URL as the badges, the setup cells and pyproject.toml write it.
REPO_URL = re.compile(r"https://github\.com/(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+?)(?=\.git\b|[/\"')\s]|$)")


def notebook_paths(nb_dir: Path = NB_DIR) -> list[Path]:
    """The course's notebooks, ``NN_name.ipynb``, in order: the one way every tool and test finds them."""
    return sorted(Path(nb_dir).glob("[0-9][0-9]_*.ipynb"))


def notebook_path(number: str, nb_dir: Path = NB_DIR) -> Path:
    """Notebook ``NN`` (e.g. ``"04"``)."""
    found = [p for p in notebook_paths(nb_dir) if p.name[:2] == number]
    if len(found) != 1:
        raise FileNotFoundError(f"expected one notebook {number}_*.ipynb in {Path(nb_dir).name}/, found {len(found)}")
    return found[0]


def _source(cell) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


# ---------------------------------------------------------------- code hash and stamp
def code_hash(nb) -> str:
    """sha256 over what the notebook's code cells run, in order: comments, blank lines and trailing spaces are
    left out, so fixing a comment does not call for a GPU run; any change to the code does.

    Repository URLs are replaced by a placeholder first, so pointing the setup cells at a fork
    (``set-repo``) does not make the stored outputs look stale."""
    sources = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = _without_comments(REPO_URL.sub("https://github.com/<repo>", _source(cell)))
            sources.append("\n".join(line.rstrip() for line in src.splitlines() if line.strip()))
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def requires(nb) -> dict:
    """What the notebook needs: ``{"gpu": bool, "min_sm": int, "features": [...]}``."""
    return dict(nb.get("metadata", {}).get(META_KEY, {}).get("requires", {"gpu": True}))


def cell_needs(cell) -> list:
    """The features a code cell needs (``cudnn_course.needs``): where one is missing, the test harness runs the
    cell without comparing its outputs and reports it skipped (see conftest.py)."""
    return list(cell.get("metadata", {}).get(META_KEY, {}).get("needs", []))


GATE_DEFINITION = re.compile(r"^(\w+)\s*=\s*H\.gate\(\s*[\"'](\w+)[\"']\s*\)", re.M)


def gate_uses(nb) -> list[tuple[int, dict, set]]:
    """``(index, cell, features)`` for every code cell whose code (comments aside) names a variable bound by
    ``NAME = H.gate("feature")`` in this notebook, the defining cell included."""
    gates, found = {}, []
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        code = _without_comments(_source(cell))
        gates.update({m[1]: m[2] for m in GATE_DEFINITION.finditer(code)})
        used = {feature for name, feature in gates.items() if re.search(rf"\b{name}\b", code)}
        if used:
            found.append((index, cell, used))
    return found


def _without_comments(src: str) -> str:
    """The source with its ``#`` comments removed (strings kept: an f-string may use a gate)."""
    import io
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(src).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return src
    lines = src.splitlines(keepends=True)
    for tok in reversed([t for t in tokens if t.type == tokenize.COMMENT]):
        row, col = tok.start
        lines[row - 1] = lines[row - 1][:col] + lines[row - 1][tok.end[1]:]
    return "".join(lines)


def stamp(nb) -> dict | None:
    return nb.get("metadata", {}).get(META_KEY, {}).get("execution")


def write_stamp(nb, *, runtime_s: float, peak_memory_gib: dict | None = None) -> dict:
    """Record where, when and on what code the notebook was executed, and the kernel's peak GPU memory
    (torch's allocator: ``allocated`` by tensors, ``reserved`` from the driver; worker processes not counted)."""
    import datetime as _dt

    from helpers.device import device_info, versions

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
        "peak_memory_gib": peak_memory_gib,
        "code_sha256": code_hash(nb),
    }
    nb.setdefault("metadata", {}).setdefault(META_KEY, {})["execution"] = entry
    return entry


# ---------------------------------------------------------------- what stored outputs may hold
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
        if cell["cell_type"] != "code" or not DRAWS.search(_source(cell)):
            continue
        if not any("image/png" in out.get("data", {}) for out in cell.get("outputs", [])):
            problems.append(f"{name} cell {index} (id {cell.get('id')}) draws a figure but stores no image/png "
                            "(executed with a non-inline matplotlib backend?)")
    return problems


# ---------------------------------------------------------------- recorded headline numbers
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
        with open(path, newline="") as f:
            stored = {(r["notebook"], r["metric"]): (r["value"], r["unit"]) for r in csv.DictReader(f)}
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

    from helpers.results import FIELDS
    from helpers.results import results_dir as default_dir

    results_dir = Path(results_dir or default_dir())
    notebooks = {Path(p).name: nbformat.read(p, as_version=4) for p in (paths or notebook_paths())}
    written = []
    for slug, rows in derived_results(notebooks).items():
        path = results_dir / f"{slug}.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".csv.tmp")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(sorted(rows, key=lambda r: r["notebook"]))
        tmp.replace(path)
        written.append(path)
    return written


# ---------------------------------------------------------------- the repository everything points at
def repository(root: Path = ROOT) -> str:
    """``OWNER/NAME`` from pyproject.toml's Repository URL: the one place a fork changes (see set-repo)."""
    m = re.search(r'^Repository = "([^"]+)"', (Path(root) / "pyproject.toml").read_text(), re.M)
    if not m or not REPO_URL.fullmatch(m[1]):
        raise ValueError("pyproject.toml needs [project.urls] Repository = \"https://github.com/OWNER/NAME\"")
    return REPO_URL.fullmatch(m[1])["slug"]


def repo_files(root: Path = ROOT) -> list[Path]:
    root = Path(root)
    return [root / "pyproject.toml", root / "README.md", *notebook_paths(root / "notebooks")]


COLAB_BADGE = re.compile(r"https://colab\.research\.google\.com/github/(?P<slug>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
                         r"/blob/main/(?P<path>notebooks/[^)\s\"]+\.ipynb)")
CLONE_URL = re.compile(r"\"git\", \"clone\"[^\n]*?" + REPO_URL.pattern)


def repo_mentions(root: Path = ROOT) -> list[tuple[str, str, str]]:
    """``(file, what, OWNER/NAME)`` for pyproject's Repository URL, every Colab badge (README and notebooks)
    and every setup cell's clone URL: all of them must name the same repository."""
    import nbformat

    root = Path(root)
    found = [("pyproject.toml", "Repository URL", repository(root))]
    found += [("README.md", f"badge for {m['path']}", m["slug"]) for m in COLAB_BADGE.finditer((root / "README.md").read_text())]
    for path in notebook_paths(root / "notebooks"):
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            found += [(path.name, f"badge for {m['path']}", m["slug"]) for m in COLAB_BADGE.finditer(cell.source)]
            if cell.cell_type == "code":
                found += [(path.name, "setup cell clone URL", m["slug"]) for m in CLONE_URL.finditer(cell.source)]
    return found


def set_repository(slug: str, root: Path = ROOT) -> list[Path]:
    """Point pyproject.toml, every Colab badge and every setup cell's clone URL at ``github.com/OWNER/NAME``."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", slug):
        raise ValueError(f"expected OWNER/NAME, got {slug!r}")
    old = repository(root)
    changed = []
    for path in repo_files(root):
        text = path.read_text()
        new = text.replace(f"github.com/{old}", f"github.com/{slug}").replace(
            f"colab.research.google.com/github/{old}/", f"colab.research.google.com/github/{slug}/")
        if new != text:
            path.write_text(new)
            changed.append(path)
    return changed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    repo = sub.add_parser("set-repo", help="point badges, setup cells and pyproject.toml at OWNER/NAME")
    repo.add_argument("slug", metavar="OWNER/NAME")
    sub.add_parser("sync-results", help="rewrite results/<gpu>.csv from the stored notebook outputs")
    args = parser.parse_args(argv)
    if args.command == "set-repo":
        for path in set_repository(args.slug):
            print(f"updated {path.relative_to(ROOT)}")
        print(f"everything now points at https://github.com/{args.slug}")
    else:
        for path in sync_results():
            print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
