"""The course website: the committed notebooks with their stored outputs, rendered by Sphinx and MyST-NB.

    python -m tools.site                 # = make site: stage the sources, build build/site/html, say how to preview
    python -m tools.site --out DIR       # the HTML somewhere else

Nothing is executed (``nb_execution_mode = "off"``): the pages show the outputs of the GPU run that stamped each
notebook. The hand-written pages and ``conf.py`` live in ``site/``; this module copies them into a staging folder
(``build/site/src``, git-ignored) beside the pages it generates, then runs Sphinx on that folder:

- per notebook, its core (``lessons/NN_name.ipynb``) and its deep dives (``lessons/deep_dives/NN_name.ipynb``):
  copies of the notebook split at its ``# Deep dives`` heading (``tools.notebooks.split_core``), each opened by a
  generated header (Colab, the ``.ipynb``, the hand-out of ``tools.student.student_copy``, the run's stamp, the
  glossary terms the notebook uses), every heading given a label, every stored figure given alt text read from
  the code that drew it (``figure_alt``);
- the home page's tables (``tools.reading_time``, ``tools.gpu_matrix``), the workshop agenda, the code layout;
- the results (``results/*.csv``, summarised by ``tools.site_results``, figures drawn here), the API index
  (``tools.frontend_api.API_REF`` over the notebooks' code), each API name also an object of the search index at
  the section that teaches it;
- the whole course as one page to print (Sphinx's ``singlehtml`` builder into ``print/``, from the same doctrees).

Every page ends with its source on GitHub and a link to open an issue about it; ``site/_static/course.js`` ranks
search hits (a lesson before its deep dives) and takes snippets from the article, opening a hit at its section.

It is also the Sphinx extension ``conf.py`` loads: ``setup`` registers a math renderer that draws TeX with
matplotlib's mathtext at build time, so the site needs no MathJax and works offline, the API objects, each figure's
own alt text (the one the run stored, ``output["metadata"]["image/png"]["alt"]``, else ``figure_alt``'s) and the
source links.
"""
from __future__ import annotations

import argparse
import ast
import copy
import csv
import html
import io
import json
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import fork, frontend_api, gpu_matrix, reading_time, site_results, student
from .notebooks import DEEP_DIVES_HEADING, NB_DIR, ROOT, cell_source, notebook_paths, split_core, stamp

SOURCES = ROOT / "site"                       # conf.py, the hand-written pages, _static/
BUILD = ROOT / "build" / "site"
STAGE = BUILD / "src"                          # sources and generated pages, as Sphinx reads them
HTML = BUILD / "html"
DOCTREES = BUILD / "doctrees"
RESULTS = ROOT / "results"
GENERATED = "_generated"                      # fragments the hand-written pages include; not pages of their own
LESSONS = "lessons"                            # one page per notebook's core
DEEP_DIVES = "lessons/deep_dives"              # one per notebook's deep dives
DOWNLOADS = "downloads"                        # the .ipynb files the pages offer (not pages)
PRINT = "print"                                # in the HTML folder: the whole course as one page (singlehtml)

# The workshop day on the home page: the cores in order, the first exercise of each after it.
DAY_START = (9, 0)
EXERCISE_MIN = 10            # an exercise's minutes after each core (site/workshop.md)
BREAK_MIN, LUNCH_MIN = 15, 60
BREAK_AFTER = 2              # a short break after every second notebook; lunch instead at the half-way point


# ---------------------------------------------------------------- small readers
WRITTEN: set[Path] = set()   # what this staging wrote: anything else in the generated folders is stale


