"""One plotting style for every notebook.

The style, which every helper here applies by default:

- **colour by role**: a path's colour comes from its role (``COLORS``), named explicitly (``role=``, or a role
  name as a value of ``colors=``) or read from how its label *begins* ("torch eager (cudnn.benchmark)" is a
  torch path, whatever it mentions later);
- **legends outside the data**: right of the axes (``legend_outside``), or one legend right of the figure for
  panels that share their series (``shared_legend``);
- **log axes ticked at the data** with plain numbers (``ticks_at_data``, ``plain_log_ticks``), not 2ⁿ or 4×10¹;
- a point that was not measured **breaks its line** (NaN), instead of a straight segment drawn across it;
- a hatch always has a legend entry that says what it means.

The tests hold every figure these helpers draw to those rules (``tests/figure_style.py``).
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter, NullLocator

# One colour per role, the same in every notebook.
COLORS = {
    "cudnn": "#76b900",       # NVIDIA green: the cuDNN graph
    "torch eager": "#4c72b0",
    "torch.compile": "#dd8452",
    "other": "#8c8c8c",
    "best": "#2ca02c",
    "worst": "#d62728",
    "heuristic": "#9467bd",
}

# How a label begins -> its role; the longest matching beginning wins ("torch.compile" before "torch").
ROLE_PREFIXES = {
    "cudnn": "cudnn",
    "torch.compile": "torch.compile",
    "torch": "torch eager",
    "pytorch": "torch eager",
    "f.sdpa": "torch eager",
}

LEGEND_OUTSIDE = dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
HATCH = "//"


def role_of(label: str) -> str:
    """The role of a path label: a role's own name (any case), else the role of the longest ``ROLE_PREFIXES``
    entry the label starts with, else ``"other"``. A label's first word names who runs it: "torch eager
    (cudnn.benchmark)" is torch's, "cuDNN + torch amax" cuDNN's, "Python op, no cuDNN" neither."""
    low = str(label).strip().lower()
    if low in COLORS:
        return low
    matches = [prefix for prefix in ROLE_PREFIXES if low.startswith(prefix)]
    return ROLE_PREFIXES[max(matches, key=len)] if matches else "other"


def _colour_of(colour: str) -> str:
    """A role name -> its colour; anything else is taken as a matplotlib colour."""
    return COLORS.get(colour, colour)


def color_for(label: str, colors: dict | None = None, *, role: str | None = None) -> str:
    """The colour of a path: its explicit ``role`` if given, else ``colors[label]`` (a role name or a colour),
    else the role ``role_of(label)`` reads from how the label begins."""
    if role is not None:
        if role not in COLORS:
            raise KeyError(f"no role {role!r}; the roles are {list(COLORS)}")
        return COLORS[role]
    if colors and label in colors:
        return _colour_of(colors[label])
    return COLORS[role_of(label)]


def use_style() -> None:
    plt.rcParams.update({
        "figure.figsize": (8, 4.2), "figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False, "axes.titleweight": "bold",
        "legend.frameon": False, "font.size": 10,
    })


def plain_number(value: float) -> str:
    """A tick label without powers: 16, 2048, 0.5, 1.5e+06."""
    if value and abs(value - round(value)) < 1e-9 * max(1.0, abs(value)) and abs(value) < 1e6:
        return str(int(round(value)))
    return f"{value:.3g}"


def ticks_at_data(ax, values) -> None:
    """Major x ticks exactly at the data values, labelled in plain numbers, and no minor ticks."""
    values = sorted({float(v) for v in values if v is not None and math.isfinite(float(v))})
    ax.set_xticks(values, [plain_number(v) for v in values])
    ax.xaxis.set_minor_locator(NullLocator())


def plain_log_ticks(ax) -> None:
    """A log y axis labelled in plain numbers at 1, 2, 5 × 10ⁿ, minor ticks unlabelled."""
    target = ax.yaxis
    target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    target.set_major_formatter(FuncFormatter(lambda v, _: plain_number(v)))
    target.set_minor_formatter(NullFormatter())


def mark_log_axes(target) -> None:
    """Say so on every log axis of a figure or an axes: ' (log scale)' after its label, once."""
    axes = target.axes if hasattr(target, "savefig") else [target]
    for ax in axes:
        for axis in (ax.xaxis, ax.yaxis):
            label = axis.get_label_text()
            if axis.get_scale() == "log" and "log" not in label.lower():
                axis.set_label_text(f"{label} (log scale)" if label else "log scale")


