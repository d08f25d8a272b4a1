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
import re

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


# ---------------------------------------------------------------- figures that read on the course's website
# The website shows a figure at most ``SITE_WIDTH_PX`` wide (a phone narrower still): panels are stacked, one
# under the other, on a page-wide figure whose text stays ``MIN_TEXT_PX`` or more at that width.
SITE_WIDTH_PX = 700
MIN_TEXT_PX = 9
MAX_WIDTH_PX = 1400
MIN_ASPECT = 0.45          # height / width of the whole image
PANEL_IN = (7.0, 3.6)      # one panel's width and height, inches
FIGURE_DPI = 150           # 7 in -> 1,050 px
TEXT_PT, SMALL_PT = 11, 10   # titles and axis labels; ticks, legends and values on bars
LEGEND_BELOW = dict(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=3, borderaxespad=0.0)


def figure(panels: int = 1):
    """``(fig, ax)``, or ``(fig, axes)`` for ``panels > 1``: panels stacked top to bottom on a 7-inch-wide figure
    (1,050 px) in the course's style, so each reads at the website's 700 px and on a phone. When the notebook shows
    it, the figure is finished (every log axis labelled so) and its alt text written from its own titles and data
    (``alt_text``)."""
    if panels < 1:
        raise ValueError(f"panels must be 1 or more, got {panels}")
    use_style()
    fig, axes = plt.subplots(panels, 1, figsize=(PANEL_IN[0], PANEL_IN[1] * panels), dpi=FIGURE_DPI,
                             layout="constrained", squeeze=False)
    for ax in axes[:, 0]:
        for text in (ax.title, ax.xaxis.label, ax.yaxis.label):
            text.set_fontsize(TEXT_PT)
        ax.tick_params(labelsize=SMALL_PT)
    fig._repr_mimebundle_ = lambda include=None, exclude=None: _shown(fig)
    return (fig, axes[0, 0]) if panels == 1 else (fig, list(axes[:, 0]))


def _shown(fig) -> tuple[dict, dict]:
    """IPython's hook as a figure is displayed: no data of its own (the inline backend draws the PNG), the alt
    text as the PNG's metadata, which the notebook stores and the website reads."""
    mark_log_axes(fig)
    return {}, {"image/png": {"alt": alt_text(fig)}}


def legend_below(ax):
    """The axes' legend under its x label, off the data, in up to three columns (a stacked figure's panels keep
    their width for the data)."""
    handles, labels = ax.get_legend_handles_labels()
    return ax.legend(handles, labels, **{**LEGEND_BELOW, "ncol": min(3, max(1, len(labels))), "fontsize": SMALL_PT})


def value_label(value: float) -> str:
    """A bar's label: 3 significant digits, no powers of ten ("0.151", "12.3", "658", "12,345"); "did not run"
    for NaN."""
    if not math.isfinite(value):
        return "did not run"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def plot_bars(ax, labels, values, *, ylabel: str, title: str, logy: bool = False) -> None:
    """One bar per path on ``ax`` (a panel of ``H.figure``), coloured by its role (the label's first word:
    "cuDNN …", "torch.compile …"), its value written on it; a path that did not run (NaN) says so where its bar
    would be; ``logy`` for values across decades, ticked in plain numbers, each bar's ratio to the smallest written
    on it; overlapping labels are rotated."""
    labels, values = [str(label) for label in labels], [float(v) for v in values]
    bars = ax.bar(labels, [v if math.isfinite(v) else 0.0 for v in values],
                  color=[color_for(label) for label in labels])
    if logy:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    ran = [v for v in values if math.isfinite(v) and v > 0]
    for bar, value in zip(bars, values):
        at = bar.get_height() if math.isfinite(value) else ax.get_ylim()[0]
        text = value_label(value)
        if logy and ran and math.isfinite(value):   # on a log axis a bar's length is no ratio: write it
            text += f" ({value_label(value / min(ran))}×)"
        ax.annotate(text, (bar.get_x() + bar.get_width() / 2, at), ha="center", va="bottom",
                    fontsize=SMALL_PT)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fit_tick_labels(ax)
    mark_log_axes(ax)


def plot_lines(ax, df, *, x: str, y: str, hue: str, ylabel: str, title: str, logx: bool = False,
               logy: bool = False) -> None:
    """One line per ``hue`` group of a long table on ``ax`` (a panel of ``H.figure``): the course's own line
    thick and solid, each rival dashed with its own marker; a point that did not run (NaN, or absent) breaks its
    line; log axes ticked at the data and labelled so; the legend under the panel."""
    xs = sorted(df[x].unique())
    values = df.assign(**{y: pd.to_numeric(df[y], errors="coerce")})
    table = values.pivot_table(index=x, columns=hue, values=y, aggfunc="mean", sort=False, dropna=False)
    table = table[[c for c in dict.fromkeys(df[hue]) if c in table.columns]]
    _lines_on_grid(ax, table, xs, None, logx, logy, legend=False)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    legend_below(ax)
    mark_log_axes(ax)


