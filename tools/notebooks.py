"""The course's notebooks as files: where they are, their hardware needs (read by ``tools/gates.py``), the code
hash, the hash of the outputs nbval compares, and the execution stamp. The checks on stored outputs live in
``tools/hygiene.py``, the headline numbers in ``tools/results_csv.py``, the repository the badges point at in
``tools/fork.py``; ``tools/cli.py`` is the command line over them.
"""
from __future__ import annotations

import copy
import hashlib
import json
import re
import warnings
from pathlib import Path

META_KEY = "cudnn_course"
ROOT = Path(__file__).resolve().parent.parent
NB_DIR = ROOT / "notebooks"
SANITIZE_FILE = ROOT / "tests" / "nbval_sanitize.cfg"   # what nbval masks before it compares (pyproject's addopts)

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


def cell_source(cell) -> str:
    """A cell's source as one string (nbformat stores a string or a list of lines)."""
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


# ---------------------------------------------------------------- core and deep dives
DEEP_DIVES_HEADING = re.compile(r"^#\s+Deep dives\b")


def split_core(nb) -> tuple[list, list]:
    """(core cells, deep-dive cells): the deep dives start at the first '# Deep dives' markdown heading."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown" and DEEP_DIVES_HEADING.match(cell_source(cell).lstrip()):
            return nb["cells"][:i], nb["cells"][i:]
    return nb["cells"], []


def core_seconds(nb) -> float | None:
    """Wall time of the core's code cells in this executed notebook: from the first one's start to the last one's
    reply (nbclient's timing metadata), i.e. what a ``DEEP_DIVES = False`` run spends in cells; None if untimed."""
    import datetime as _dt

    timed = [c.get("metadata", {}).get("execution", {}) for c in split_core(nb)[0] if c["cell_type"] == "code"]
    start = next((t.get("iopub.execute_input") for t in timed if t.get("iopub.execute_input")), None)
    end = next((t.get("shell.execute_reply") for t in reversed(timed) if t.get("shell.execute_reply")), None)
    if not (start and end):
        return None
    parse = lambda ts: _dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return (parse(end) - parse(start)).total_seconds()


# ---------------------------------------------------------------- code hash and stamp
def code_hash(nb) -> str:
    """sha256 over what the notebook's code cells run, in order: comments, blank lines and trailing spaces are
    left out, so fixing a comment does not call for a GPU run; any change to the code does.

    Repository URLs are replaced by a placeholder first, so pointing the setup cells at a fork
    (``set-repo``) does not make the stored outputs look stale."""
    sources = []
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            src = _without_comments(REPO_URL.sub("https://github.com/<repo>", cell_source(cell)))
            sources.append("\n".join(line.rstrip() for line in src.splitlines() if line.strip()))
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


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


# ---------------------------------------------------------------- the outputs nbval compares, and their hash
# What nbval leaves out of a comparison (its IPyNbFile.skip_compare without --nbdime): figures, metadata, tracebacks,
# execution counts. A stream is compared under its name (stdout, stderr).
NOT_COMPARED = frozenset({"metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                          "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg"})


def compared(cell) -> bool:
    """Whether nbval, run as the course runs it (``--nbval``, not lax), compares this code cell's outputs: the cell
    ran, and neither a tag nor a comment marker (``nbval-ignore-output``, ``nbval-skip``, ...) turns that off.
    A cell gated on a feature (``cudnn_course.needs``) counts: it is compared where the feature exists."""
    from nbval.plugin import find_comment_markers, find_metadata_tags

    if cell["cell_type"] != "code" or cell.get("execution_count") is None:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # nbval's own warning about conflicting markers, said when it collects
        options = dict(find_metadata_tags(cell.get("metadata", {})))
        options.update(find_comment_markers(cell_source(cell)))
    return bool(options.get("check", True)) and not options.get("skip", False)


def sanitize_patterns(path: Path = SANITIZE_FILE) -> list[tuple[str, str]]:
    """The ``(regex, replacement)`` pairs of ``tests/nbval_sanitize.cfg``, read as nbval reads them."""
    from nbval.plugin import get_sanitize_patterns

    return get_sanitize_patterns(Path(path).read_text())


def compared_outputs(cell, patterns: list[tuple[str, str]]) -> dict[str, list]:
    """A code cell's outputs as nbval compares them: streams merged per name (``\\r`` and ``\\b`` applied), every
    MIME type but figures, an error's name and value; each string sanitised with ``patterns``, repository URLs
    replaced as in ``code_hash``. ``cell`` as nbformat reads it."""
    import nbformat
    from nbval.plugin import coalesce_streams

    def sanitized(value):
        if not isinstance(value, str):
            return value
        for regex, replacement in patterns:
            value = re.sub(regex, replacement, value)
        return REPO_URL.sub("https://github.com/<repo>", value)

    grouped: dict[str, list] = {}
    for out in coalesce_streams([nbformat.from_dict(copy.deepcopy(o)) for o in cell.get("outputs", [])]):
        fields = {out["name"]: out["text"]} if out["output_type"] == "stream" else dict(out)
        for key, value in fields.items():
            for k, v in (value.items() if key == "data" else [(key, value)]):
                if k not in NOT_COMPARED:
                    grouped.setdefault(k, []).append(sanitized(v))
    return grouped


def output_hashes(nb) -> dict[str, str]:
    """``{cell id: sha256}`` over what nbval compares of every compared cell (``compared``, ``compared_outputs``):
    equal for two runs whose outputs nbval would find equal, different when a compared output is edited."""
    patterns = sanitize_patterns()
    return {cell.get("id") or f"#{index}": hashlib.sha256(
                json.dumps(compared_outputs(cell, patterns), sort_keys=True).encode()).hexdigest()
            for index, cell in enumerate(nb["cells"]) if compared(cell)}


# ---------------------------------------------------------------- every stored output, and its hash
def stored_outputs(cell) -> list:
    """A code cell's outputs exactly as stored (text, HTML, figures, errors), less execution counts; repository
    URLs replaced as in ``code_hash`` (``make fork`` rewrites them). No number is masked: this is what a reader
    sees, whether or not nbval compares it."""
    def tidy(value):
        if isinstance(value, str):
            return REPO_URL.sub("https://github.com/<repo>", value)
        if isinstance(value, list):
            return [tidy(v) for v in value]
        return {k: tidy(v) for k, v in value.items() if k != "execution_count"} if isinstance(value, dict) else value

    return tidy(list(cell.get("outputs", [])))


def stored_output_hashes(nb) -> dict[str, str]:
    """``{cell id: sha256}`` over every code cell's ``stored_outputs``: a hand edit of any output a learner reads,
    compared by nbval or not, changes its cell's hash."""
    return {cell.get("id") or f"#{index}": hashlib.sha256(json.dumps(stored_outputs(cell), sort_keys=True).encode())
            .hexdigest() for index, cell in enumerate(nb["cells"]) if cell["cell_type"] == "code"}


# ---------------------------------------------------------------- the course's code a run used, and its hash
COURSE_CODE = ("helpers", "grader")   # the packages whose files a notebook's stamp hashes when its run used them
CODE_FILES_SINCE = "2026-12-05"        # every stamp written from this date on records them (code_files_sha256)


def file_hash(path: Path) -> str:
    """sha256 of what a course file does: a Python module's text without its comments, docstrings, blank lines and
    trailing spaces (editing a comment or a docstring calls for no GPU run), any other file's bytes. Made from the
    text, not from a dump of the syntax tree, whose form changes between Python versions: a stamp written by the GPU
    machine's Python must match the hash CI's Python makes of the same file."""
    import ast
    import io
    import tokenize

    data = Path(path).read_bytes()
    if Path(path).suffix != ".py":
        return hashlib.sha256(data).hexdigest()
    text = data.decode("utf-8")
    lines = text.splitlines()

    def char_col(line: int, byte_col: int) -> int:   # ast counts UTF-8 bytes, tokenize characters
        return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", errors="ignore"))

    spans = []   # ((line, col), (end line, end col)) to leave out, lines from 1, columns in characters
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            doc = body[0]
            spans.append(((doc.lineno, char_col(doc.lineno, doc.col_offset)),
                          (doc.end_lineno, char_col(doc.end_lineno, doc.end_col_offset))))
    spans += [(tok.start, tok.end) for tok in tokenize.generate_tokens(io.StringIO(text).readline)
              if tok.type == tokenize.COMMENT]
    for (line, col), (end_line, end_col) in sorted(spans, reverse=True):
        lines[line - 1:end_line] = [lines[line - 1][:col] + lines[end_line - 1][end_col:]]
    kept = [line.rstrip() for line in lines if line.strip()]
    return hashlib.sha256("\n".join(kept).encode("utf-8")).hexdigest()


def code_files_hashes(files, root: Path = ROOT) -> dict[str, str]:
    """``{path: file_hash}`` for the course files a run used (paths relative to ``root``)."""
    return {f: file_hash(Path(root) / f) for f in sorted(files)}


def stamp(nb) -> dict | None:
    return nb.get("metadata", {}).get(META_KEY, {}).get("execution")


def write_stamp(nb, *, runtime_s: float, peak_memory_gib: dict | None = None,
                prose_claims: dict | None = None, ran_files: list | None = None) -> dict:
    """Record where, when and on what code the notebook was executed, the kernel's peak GPU memory
    (torch's allocator: ``allocated`` by tensors, ``reserved`` from the driver; worker processes not counted),
    the hash of every compared cell's outputs (``output_hashes``) and of every code cell's stored outputs
    (``stored_output_hashes``; ``tools.hygiene.output_problems`` checks both), the numbers its prose stated then
    (``prose_claims``, from ``tools.claims.prose_record``), the time its core cells took (``core_runtime_s``), and the
    course files the run used with their hashes (``code_files_sha256``, from ``ran_files``; ``tools.hygiene``'s
    ``code_file_problems`` checks them)."""
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
        "core_runtime_s": None if core_seconds(nb) is None else round(core_seconds(nb), 1),
        "peak_memory_gib": peak_memory_gib,
        "code_sha256": code_hash(nb),
        "outputs_sha256": output_hashes(nb),
        "stored_outputs_sha256": stored_output_hashes(nb),
        "prose_claims": prose_claims,
        "code_files_sha256": None if ran_files is None else code_files_hashes(ran_files),
    }
    nb.setdefault("metadata", {}).setdefault(META_KEY, {})["execution"] = entry
    return entry