def write_if_changed(path: Path, data: str | bytes) -> None:
    """Write ``data`` only when it differs, so Sphinx's incremental build rebuilds only what changed."""
    WRITTEN.add(Path(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    binary = isinstance(data, bytes)
    if path.exists() and (path.read_bytes() if binary else path.read_text()) == data:
        return
    path.write_bytes(data) if binary else path.write_text(data)


def title(nb) -> str:
    """The notebook's title, ``NN · What it teaches``, from its first heading."""
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            m = re.search(r"^#\s+(.+)$", cell_source(cell), re.M)
            if m:
                return m[1].strip()
    raise ValueError("no title heading: give the first markdown cell a '# NN · Title' line")


def colab_url(nb) -> str:
    """The Open-in-Colab URL of the notebook's own badge (``tools.fork.COLAB_BADGE``)."""
    for cell in nb["cells"]:
        m = fork.COLAB_BADGE.search(cell_source(cell))
        if m:
            return m[0]
    raise ValueError("no Open-in-Colab badge: the title cell needs one (make fork writes them)")


def run_line(entry: dict | None) -> str:
    """One sentence naming the run whose outputs the page shows, from the notebook's stamp."""
    if not entry:
        return "This notebook has no stamp: its outputs come from no recorded GPU run."
    minutes = lambda s: "—" if s is None else f"{s / 60:.1f} min"
    return (f"Outputs stored from a run on **{entry.get('gpu')}** (sm {entry.get('sm')}) with torch "
            f"{entry.get('torch')}, cuDNN {entry.get('cudnn_backend')} and cuDNN frontend "
            f"{entry.get('cudnn_frontend')}, "
            f"on {str(entry.get('date', ''))[:10]}: the whole notebook ran in {minutes(entry.get('runtime_s'))}, "
            f"its core in {minutes(entry.get('core_runtime_s'))}.")


def plain(markdown: str) -> str:
    """Inline markdown as plain text (for link texts and alt texts): no code ticks, emphasis or links."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"\*\*(.+?)\*\*|\*(\S.*?)\*", lambda m: m[1] or m[2], text).replace("`", "")
    return re.sub(r"[<>{}]", "", text).strip()


# ---------------------------------------------------------------- headings and their labels
@dataclass
class Section:
    label: str        # the Sphinx label the staged copy puts before the heading
    title: str        # as plain text
    deep_dive: bool   # on the deep-dives page


PARAMETERS_HEADING = re.compile(r"^(#{1,4}\s+)\d+\s*·\s*(Parameters)\s*$", re.M)


def shown_heading(text: str) -> str:
    """A heading as the site shows it: "Parameters" unnumbered on every page (02-06 number it "1 ·", 01, 07 and
    08 do not; the other sections keep the numbers the prose refers to)."""
    return re.sub(r"^\d+\s*·\s*(Parameters)$", r"\1", text.strip())


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", plain(text).lower()).strip("-")[:60] or "section"


def heading_labels(nb, number: str) -> dict[int, list[tuple[int, Section]]]:
    """``{cell index: [(line number, Section), ...]}`` for every heading of every markdown cell (code fences
    skipped), each with a label unique in the site: ``nbNN-<slug>``."""
    found, seen = {}, set()
    deep = False
    for index, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        fenced = False
        for line_no, line in enumerate(cell_source(cell).splitlines()):
            if line.lstrip().startswith("```"):
                fenced = not fenced
            m = None if fenced else re.match(r"^(#{1,4})\s+(.+?)\s*#*\s*$", line)
            if not m:
                continue
            deep = deep or bool(DEEP_DIVES_HEADING.match(line))
            label = base = f"nb{number}-{_slug(m[2])}"
            n = 2
            while label in seen:
                label, n = f"{base}-{n}", n + 1
            seen.add(label)
            found.setdefault(index, []).append((line_no, Section(label, plain(shown_heading(m[2])), deep)))
    return found


def with_labels(source: str, labels: list[tuple[int, Section]]) -> str:
    lines = PARAMETERS_HEADING.sub(r"\1\2", source).splitlines()
    for line_no, section in sorted(labels, key=lambda x: x[0], reverse=True):
        lines.insert(line_no, f"({section.label})=")
    return "\n".join(lines)


# ---------------------------------------------------------------- alt text for the stored figures
_TEXT_CALLS = {"set_title": "title", "suptitle": "title", "title": "title", "set_xlabel": "x", "xlabel": "x",
               "set_ylabel": "y", "ylabel": "y"}
_TEXT_KEYWORDS = {"title": "title", "xlabel": "x", "ylabel": "y"}
_AXIS_KEYWORDS = {"x": "x", "y": "y"}      # H.plot_sweep / H.line_compare name the columns they draw


def known_values(cells, entry: dict | None) -> dict:
    """Names the code cells bind to literals (``N = 32``, ``SHAPE = dict(...)`` excepted), as a reader of the
    code would resolve them, the last binding winning; ``DEVICE.name`` is the stamped GPU."""
    values = {}
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(_python_only(cell_source(cell)))
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                values.update(_literal_bindings(node.targets[0], node.value))
    if entry and entry.get("gpu"):
        values["DEVICE.name"] = entry["gpu"]
    return values


def _literal_bindings(target, value) -> dict:
    """``{name: value}`` for ``NAME = literal`` and ``A, B = literal, literal``; None for a name bound to anything
    else (an earlier literal no longer holds)."""
    if isinstance(target, ast.Name):
        try:
            return {target.id: ast.literal_eval(value)}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return {target.id: None}
    if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
        found = {}
        for t, v in zip(target.elts, value.elts):
            found.update(_literal_bindings(t, v))
        return found
    return {}


def _python_only(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


def _text_of(node, values: dict) -> str | None:
    """A string expression as a reader would read it: literals as they are, f-string fields resolved from
    ``values`` where they can be, an unresolved field left out; None for anything else."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
                continue
            key = ast.unparse(value.value)
            if values.get(key) is not None:
                spec = ast.unparse(value.format_spec)[2:-1] if value.format_spec else ""
                try:
                    parts.append(format(values[key], spec))
                except (ValueError, TypeError):
                    parts.append(str(values[key]))
            else:
                parts.append("…")
        text = "".join(parts)
        text = re.sub(r"(…[\s×x,*]*)+…", "…", text)
        return text if re.sub(r"[…\W]", "", text) else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text_of(node.left, values), _text_of(node.right, values)
        return (left or "") + (right or "") or None
    return None


def figure_texts(source: str, values: dict) -> dict[str, list[str]]:
    """``{"title": [...], "x": [...], "y": [...]}``: the titles and axis labels a plotting cell's code writes."""
    found = {"title": [], "x": [], "y": []}
    columns = {"x": [], "y": []}     # the data columns a plotting helper was given, for an axis with no label

    def add(kind, node, into=found):
        text = _text_of(node, values)
        if text and text.strip() and " ".join(text.split()) not in into[kind]:
            into[kind].append(" ".join(text.split()))

    try:
        tree = ast.parse(_python_only(source))
    except SyntaxError:
        return found
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in _TEXT_CALLS and node.args:
            add(_TEXT_CALLS[name], node.args[0])
        labelled = {k.arg for k in node.keywords}
        for keyword in node.keywords:
            if keyword.arg in _TEXT_KEYWORDS:
                add(_TEXT_KEYWORDS[keyword.arg], keyword.value)
            elif keyword.arg in _AXIS_KEYWORDS and f"{keyword.arg}label" not in labelled:
                add(_AXIS_KEYWORDS[keyword.arg], keyword.value, columns)
    return {kind: found[kind] or columns.get(kind, []) for kind in found}


def leading_comment(source: str) -> str:
    """The cell's first comment line, without a deep-dive marker's ``Deep dive X:`` prefix."""
    first = source.lstrip().split("\n", 1)[0]
    if not first.startswith("#"):
        return ""
    return re.sub(r"^#\s*(Deep dive\s+[A-Z]\b\s*[:·-]?\s*)?", "", first).strip()


def figure_alt(source: str, values: dict, of: int = 1) -> str:
    """Alt text for a figure a code cell stored: what the code says it shows (titles, then the axes), else the
    cell's leading comment."""
    texts = figure_texts(source, values)
    comment = leading_comment(source)
    parts = ["; ".join(texts["title"])] if texts["title"] else ([comment] if comment else [])
    y, x = " / ".join(texts["y"]), " / ".join(texts["x"])
    if y or x:
        parts.append(f"Plotted: {y} against {x}" if y and x else f"Plotted: {y}" if y else f"Horizontal axis: {x}")
    if comment and texts["title"]:
        parts.append(f"({comment})")
    if not parts:
        return ""
    lead = "Figure" if of == 1 else f"One of {of} figures"
    return f"{lead}: " + ". ".join(p.rstrip(".") for p in parts).replace('"', "'") + "."


# ---------------------------------------------------------------- the glossary and the terms a page uses
# How each glossary term (site/glossary.md) shows up in prose and in API names: a regex each.
TERM_PATTERNS = {
    "engine": r"\bengines?\b|deselect_engines|engine_count",
    "engine config": r"\bengine config(?:uration)?s?\b",
    "knob": r"\bknobs?\b",
    "plan": r"\bplans?\b|execution_plans|build_plans?\b|plan_at_index|select_plan",
    "heuristic mode": r"\bheur(?:istics?)?[_ ]modes?\b|heur_mode",
    "support check": r"\bsupport check|check_support",
    "variant pack": r"\bvariant[ _-]packs?\b",
    "workspace": r"\bworkspaces?\b|workspace_size|deselect_workspace",
    "UID": r"\bUIDs?\b|set_uid|get_uid|_of_uid",
    "pass-by-value scalar": r"pass[ _-]by[ _-]value",
    "behaviour and numeric notes": r"\bbehaviou?r[ _]notes?\b|\bnumeric[ _]notes?\b",
    "CGA": r"\bCGAs?\b|\bcluster (?:of CTAs|launch)",
    "kernel cache": r"\bkernel[ _]cache",
    "Stats": r"\bStats\b",
    "flash attention": r"\bflash[ -]attention\b",
    "causal mask": r"\bcausal mask|\bdiagonal_band_right_bound\b",
    "grouped-query attention": r"\bgrouped[ -]query attention\b|\bGQA\b",
    "handle": r"\bhandles?\b|create_handle|set_stream",
    "AMAX": r"\bamax\b|\bamax_",
    "epilogue": r"\bepilogues?\b",
    "descale": r"\bdescal(?:e|es|ed|ing)\b|descale_",
    "pygraph": r"\bpygraph\b",
    "virtual tensor": r"\bvirtual tensors?\b|set_is_virtual",
}


def glossary_terms(path: Path = SOURCES / "glossary.md") -> list[str]:
    """The terms ``site/glossary.md`` defines: the unindented lines inside its ``{glossary}`` block."""
    text = Path(path).read_text()
    block = re.search(r"```\{glossary\}\n(.*?)\n```", text, re.S)
    if not block:
        raise ValueError(f"{Path(path).name} has no {{glossary}} block")
    return [line.strip() for line in block[1].splitlines() if line.strip() and not line[0].isspace()
            and not line.startswith(":")]


CASED_TERMS = ("UID", "Stats", "CGA")    # matched as written: "uid" or "stats" in prose mean something else


def terms_in(text: str, terms: list[str]) -> list[str]:
    """The glossary terms ``text`` uses, in the glossary's order."""
    return [t for t in terms if re.search(TERM_PATTERNS[t], text, re.I if t not in CASED_TERMS else 0)]


def term_links(terms: list[str]) -> str:
    return " · ".join(f"{{term}}`{t}`" for t in terms)


# ---------------------------------------------------------------- the notebooks' pages
@dataclass
class Lesson:
    number: str
    stem: str
    title: str
    core_minutes: float
    deep_minutes: float
    sections: dict = field(default_factory=dict)     # cell index -> [(line, Section)]
    has_deep_dives: bool = True

    @property
    def core_doc(self) -> str:
        return f"{LESSONS}/{self.stem}"

    @property
    def deep_doc(self) -> str:
        return f"{DEEP_DIVES}/{self.stem}"


def repository_url() -> str:
    return f"https://github.com/{fork.repository()}"


def source_url(path: str) -> str:
    """A file of the course on GitHub, on ``main``."""
    return f"{repository_url()}/blob/main/{path}"


def handout_name(stem: str) -> str:
    """The hand-out's download name: never the full notebook's, so a learner who takes both keeps both."""
    return f"{stem}_handout.ipynb"


RECIPE_IMPORT = re.compile(r"from helpers\.recipes import ([\w, ]+)|helpers/recipes/(\w+)\.py")


def recipes_used(nb) -> list[str]:
    """The ``helpers/recipes`` modules a notebook imports or names, in the order it first does."""
    found = []
    for cell in nb["cells"]:
        for m in RECIPE_IMPORT.finditer(cell_source(cell)):
            for name in (m[1].split(",") if m[1] else [m[2]]):
                name = name.strip()
                if name and name not in found and (ROOT / "helpers" / "recipes" / f"{name}.py").is_file():
                    found.append(name)
    return found


def header(nb, lesson: Lesson, page: str, terms: list[str]) -> str:
    """The generated block under a page's title: buttons, the run, the reading time, what running it needs, the
    recipes it reuses, the terms, the other page."""
    up = "../" * page.count("/")
    actions = [f"[Open in Colab]({colab_url(nb)})",
               f"{{download}}`Notebook (.ipynb) <{up}{DOWNLOADS}/full/{lesson.stem}.ipynb>`",
               f"{{download}}`Hand-out, no answers (.ipynb) <{up}{DOWNLOADS}/handout/{handout_name(lesson.stem)}>`",
               f"[View on GitHub]({source_url(f'notebooks/{lesson.stem}.ipynb')})"]
    lines = ["", ":::{container} course-actions", "\n".join(actions), ":::", "",
             ":::{container} course-run", run_line(stamp(nb)), ":::", ""]
    if page == lesson.core_doc:
        lines.append(f"**Core lesson**, about {lesson.core_minutes:.0f} min to read"
                     + (f"; then its {{doc}}`deep dives </{lesson.deep_doc}>` "
                        f"(about {lesson.deep_minutes:.0f} min, each one optional)." if lesson.has_deep_dives else "."))
        lines += ["", "**To run it:** in Colab (the button above), or in a checkout of the course: the notebook's "
                      "first cell imports the course's `helpers`, which a downloaded notebook finds only inside a "
                      "clone of the repository (open it from `notebooks/`; {doc}`/install`)."]
        recipes = recipes_used(nb)
        if recipes:
            lines += ["", "Code it reuses from `helpers/recipes/`: " + " · ".join(
                f"[`{name}.py`]({source_url(f'helpers/recipes/{name}.py')})" for name in recipes)]
    else:
        lines += [":::{admonition} Deep dives: optional, beyond the core lesson", ":class: course-deep-dives",
                  f"These follow the core lesson of {{doc}}`{plain(lesson.title)} </{lesson.core_doc}>` in the same "
                  f"notebook: about {lesson.deep_minutes:.0f} min to read, each one skippable.", ":::"]
    if terms:
        lines += ["", f"Terms used here, defined in the {{doc}}`glossary </glossary>`: {term_links(terms)}"]
    return "\n".join(lines) + "\n"


DEEP_DIVE_HEADING = re.compile(r"^##\s+Deep dive\s+[A-Z]\s*·\s*(.+?)\s*$", re.M)


def deep_dives_title(number: str, cells: list) -> str:
    """A deep-dives page's title, saying what it holds: each deep dive's topic, up to its first colon or comma
    ("02 · Deep dives: where the time goes; a sweep over ResNet-50 layers; …")."""
    topics = []
    for cell in cells:
        if cell["cell_type"] == "markdown":
            for m in DEEP_DIVE_HEADING.finditer(cell_source(cell)):
                topic = re.split(r"[:,]\s|\?\s", m[1])[0].strip().rstrip("?.")
                first = topic.split(" ", 1)[0]
                if first[:1].isupper() and (first[1:].islower() or len(first) == 1):   # "Where", "A"; not "FP8"
                    topic = topic[0].lower() + topic[1:]
                topics.append(topic)
    return f"{number} · Deep dives: " + "; ".join(topics) if topics else f"{number} · Deep dives"


def with_header(source: str, block: str, heading: str | None = None) -> str:
    """``source`` with ``block`` right under its first heading (that heading replaced by ``heading`` if given)."""
    lines = source.split("\n")
    at = next((i for i, line in enumerate(lines) if re.match(r"^#\s", line)), None)
    if at is None:
        raise ValueError("a page that starts with no '#' heading: its first markdown cell needs one")
    if heading:
        lines[at] = f"# {heading}"
    return "\n".join(lines[:at + 1] + [block] + lines[at + 1:])


def _strip_badges(source: str) -> str:
    """A markdown cell without its Open-in-Colab badge (the header's button replaces it) and with any other
    remote image turned into its alt text, so no page asks the network for an image."""
    source = re.sub(r"\[!\[[^\]]*\]\([^)]*\)\]\(" + fork.COLAB_BADGE.pattern + r"\)\s*", "", source)
    return re.sub(r"!\[([^\]]*)\]\(https?://[^)]*\)", r"\1", source)


def staged_cells(nb, cells: list, offset: int, lesson: Lesson, values_before) -> list:
    """Copies of ``cells`` (``offset``: the index of the first in ``nb``) as the site shows them: headings
    labelled, badges out, setup cells folded, figures with alt text."""
    out = []
    for i, cell in enumerate(cells, start=offset):
        cell = copy.deepcopy(cell)
        if cell["cell_type"] == "markdown":
            cell["source"] = with_labels(_strip_badges(cell_source(cell)), lesson.sections.get(i, []))
        elif cell["cell_type"] == "code":
            tags = cell.setdefault("metadata", {}).setdefault("tags", [])
            if "setup" in tags and "hide-input" not in tags:
                tags.append("hide-input")          # the same guarded set-up in every notebook: folded
            cell["outputs"] = ordered_streams(cell.get("outputs", []))
            images = [o for o in cell["outputs"] if "image/png" in o.get("data", {})]
            if images:
                # MyST-NB takes image options per cell: the alt text the code gives, and each figure's own (the
                # alt the run stored with it, where it did) for tools.site's doctree pass; scale 100 keeps the
                # natural size (the CSS caps it at the column) and makes Sphinx link it to the full-size file
                alt = figure_alt(cell_source(cell), values_before(i), len(images))
                cell["metadata"].setdefault("mystnb", {})["image"] = {"alt": alt, "classes": "course-figure",
                                                                      "scale": "100"}
                cell["metadata"]["course_alts"] = [stored_alt(o) or alt for o in images]
        out.append(cell)
    return out


def stored_alt(output: dict) -> str | None:
    """The alt text the run stored with a figure (``output["metadata"]["image/png"]["alt"]``, written by the toolbox
    when it draws), if it did."""
    alt = output.get("metadata", {}).get("image/png", {}).get("alt")
    return " ".join(str(alt).split()) or None if alt else None


def ordered_streams(outputs: list) -> list:
    """A cell's outputs in the order the run printed them, adjacent chunks of one stream joined (MyST-NB's
    ``nb_merge_streams`` joins every chunk into the first, lifting lines printed after a figure above it);
    carriage-return progress lines keep their last state."""
    joined = []
    for output in outputs:
        output = copy.deepcopy(output)
        if output.get("output_type") == "stream":
            output["text"] = "".join(output.get("text", ""))
            last = joined[-1] if joined else None
            if last and last.get("output_type") == "stream" and last.get("name") == output.get("name"):
                last["text"] += output["text"]
                continue
        joined.append(output)
    for output in joined:
        if output.get("output_type") == "stream":
            output["text"] = re.sub(r"[^\n]*\r(?=[^\n])", "", output["text"])
    return joined


def lesson_notebooks(path: Path, terms: list[str]) -> tuple[Lesson, dict, dict | None]:
    """(the lesson, its core page's notebook, its deep-dives page's notebook or None)."""
    nb = json.loads(Path(path).read_text())
    number, stem = path.name[:2], path.stem
    book = reading_time.read(path)
    core, deep = split_core(nb)
    lesson = Lesson(number, stem, title(nb), book.core.minutes, book.deep.minutes,
                    heading_labels(nb, number), bool(deep))

    def values_before(index):
        return known_values(nb["cells"][:index + 1], stamp(nb))

    def page(cells, offset, doc, heading=None):
        text = "\n".join(cell_source(c) for c in cells)
        body = staged_cells(nb, cells, offset, lesson, values_before)
        first = body[0]
        first["source"] = with_header(first["source"], header(nb, lesson, doc, terms_in(text, terms)), heading)
        return {**nb, "cells": body}

    core_nb = page(core, 0, lesson.core_doc)
    deep_nb = page(deep, len(core), lesson.deep_doc, deep_dives_title(number, deep)) if deep else None
    return lesson, core_nb, deep_nb


def stage_lessons(stage: Path, terms: list[str]) -> list[Lesson]:
    """Write every notebook's pages and its two downloads into ``stage``."""
    import nbformat

    lessons = []
    for path in notebook_paths():
        try:
            lesson, core_nb, deep_nb = lesson_notebooks(path, terms)
        except ValueError as exc:
            raise SystemExit(f"site not built: notebooks/{path.name}: {exc}") from None
        write_if_changed(stage / f"{lesson.core_doc}.ipynb", json.dumps(core_nb, indent=1))
        if deep_nb:
            write_if_changed(stage / f"{lesson.deep_doc}.ipynb", json.dumps(deep_nb, indent=1))
        write_if_changed(stage / DOWNLOADS / "full" / path.name, path.read_text())
        handout = student.student_copy(nbformat.read(path, as_version=4))
        write_if_changed(stage / DOWNLOADS / "handout" / handout_name(path.stem), nbformat.writes(handout))
        lessons.append(lesson)
    return lessons


# ---------------------------------------------------------------- the API index
def api_names(code: str) -> list[str]:
    """The frontend names a cell's code uses, in order, once each (``tools.frontend_api.frontend_names``; IPython's
    ``%`` and ``!`` lines left out)."""
    lines = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))
    return frontend_api.frontend_names(ast.parse(lines))