def legend_outside(ax, handles=None, **kwargs):
    """The axes' legend, right of its data (``LEGEND_OUTSIDE``); ``handles`` adds entries such as a hatch's."""
    found, labels = ax.get_legend_handles_labels()
    extra = list(handles or [])
    return ax.legend(found + extra, labels + [h.get_label() for h in extra],
                     **{**LEGEND_OUTSIDE, "fontsize": 8, **kwargs})


def shared_legend(fig, axes=None, handles=None, **kwargs):
    """One legend right of the figure for panels that share their series: each label once, the panels' own
    legends removed. Call it after ``tight_layout``; the inline backend's tight bounding box keeps it in view."""
    by_label = {}
    for ax in axes if axes is not None else fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            by_label.setdefault(label, handle)
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    for handle in handles or []:
        by_label.setdefault(handle.get_label(), handle)
    return fig.legend(list(by_label.values()), list(by_label), **{"loc": "upper left", "bbox_to_anchor": (1.0, 0.95),
                                                                   "fontsize": 8, **kwargs})


def hatch_handle(label: str) -> Patch:
    """The legend entry that says what a hatch means."""
    return Patch(facecolor="white", edgecolor="k", hatch=HATCH, label=label)


def fit_tick_labels(ax, rotations=(25, 45, 90)) -> None:
    """Rotate the x tick labels (anchored at their right end) by the first of ``rotations`` at which no two
    overlap, when they overlap level."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for rotation in rotations:
        if not labels_overlap(ax.get_xticklabels(), renderer):
            return
        plt.setp(ax.get_xticklabels(), rotation=rotation, ha="right", rotation_mode="anchor")


def labels_overlap(texts, renderer) -> bool:
    """Whether any two neighbouring tick labels overlap (rotated ones: whether their baselines are closer
    than a line of text)."""
    texts = [t for t in texts if t.get_visible() and t.get_text()]
    angle = max((abs(t.get_rotation()) % 180 for t in texts), default=0)
    if angle:
        anchors = sorted(t.get_transform().transform(t.get_position())[0] for t in texts)
        height = max(t.get_fontsize() for t in texts) * renderer.points_to_pixels(1.0)
        return any((b - a) * math.sin(math.radians(angle)) < 0.95 * height for a, b in zip(anchors, anchors[1:]))
    boxes = sorted((t.get_window_extent(renderer) for t in texts), key=lambda b: b.x0)
    return any(a.x1 > b.x0 + 1 and a.y1 > b.y0 and b.y1 > a.y0 for a, b in zip(boxes, boxes[1:]))


def bar_compare(labels, values, *, ylabel: str, title: str, peak: float | None = None,
                peak_label: str = "peak", fmt: str = "{:.1f}", ax=None, colors: dict | None = None,
                hatched=(), hatch_label: str | None = None):
    """Bars with value labels and an optional horizontal 'peak' line, coloured by role (``colors``: label ->
    role name or colour). ``hatched``: labels or positions of bars to hatch, ``hatch_label`` what that means
    (it gets a legend entry). Tick labels that would overlap are rotated."""
    use_style()
    if ax is None:
        _, ax = plt.subplots()
    labels, values = [str(label) for label in labels], list(values)
    if hatched and not hatch_label:
        raise ValueError("hatched bars need a hatch_label: the legend must say what the hatch means")
    bars = ax.bar(labels, values, color=[color_for(label, colors) for label in labels])
    for i, (bar, label, value) in enumerate(zip(bars, labels, values)):
        ax.annotate(fmt.format(value), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=9)
        if i in hatched or label in hatched:
            bar.set_hatch(HATCH)
    _peak_line(ax, peak, peak_label, fmt)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if hatched:
        legend_outside(ax, handles=[hatch_handle(hatch_label)])
    fit_tick_labels(ax)
    mark_log_axes(ax)
    return ax


# Lines that are not the course's own take these markers in turn, so a rival drawn on top of the cuDNN line
# (torch's cuDNN backend runs the same kernel) still shows both.
RIVAL_MARKERS = ("s", "^", "D", "v", "P", "X")


def line_style(label: str, index: int, colors: dict | None = None) -> dict:
    """The course's own line thick, solid, round markers and on top; each rival thinner, dashed, with its own
    marker, so lines that coincide stay distinguishable. The course's own: role 'cudnn', read from
    ``colors[label]`` when given (a role name or a colour; the course's colour counts), else from the label."""
    role = colors[label] if colors and label in colors else role_of(label)
    if role == "cudnn" or _colour_of(role) == COLORS["cudnn"]:
        return dict(marker="o", linewidth=2.6, markersize=7, zorder=4)
    return dict(marker=RIVAL_MARKERS[index % len(RIVAL_MARKERS)], linewidth=1.4, markersize=6, linestyle="--",
                markerfacecolor="none", zorder=3)


def _lines_on_grid(ax, table, xs, colors, logx: bool, logy: bool, legend: bool):
    """One line per column of ``table`` (index = x) over every x in ``xs``: a missing point is NaN and breaks
    its line; log axes ticked at the data (x) and in plain numbers (y)."""
    for i, label in enumerate(table.columns):
        part = table[label].reindex(xs)
        ax.plot(xs, part.astype(float).values, label=str(label), color=color_for(str(label), colors),
                **line_style(str(label), i, colors))
    if logx:
        ax.set_xscale("log")
        ticks_at_data(ax, xs)
    if logy:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    if legend:
        legend_outside(ax)


def line_compare(df, *, x: str, y: str, hue: str, ylabel: str, title: str, logx: bool = False,
                 logy: bool = False, peak: float | None = None, ax=None, colors: dict | None = None,
                 legend: bool = True):
    """One line per ``hue`` group of a long-format DataFrame, in role colours (``colors``: label -> role name
    or colour); an x where a group has no value breaks that group's line; the legend sits right of the axes."""
    use_style()
    if ax is None:
        _, ax = plt.subplots()
    xs = sorted(df[x].unique())
    values = df.assign(**{y: pd.to_numeric(df[y], errors="coerce")})
    table = values.pivot_table(index=x, columns=hue, values=y, aggfunc="mean", sort=False, dropna=False)
    table = table[[c for c in dict.fromkeys(df[hue]) if c in table.columns]]
    _lines_on_grid(ax, table, xs, colors, logx, logy, legend)
    _peak_line(ax, peak, "peak", "{:.0f}")
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    mark_log_axes(ax)
    return ax


def _peak_line(ax, peak: float | None, label: str, fmt: str) -> None:
    """A dashed horizontal ceiling, labelled at the left edge."""
    if not peak:
        return
    ax.axhline(peak, ls="--", color="k", lw=1)
    ax.annotate(f"{label} {fmt.format(peak)}", (0.0, peak), xycoords=("axes fraction", "data"), xytext=(2, 3),
                textcoords="offset points", fontsize=8)


def plot_sweep(df, *, x: str, y: str = "TFLOP/s", kind: str = "line", ax=None, title: str | None = None,
               ylabel: str | None = None, logx: bool = False, logy: bool = False, peak: float | None = None,
               peak_label: str = "measured matmul peak", colors: dict | None = None, order: list | None = None,
               legend: bool = True):
    """Draw a ``perf_sweep`` table: one line (``kind="line"``) or one bar per point (``kind="bar"``,
    grouped along a categorical ``x``) for each path, coloured by role; rows whose status is not ok
    are left out, and a line breaks where its path did not run. ``colors`` maps a path label to a role name
    or a colour. The legend sits right of the axes (``legend=False``: none, for ``shared_legend``)."""
    if kind not in ("line", "bar"):
        raise ValueError(f"kind must be 'line' or 'bar', got {kind!r}")
    missing = [c for c in (x, y, "path") if c not in df.columns]
    if missing:
        raise KeyError(f"the table has no column(s) {missing}; it has {list(df.columns)}")
    use_style()
    if ax is None:
        _, ax = plt.subplots(figsize=(9, 4.2))
    ok = df[df["status"].isin(["ok", "cut off"])] if "status" in df.columns else df
    labels = order or list(dict.fromkeys(df["path"]))
    xs = list(dict.fromkeys(df[x]))
    if kind == "line":
        xs = sorted(xs)
        values = ok.assign(**{y: pd.to_numeric(ok[y], errors="coerce")})
        table = values.pivot_table(index=x, columns="path", values=y, aggfunc="mean", sort=False)
        table = table.reindex(columns=[label for label in labels if label in table.columns])
        _lines_on_grid(ax, table, xs, colors, logx, logy, legend=False)
        if not logx:
            ax.set_xticks(xs, [str(v) for v in xs])
    else:
        width = 0.8 / max(len(labels), 1)
        for i, label in enumerate(labels):
            part = ok[ok["path"] == label].set_index(x)
            positions = [j + (i - (len(labels) - 1) / 2) * width for j, v in enumerate(xs) if v in part.index]
            values = [part.loc[v, y] for v in xs if v in part.index]
            ax.bar(positions, values, width, label=label, color=color_for(label, colors))
        ax.set_xticks(range(len(xs)), [str(v) for v in xs])
        if logy:
            ax.set_yscale("log")
            plain_log_ticks(ax)
    _peak_line(ax, peak, peak_label, "{:.0f}")
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    if legend:
        legend_outside(ax)
    mark_log_axes(ax)
    return ax
