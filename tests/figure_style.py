"""What a finished figure breaks of the course's plotting style (``helpers/plotting.py``), for the tests.

``style_problems(fig)`` lists, one line each: a legend over data, a log axis labelled in powers or whose data
falls between its labelled ticks, two series the legend cannot tell apart, unexplained hatching, overlapping
tick labels, lines no legend names, bars on a log axis without their ratio.
"""
from __future__ import annotations

import math
import re

import numpy as np
from matplotlib.colors import to_hex
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from helpers.plotting import labels_overlap, plain_number

RATIO = re.compile(r"\d(?:\.\d+)?\s*[x×]", re.IGNORECASE)


def _name(ax) -> str:
    return repr(ax.get_title() or ax.get_ylabel() or f"axes {ax.figure.axes.index(ax)}")


def data_lines(ax):
    """The axes' lines drawn in data coordinates (not axhline/axvline), with at least one point."""
    return [line for line in ax.get_lines() if line.get_transform() == ax.transData and line.get_visible()
            and len(line.get_xdata())]


def _display_points(line, samples: int = 40):
    """Points along a line in display coordinates: its vertices and ``samples`` points on each segment."""
    xy = line.get_transform().transform(np.column_stack([np.asarray(line.get_xdata(), float),
                                                         np.asarray(line.get_ydata(), float)]))
    points = [xy]
    if line.get_linestyle() not in ("None", "", " "):
        for a, b in zip(xy[:-1], xy[1:]):
            if np.isfinite(a).all() and np.isfinite(b).all():
                t = np.linspace(0, 1, samples)[:, None]
                points.append(a + t * (b - a))
    pts = np.vstack(points)
    return pts[np.isfinite(pts).all(axis=1)]


def _legend_problems(fig, renderer) -> list[str]:
    problems = []
    legends = [(ax.get_legend(), _name(ax)) for ax in fig.axes if ax.get_legend() is not None]
    legends += [(legend, "the figure") for legend in fig.legends]
    for legend, owner in legends:
        box = legend.get_window_extent(renderer).expanded(1.0, 1.0)
        for ax in fig.axes:
            for line in ax.get_lines():
                if not line.get_visible():
                    continue
                pts = _display_points(line)
                inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1))
                if inside.any():
                    what = line.get_label() if not line.get_label().startswith("_") else "a reference line"
                    problems.append(f"the legend of {owner} covers {what!r} on {_name(ax)}")
            bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_visible() and p.get_height()]
            if any(box.overlaps(p.get_window_extent(renderer)) for p in bars):
                problems.append(f"the legend of {owner} covers bars on {_name(ax)}")
    return problems


def _legend_key(handle):
    if isinstance(handle, Line2D):
        return ("line", to_hex(handle.get_color()), handle.get_linestyle(), handle.get_marker())
    if isinstance(handle, Patch):
        return ("patch", to_hex(handle.get_facecolor()), handle.get_hatch())
    return None


def _series_problems(fig) -> list[str]:
    problems = []
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    named = {t.get_text() for legend in legends for t in legend.get_texts()}
    for legend in legends:
        seen = {}
        for handle, text in zip(legend.legend_handles, legend.get_texts()):
            key = _legend_key(handle)
            if key is not None and key in seen and seen[key] != text.get_text():
                problems.append(f"{seen[key]!r} and {text.get_text()!r} are drawn alike: the legend cannot tell "
                                "them apart")
            seen.setdefault(key, text.get_text())
    hatch_explained = any(getattr(h, "get_hatch", lambda: None)() for legend in legends for h in legend.legend_handles)
    for ax in fig.axes:
        if not hatch_explained and any(p.get_hatch() for p in ax.patches):
            problems.append(f"hatched bars on {_name(ax)} and no legend entry says what the hatch means")
        lines = data_lines(ax)
        unnamed = [line for line in lines if line.get_label() not in named]
        if len(lines) > 1 and unnamed:
            problems.append(f"{len(unnamed)} line(s) on {_name(ax)} that no legend names")
    return problems


def _labelled_ticks(target, lo: float, hi: float) -> list[tuple[float, str]]:
    """(position, label) of the axis's major and minor ticks in view whose label is not empty."""
    pairs = []
    for locs, formatter in ((target.get_majorticklocs(), target.get_major_formatter()),
                            (target.get_minorticklocs(), target.get_minor_formatter())):
        locs = [v for v in locs if lo <= v <= hi]
        pairs += [(v, t) for v, t in zip(locs, formatter.format_ticks(locs)) if t]
    return pairs


def _axis_problems(fig, renderer) -> list[str]:
    problems = []
    for ax in fig.axes:
        for axis in ("x", "y"):
            target = ax.xaxis if axis == "x" else ax.yaxis
            if target.get_scale() != "log":
                continue
            if "log" not in target.get_label_text().lower():
                problems.append(f"log {axis} axis of {_name(ax)} does not say it is log: H.mark_log_axes(fig)")
            lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
            labelled = _labelled_ticks(target, lo, hi)
            powers = [t for _, t in labelled if "^" in t or "times" in t]
            if powers:
                problems.append(f"log {axis} axis of {_name(ax)} labelled in powers ({powers[0]!r}): use plain numbers")
            if axis == "x":
                data = {float(v) for line in data_lines(ax) for v in np.asarray(line.get_xdata(), float)
                        if np.isfinite(v) and v > 0}
                between = sorted(v for v in data if not any(t > 0 and abs(math.log(v / t)) < 0.01
                                                            for t, _ in labelled))
                if between:
                    problems.append(f"log x axis of {_name(ax)}: data at {plain_number(between[0])} falls between "
                                    "its labelled ticks")
            legend = ax.get_legend()
            texts_all = [t.get_text() for t in ax.texts] + [ax.get_title()] + [
                t.get_text() for t in (legend.get_texts() if legend is not None else [])]
            bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_height()]
            if axis == "y" and bars and not any(RATIO.search(t) for t in texts_all if t):
                problems.append(f"bars on the log y axis of {_name(ax)} without their ratios: bar lengths on a log "
                                "axis do not read as ratios (annotate them, or use a linear axis)")
        if labels_overlap(ax.get_xticklabels(), renderer):
            problems.append(f"x tick labels of {_name(ax)} overlap")
    return problems


def style_problems(fig) -> list[str]:
    """What in a finished figure breaks the course's style, one line each; empty when it reads right."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return _legend_problems(fig, renderer) + _series_problems(fig) + _axis_problems(fig, renderer)