@dataclass
class Use:
    lesson: Lesson
    section: Section | None


def api_uses(lessons: list[Lesson]) -> dict[str, list[Use]]:
    """``{name: [Use, ...]}`` in course order: the first is where it is taught; one Use per section."""
    uses: dict[str, list[Use]] = {}
    for lesson in lessons:
        nb = json.loads((NB_DIR / f"{lesson.stem}.ipynb").read_text())
        current = None
        for index, cell in enumerate(nb["cells"]):
            if cell["cell_type"] == "markdown":
                current = (lesson.sections.get(index) or [(0, current)])[-1][1]
                continue
            if cell["cell_type"] != "code":
                continue
            for name in api_names(cell_source(cell)):
                seen = uses.setdefault(name, [])
                if not any(u.lesson is lesson and u.section is current for u in seen):
                    seen.append(Use(lesson, current))
    return uses


def _ref(use: Use, short: bool = False) -> str:
    """A link to where ``use`` is: the section's full title, or (``short``) the notebook and the section's number."""
    doc = use.lesson.deep_doc if use.section and use.section.deep_dive else use.lesson.core_doc
    if use.section is None:
        return f"{{doc}}`{use.lesson.number} </{doc}>`"
    text = use.section.title
    if short:
        text = text.split(" · ")[0] if " · " in text and len(text.split(" · ")[0]) <= 14 else text[:24] + "…"
    if not text.startswith(use.lesson.number):
        text = f"{use.lesson.number} · {text}"
    return f"{{ref}}`{text} <{use.section.label}>`"