# ---------------------------------------------------------------- alt text, from the figure itself
# Which way is better, read from the value axis's label: a rate ("TFLOP/s", "steps/s", "% of peak") or a speedup
# is higher-is-better, a time lower-is-better; "(lower is better)" / "(higher is better)" in the label decides.
SAYS_LOWER = re.compile(r"lower is better", re.IGNORECASE)
SAYS_HIGHER = re.compile(r"higher is better", re.IGNORECASE)
HIGHER_IS_BETTER = re.compile(r"/\s*s\b|%|percent|speed-?up|×|\bx faster|throughput|per second", re.IGNORECASE)
LOWER_IS_BETTER = re.compile(r"\b(ms|µs|us|ns|time|latency|seconds|minutes)\b|\(s\)", re.IGNORECASE)


def better(label: str) -> str | None:
    """``"lower"`` for a time ("ms", "µs per call"), ``"higher"`` for a rate, a share of a peak or a speedup,
    None where the axis label does not say."""
    for says, direction in ((SAYS_LOWER, "lower"), (SAYS_HIGHER, "higher"), (HIGHER_IS_BETTER, "higher"),
                            (LOWER_IS_BETTER, "lower")):
        if says.search(label):
            return direction
    return None


def _bars_of(ax) -> list[tuple[str, float]]:
    """``(label, value)`` of each bar, NaN for one that did not run (its label says so): a bar series' own
    label where it has one (grouped bars), else its tick."""
    found = []
    ticks = {round(t.get_position()[0], 6): t.get_text() for t in ax.get_xticklabels() if t.get_text()}
    shown = {round(t.xy[0], 6): t.get_text().split(" (")[0] for t in ax.texts if hasattr(t, "xy")}
    for container in ax.containers:
        series = container.get_label()
        for patch in container.patches:
            centre = round(patch.get_x() + patch.get_width() / 2, 6)
            tick = ticks.get(centre, "")
            name = tick if series.startswith("_") else (f"{series} at {tick}" if tick else series)
            ran = shown.get(centre) != "did not run"
            found.append((name or "a bar", float(patch.get_height()) if ran else float("nan")))
    return found


def _lines_of(ax) -> tuple[float, list[tuple[str, float]]]:
    """The largest x any named line reaches, and each named line's value there (NaN where it did not run)."""
    series = {}
    for line in ax.get_lines():
        if line.get_label().startswith("_"):
            continue
        series[line.get_label()] = {float(px): float(py) for px, py in zip(line.get_xdata(), line.get_ydata())
                                    if math.isfinite(float(px))}
    reached = [px for points in series.values() for px, py in points.items() if math.isfinite(py)]
    if not reached:
        return float("nan"), []
    at = max(reached)
    return at, [(name, points.get(at, float("nan"))) for name, points in series.items()]


def _values(named) -> str:
    return ", ".join(f"{n} {value_label(v)}" if math.isfinite(v) else f"{n} did not run" for n, v in named)


def _result(named: list[tuple[str, float]], direction: str | None) -> str:
    """The result in words: the course's own path (role "cudnn") against each rival that ran, else the best
    against the runner-up; nothing where the axis does not say which way is better."""
    ran = [(n, v) for n, v in named if math.isfinite(v) and v > 0]
    if direction is None or len(ran) < 2:
        return ""
    def versus(a, b, name):
        if direction == "lower":
            return f"{value_label(b / a)}× faster than {name}"
        return f"{value_label(a / b)}× {name}"
    ours = [(n, v) for n, v in ran if role_of(n) == "cudnn"]
    if len(ours) == 1:
        (name, value), = ours
        rivals = ", ".join(versus(value, v, n) for n, v in ran if n != name)
        return f"{name}: {rivals}" if direction == "lower" else f"{name} at {rivals}"
    ranked = sorted(ran, key=lambda nv: nv[1], reverse=direction == "higher")
    (best, b), (second, s) = ranked[0], ranked[1]
    return f"{best} best, " + ("" if direction == "lower" else "at ") + versus(b, s, second)


def _panel_alt(ax) -> str:
    title = ax.get_title() or ax.get_ylabel() or "a panel"
    ylabel = ax.get_ylabel().replace(" (log scale)", "")
    direction = better(ylabel)
    scale = " (log scale)" if ax.get_yscale() == "log" else ""
    bars = _bars_of(ax)
    if bars:
        result = _result(bars, direction)
        return (f"Bar chart '{title}', {ylabel}{scale}: {_values(bars[:8])}" + (", …" if len(bars) > 8 else "")
                + (f"; {result}" if result else "") + ".")
    at, last = _lines_of(ax)
    if last:
        xname = (ax.get_xlabel() or "x").replace(" (log scale)", "")
        xscale = " (log scale)" if ax.get_xscale() == "log" else ""
        result = _result(last, direction)
        return (f"Line chart '{title}', {ylabel}{scale} against {xname}{xscale}, {len(last)} lines; at {xname} = "
                f"{plain_number(at)}: {_values(last)}" + (f"; {result}" if result else "") + ".")
    return f"'{title}'."


def alt_text(fig) -> str:
    """What the figure shows and its result, in words, read from its titles, labels and data: a sentence per panel
    ("Bar chart 'conv → bias → ReLU', GPU ms: cuDNN graph 0.1, torch.compile 0.151; cuDNN graph: 1.51× faster than
    torch.compile.")."""
    panels = [ax for ax in fig.axes if ax.get_visible() and (ax.get_title() or ax.get_lines() or ax.containers)]
    head = f"{len(panels)} stacked panels. " if len(panels) > 1 else ""
    return head + " ".join(_panel_alt(ax) for ax in panels)