API_OBJECTS = "api_objects.json"      # in GENERATED: each name where it is taught, for the search index
API_OBJECT_TYPE = "cudnn-call"


def api_objects(lessons: list[Lesson]) -> list[list[str]]:
    """``[[name, docname, label], ...]``: every frontend name the notebooks use, at the section that first uses it
    (where the API index says it is taught). The extension registers them as objects, so a search for a name
    ranks that section of that lesson first."""
    found = []
    for name, (first, *_) in sorted(api_uses(lessons).items()):
        if "__" in name or first.section is None:
            continue
        doc = first.lesson.deep_doc if first.section.deep_dive else first.lesson.core_doc
        found.append([name, doc, first.section.label])
    return found


def api_page(lessons: list[Lesson], terms: list[str]) -> str:
    uses = {name: found for name, found in api_uses(lessons).items() if "__" not in name}
    module = sorted(n for n in uses if n.startswith("cudnn."))
    methods = sorted((n for n in uses if not n.startswith("cudnn.")), key=str.lower)
    lines = ["# API index", "",
             "Every cuDNN frontend call the notebooks' code makes: the `cudnn` module's names, and the methods of "
             "its graphs, plans, handles and caches. Each links to the section that first uses it (where it is "
             "taught) and, for every later notebook that uses it again, to the first section there; a term in "
             "the last column is defined in the {doc}`glossary`. Generated from the notebooks' code.", ""]
    for heading, names in (("The `cudnn` module", module), ("Methods of graphs, plans, handles and caches", methods)):
        lines += [f"## {heading}", "", ":::{container} course-api", "| name | first taught | used again | terms |",
                  "|---|---|---|---|"]
        for name in names:
            first, *again = uses[name]
            later = [u for i, u in enumerate(again) if all(v.lesson is not u.lesson for v in again[:i])]
            lines.append(f"| `{name}` | {_ref(first)} | {', '.join(_ref(u, short=True) for u in later) or '—'} | "
                         f"{term_links(terms_in(name, terms)) or ''} |")
        lines += [":::", ""]
    return "\n".join(lines)


# ---------------------------------------------------------------- the home page's tables
def clock(minutes: float) -> str:
    h, m = divmod(int(round(DAY_START[0] * 60 + DAY_START[1] + minutes)), 60)
    return f"{h:02d}:{m:02d}"


def agenda(books: list[reading_time.Notebook], lessons: list[Lesson]) -> str:
    """The workshop day: each core with its first exercise, breaks between, times from the reading estimate."""
    rows = ["| time | the core lesson, then its first exercise | minutes |", "|---|---|---:|"]
    t, half = 0.0, len(books) // 2
    for i, (book, lesson) in enumerate(zip(books, lessons), start=1):
        block = round(book.core.minutes) + EXERCISE_MIN
        rows.append(f"| {clock(t)} | {{doc}}`{plain(lesson.title)} </{lesson.core_doc}>` | {block} |")
        t += block
        if i == half:
            rows.append(f"| {clock(t)} | lunch | {LUNCH_MIN} |")
            t += LUNCH_MIN
        elif i % BREAK_AFTER == 0 and i < len(books):
            rows.append(f"| {clock(t)} | break | {BREAK_MIN} |")
            t += BREAK_MIN
    rows.append(f"| {clock(t)} | end of the day | |")
    return (f"Each block is the core's reading estimate plus {EXERCISE_MIN} minutes for its first exercise; "
            f"{BREAK_MIN}-minute breaks and a {LUNCH_MIN}-minute lunch between.\n\n" + "\n".join(rows))


def start_block(first: Lesson, colab: str) -> str:
    """The home page's three ways in: the first lesson in Colab, on this site, or on one's own machine."""
    number = first.number
    return "\n".join([":::{container} course-actions course-start",
                      f"[Start {number} in Colab]({colab})",
                      f"{{doc}}`Read {number} here </{first.core_doc}>`",
                      "{doc}`Run it locally </install>`", ":::"])


def lessons_table(lessons: list[Lesson]) -> str:
    rows = ["| lesson | core | deep dives |", "|---|---:|---:|"]
    for lesson in lessons:
        deep = f"{{doc}}`{lesson.deep_minutes:.0f} min </{lesson.deep_doc}>`" if lesson.has_deep_dives else "—"
        rows.append(f"| {{doc}}`{plain(lesson.title)} </{lesson.core_doc}>` | {lesson.core_minutes:.0f} min | {deep} |")
    return "\n".join(rows)


def handout_badges(lessons: list[Lesson]) -> str:
    """The hand-out's Colab links: each notebook's own badge URL opening the hand-out branch."""
    rows = [f"These links open the `{student.HANDOUT_BRANCH}` branch, which exists only once a maintainer has published "
            "the hand-out (below); until then Colab says it cannot find the notebook. Each lesson page also offers "
            "the hand-out as a download.", "",
            "| lesson | hand-out in Colab (no answers) |", "|---|---|"]
    for lesson in lessons:
        nb = json.loads((NB_DIR / f"{lesson.stem}.ipynb").read_text())
        url = fork.on_branch(colab_url(nb), student.HANDOUT_BRANCH)
        rows.append(f"| {plain(lesson.title)} | [open the hand-out]({url}) |")
    return "\n".join(rows)


def code_layout() -> str:
    """The code's layout, read from the tree: every package and module of helpers/, grader/ and tools/, and the test
    files, with the first sentence of its docstring."""
    lines = []
    for top in ("helpers", "grader", "tools", "tests"):
        lines += [f"## `{top}/`", ""]
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if "__pycache__" in rel:
                continue
            doc = ast.get_docstring(ast.parse(path.read_text())) or ""
            first = re.split(r"(?<=\.)\s", " ".join(doc.split()), maxsplit=1)[0] if doc else "(no docstring)"
            depth = rel.count("/") - 1
            lines.append(f"{'  ' * depth}- `{rel}`: {first}")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- results
def read_results(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


CEILING = re.compile(r"^(?P<what>.+?) % of (?P<ceiling>.+)$")   # "fused % of measured peak"
RATE_UNITS = ("TFLOP/s", "GB/s")


def _bars(ax, labels: list[str], values: list[float], colors, shown: str, base: float = 0.0) -> None:
    """Horizontal bars top to bottom from ``base`` (a ratio's bars grow from 1×, either way), each labelled at its
    end with ``shown.format(value)``."""
    ys = range(len(values))
    ax.barh(ys, [v - base for v in values], left=base, color=colors)
    ax.set_yticks(ys, labels, fontsize=8)
    for y, value in zip(ys, values):
        left = value < base   # a bar that grows leftwards is labelled on its left
        ax.annotate(shown.format(value), (value, y), xytext=(-3 if left else 3, 0), textcoords="offset points",
                    va="center", ha="right" if left else "left", fontsize=8)
    ax.set_ylim(len(values) - 0.5, -0.5)


def _saved(fig, out: Path, name: str) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(out / name, dpi=110)
    plt.close(fig)
    WRITTEN.add(Path(out / name))
    return name


def results_figures(rows: list[dict], out: Path, gpu: str) -> list[tuple[str, str, str]]:
    """Draw the results' figures into ``out``: (file name, caption, alt text) each."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = []
    shares = [(r["notebook"], m["what"], m["ceiling"], float(r["value"])) for r in rows
              if r["unit"] == "%" and (m := CEILING.match(r["metric"]))]
    if shares:
        ceilings = sorted({s[2] for s in shares})
        colors = dict(zip(ceilings, plt.get_cmap("tab10").colors))
        fig, ax = plt.subplots(figsize=(8, 0.32 * len(shares) + 1.2))
        _bars(ax, [f"{n} · {what}, {ceiling}" for n, what, ceiling, _ in shares], [s[3] for s in shares],
              [colors[s[2]] for s in shares], "{:.0f}%")
        ax.axvline(100, color="k", lw=1, ls=":")
        ax.set_xlabel("% of the ceiling named beside each bar")
        ax.set_title(f"How close each result comes to its ceiling ({gpu})")
        name = _saved(fig, out, f"{_slug(gpu)}-ceilings.png")
        alt = (f"Horizontal bars, one per recorded share of a ceiling on the {gpu}: "
               + "; ".join(f"{n} {what}, {v:.0f}% of {c}" for n, what, c, v in shares) + ".")
        figures.append((name, "Each recorded share of a ceiling (the dotted line is 100%).", alt))
    rates = [(r["notebook"], r["metric"], float(r["value"]), r["unit"]) for r in rows if r["unit"] in RATE_UNITS]
    units = [u for u in RATE_UNITS if any(r[3] == u for r in rates)]
    if units:
        heights = [sum(r[3] == u for r in rates) for u in units]
        fig, axes = plt.subplots(len(units), 1, figsize=(8, 0.3 * sum(heights) + 1.2 * len(units)), squeeze=False,
                                 gridspec_kw={"height_ratios": heights})
        for ax, unit in zip(axes[:, 0], units):
            part = [r for r in rates if r[3] == unit]
            _bars(ax, [f"{n} · {m.replace(f' {unit}', '')}" for n, m, *_ in part], [r[2] for r in part], "#76b900",
                  "{:.0f}")
            ax.set_xlim(0, max(r[2] for r in part) * 1.15)
            ax.set_xlabel(unit)
        fig.suptitle(f"Rates reached ({gpu})")
        name = _saved(fig, out, f"{_slug(gpu)}-rates.png")
        alt = (f"Horizontal bars of the recorded rates on the {gpu}, one panel per unit ({', '.join(units)}): "
               + "; ".join(f"{n} {m}, {v:.0f} {u}" for n, m, v, u in rates) + ".")
        figures.append((name, "Each recorded rate: compute (TFLOP/s) and memory traffic (GB/s).", alt))
    ratios = [(r["notebook"], r["metric"], float(r["value"]), site_results.reading(r["metric"])) for r in rows
              if r["unit"] == "x"]
    panels = [(title, [r for r in ratios if r[3] and r[3].higher_is_better is higher])
              for title, higher in (("higher is better", True), ("lower is better", False))]
    panels = [(title, part) for title, part in panels if part]
    if panels:
        values = [r[2] for r in ratios]
        fig, axes = plt.subplots(len(panels), 1, figsize=(8, 0.3 * len(ratios) + 1.3 * len(panels)), squeeze=False,
                                 gridspec_kw={"height_ratios": [len(part) for _, part in panels]})
        for ax, (title, part) in zip(axes[:, 0], panels):
            ahead = [(v >= 1) == r.higher_is_better for *_, v, r in part]
            _bars(ax, [f"{n} · {metric}" for n, metric, *_ in part], [v for _, _, v, _ in part],
                  ["#4c72b0" if a else "#c44e52" for a in ahead], "{:.3g}×", base=1.0)
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}×"))
            ax.set_xlim(min(0.25, min(values) / 3), max(values) * 3)   # room for the labels, one scale for both
            ax.axvline(1, color="k", lw=1)
            ax.set_title(f"Recorded ratios ({gpu}): {title} for the path the lesson teaches", fontsize=10)
        axes[-1, 0].set_xlabel("ratio (log scale; the line is 1×)")
        name = _saved(fig, out, f"{_slug(gpu)}-ratios.png")
        alt = (f"Horizontal bars on a log scale, one per recorded ratio on the {gpu}, with a line at 1×, in two "
               "panels: " + "; ".join(f"{title}: " + ", ".join(f"{n} {m} {v:.3g}×" for n, m, v, _ in part)
                                       for title, part in panels) + ".")
        caption = ("Every recorded ratio, in two panels: in the first a longer bar to the right means the path the "
                   "lesson teaches is faster, in the second a shorter one does. Blue: the taught path is ahead of its "
                   "rival; red: behind. Each lesson's table below names the rival and the bar.")
        figures.append((name, caption, alt))
    return figures


def results_page(lessons: list[Lesson], stage: Path, results_dir: Path = RESULTS) -> str:
    """The Results page: per GPU its figures, then per lesson its comparisons and its other numbers, rounded to
    three significant digits (``tools.site_results``), and the CSV they come from."""
    by_number = {lesson.number: lesson for lesson in lessons}
    lines = ["# Results", "",
             "The headline numbers each notebook recorded (`H.record`) in its stored GPU run, summarised: per "
             "lesson, each comparison with the rival it is measured against and the bar the notebook set (met or "
             "not, as the run printed it), then the lesson's other numbers. Values are rounded to three "
             "significant digits; the CSV under each GPU has them as recorded. Select a figure to open it full "
             "size.", ""]
    plots = stage / GENERATED / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    for path in sorted(Path(results_dir).glob("*.csv")):
        rows = read_results(path)
        if not rows:
            continue
        gpu = rows[0]["gpu"]
        write_if_changed(stage / DOWNLOADS / "results" / path.name, path.read_text())
        lines += [f"## {gpu}", "",
                  f"{len(rows)} numbers, from {{download}}`results/{path.name} <{DOWNLOADS}/results/{path.name}>` "
                  "(the raw CSV).", ""]
        for name, caption, alt in results_figures(rows, plots, gpu):
            lines += [f"```{{figure}} {GENERATED}/plots/{name}", f":alt: {alt}", ":class: course-figure",
                      ":scale: 100", "", caption, "```", ""]
        for number in sorted({r["notebook"] for r in rows}):
            part = [r for r in rows if r["notebook"] == number]
            lesson = by_number.get(number)
            link = f"{{doc}}`the lesson </{lesson.core_doc}>`" if lesson else f"notebook {number}"
            runs = sorted({(r["torch"], site_results.cudnn_version(r["cudnn_backend"]), r["recorded_at"][:10])
                           for r in part})
            lines += [f"### {plain(lesson.title) if lesson else number}", "",
                      f"Read it in {link}. Run: " + "; ".join(f"torch {t}, cuDNN {b}, on {d}" for t, b, d in runs)
                      + ".", ""]
            lines += site_results.topic_tables(part, site_results.printed_verdicts(number))
    return "\n".join(lines)


# ---------------------------------------------------------------- staging and building
def stage(out: Path = STAGE) -> list[Lesson]:
    """Copy ``site/`` into ``out`` and write every generated page beside it."""
    out = Path(out)
    WRITTEN.clear()
    for path in sorted(SOURCES.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            write_if_changed(out / path.relative_to(SOURCES), path.read_bytes())
    terms = glossary_terms()
    lessons = stage_lessons(out, terms)
    books = [reading_time.read(NB_DIR / f"{lesson.stem}.ipynb") for lesson in lessons]
    generated = {
        "agenda.md": agenda(books, lessons),
        "lessons.md": lessons_table(lessons),
        "reading_time.md": reading_time.table(books),
        "gpu_matrix.md": gpu_matrix.table(),
        "handout_badges.md": handout_badges(lessons),
        "layout.md": code_layout(),
        "contributing.md": (ROOT / "CONTRIBUTING.md").read_text(),
    }
    for name, text in generated.items():
        write_if_changed(out / GENERATED / name, text + "\n")
    write_if_changed(out / "api.md", api_page(lessons, terms))
    write_if_changed(out / GENERATED / API_OBJECTS, json.dumps(api_objects(lessons), indent=0))
    write_if_changed(out / "results.md", results_page(lessons, out))
    lesson_one = lessons[0]
    nb_one = json.loads((NB_DIR / f"{lesson_one.stem}.ipynb").read_text())
    write_if_changed(out / GENERATED / "start.md", start_block(lesson_one, colab_url(nb_one)) + "\n")
    for folder in (LESSONS, DOWNLOADS, GENERATED):   # a renamed notebook or a section gone leaves no stale page
        for path in (out / folder).rglob("*"):
            if path.is_file() and path not in WRITTEN:
                path.unlink()
    return lessons


def build(html_dir: Path = HTML, stage_dir: Path = STAGE, doctrees: Path = DOCTREES, quiet: bool = True) -> int:
    """Stage the sources and run Sphinx (warnings are errors: a broken link or a missing figure fails the
    build); returns Sphinx's exit status."""
    from sphinx.cmd.build import build_main

    stage(stage_dir)
    args = ["-b", "html", "-W", "--keep-going", "-d", str(doctrees), str(stage_dir), str(html_dir)]
    status = build_main((["-q"] if quiet else []) + args)
    if status:
        return status
    # the printable course: every page as one, from the same doctrees (nothing is read twice)
    args = ["-b", "singlehtml", "-W", "--keep-going", "-d", str(doctrees), str(stage_dir),
            str(Path(html_dir) / PRINT)]
    status = build_main((["-q"] if quiet else []) + args)
    if not status:
        one = Path(html_dir) / PRINT
        # the theme's page asks for a search index the singlehtml builder does not write: an empty one
        (one / "searchindex.js").write_text(EMPTY_SEARCH_INDEX)
        # the theme's outlines link a section as "#document-<page>#<label>", which no browser resolves; the labels
        # are unique in the site (nbNN-...), so "#<label>" is the section
        page = one / "index.html"
        text = re.sub(r'href="#document-[^"#]+#([^"]+)"', r'href="#\1"', page.read_text())
        page.write_text(text.replace('href="#document-index"', 'href="#"'))   # the root page has no such id
    return status


EMPTY_SEARCH_INDEX = ('Search.setIndex({"alltitles": {}, "docnames": [], "envversion": {}, "filenames": [], '
                      '"indexentries": {}, "objects": {}, "objnames": {}, "objtypes": {}, "terms": {}, "titles": [], '
                      '"titleterms": {}})\n')


def site_url() -> str:
    """Where the website is published: the repository's GitHub Pages address (``.github/workflows/site.yml``)."""
    return fork.pages_url(fork.repository())


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file()) / 1e6


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=HTML, help="where the HTML goes (default build/site/html)")
    parser.add_argument("--verbose", action="store_true", help="Sphinx's own progress lines")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    status = build(args.out, quiet=not args.verbose)
    if status:
        print(f"site build failed (Sphinx exit status {status}); the messages above say where")
        return status
    where = args.out.resolve()
    shown = where.relative_to(Path.cwd()) if where.is_relative_to(Path.cwd()) else where
    print(f"site built in {time.perf_counter() - started:.0f} s: {shown}/index.html ({size_mb(where):.0f} MB)")
    print(f"preview it: python3 -m http.server -d {shown} 8000, then open http://localhost:8000/")
    return 0


# ---------------------------------------------------------------- the Sphinx extension: math without MathJax
def tex_svg(tex: str) -> str:
    """``tex`` drawn by matplotlib's mathtext as an inline SVG (the sizing commands it lacks, ``\\big`` and kin,
    dropped)."""
    from matplotlib import mathtext

    tex = re.sub(r"\\[bB]igg?[lr]?(?![A-Za-z])", "", tex.strip())
    buffer = io.BytesIO()
    mathtext.math_to_image(f"${tex}$", buffer, format="svg", dpi=100)
    svg = buffer.getvalue().decode()
    return svg[svg.index("<svg"):]


def _math_html(self, node, display: bool) -> None:
    from docutils import nodes

    tex = node.astext()
    tag = "div" if display else "span"
    self.body.append(f'<{tag} class="course-math" role="img" aria-label="{html.escape(tex)}">'
                     f"{tex_svg(tex)}</{tag}>")
    raise nodes.SkipNode


def page_source(pagename: str) -> str | None:
    """The course file a page is made from: a lesson's notebook, a hand-written page, or this generator."""
    if pagename.startswith(f"{LESSONS}/"):
        return f"notebooks/{pagename.rsplit('/', 1)[-1]}.ipynb"
    if (SOURCES / f"{pagename}.md").is_file():
        return f"site/{pagename}.md"
    if pagename in ("api", "results"):
        return "tools/site.py"
    return None


def _source_links(app, pagename, templatename, context, doctree) -> None:
    """Under every page: where its source is, and a new issue about it."""
    source = page_source(pagename)
    if not source or doctree is None or "body" not in context:
        return
    import urllib.parse

    title = re.sub(r"<[^>]+>", "", context.get("title", pagename))
    issue = f"{repository_url()}/issues/new?title=" + urllib.parse.quote(f"Site, {html.unescape(title)}: ")
    context["body"] += (f'<p class="course-source"><a href="{source_url(source)}">View the source of this page '
                        f'({html.escape(source)})</a> · <a href="{issue}">Open an issue about it</a></p>')


def _register_api_objects(app, env) -> None:
    """The frontend names as objects of the search index, each at the section that teaches it (``api_objects``)."""
    path = Path(app.srcdir) / GENERATED / API_OBJECTS
    std = env.get_domain("std")
    for key in [k for k in std.objects if k[0] == API_OBJECT_TYPE]:
        del std.objects[key]
    if path.is_file():
        for name, doc, label in json.loads(path.read_text()):
            if doc in env.all_docs:
                std.objects[API_OBJECT_TYPE, name] = (doc, label)


def _figure_alts(app, doctree) -> None:
    """Each figure of a cell gets its own alt text (``course_alts``, staged by ``staged_cells``)."""
    from docutils import nodes

    for cell in doctree.findall(nodes.container):
        alts = cell.get("nb_element") == "cell_code" and (cell.get("cell_metadata") or {}).get("course_alts")
        images = list(cell.findall(nodes.image)) if alts else []
        if alts and len(images) == len(alts):
            for image, alt in zip(images, alts):
                image["alt"] = alt


def setup(app):
    app.add_html_math_renderer("mathtext", (lambda self, node: _math_html(self, node, False), None),
                               (lambda self, node: _math_html(self, node, True), None))
    app.add_crossref_type(API_OBJECT_TYPE, API_OBJECT_TYPE, objname="cuDNN frontend call")
    app.connect("env-updated", _register_api_objects)
    app.connect("doctree-read", _figure_alts)
    app.connect("html-page-context", _source_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    sys.exit(main())
