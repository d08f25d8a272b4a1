"""One plotting style for every notebook."""
from __future__ import annotations

import matplotlib.pyplot as plt

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


def color_for(label: str, colors: dict | None = None) -> str:
    """The colour of a path's role: an exact entry of ``colors`` first, else the first ``COLORS`` key in the label."""
    if colors and label in colors:
        return colors[label]
    low = label.lower()
    for key, value in COLORS.items():
        if key in low:
            return value
    return COLORS["other"]


def use_style() -> None:
    plt.rcParams.update({
        "figure.figsize": (8, 4.2), "figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3,
        "axes.spines.top": False, "axes.spines.right": False, "axes.titleweight": "bold",
        "legend.frameon": False, "font.size": 10,
    })


def bar_compare(labels, values, *, ylabel: str, title: str, peak: float | None = None,
                peak_label: str = "peak", fmt: str = "{:.1f}", ax=None):
    """Bars with value labels and an optional horizontal 'peak' line."""
    use_style()
    if ax is None:
        _, ax = plt.subplots()
    bars = ax.bar(list(labels), list(values), color=[color_for(str(l)) for l in labels])
    for bar, value in zip(bars, values):
        ax.annotate(fmt.format(value), (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=9)
    _peak_line(ax, peak, peak_label, fmt)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return ax


def line_compare(df, *, x: str, y: str, hue: str, ylabel: str, title: str, logx: bool = False,
                 peak: float | None = None, ax=None):
    """One line per ``hue`` group of a long-format DataFrame."""
    use_style()
    if ax is None:
        _, ax = plt.subplots()
    for label, part in df.groupby(hue, sort=False):
        part = part.sort_values(x)
        ax.plot(part[x], part[y], marker="o", label=str(label), color=color_for(str(label)))
    _peak_line(ax, peak, "peak", "{:.0f}")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
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
               peak_label: str = "measured matmul peak", colors: dict | None = None, order: list | None = None):
    """Draw a ``perf_sweep`` table: one line (``kind="line"``) or one bar per point (``kind="bar"``,
    grouped along a categorical ``x``) for each path, coloured by role; rows whose status is not ok
    are left out. ``colors`` maps a path label to its colour where ``COLORS`` has no role for it."""
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
        for label in labels:
            part = ok[ok["path"] == label].sort_values(x)
            if len(part):
                ax.plot(part[x], part[y], marker="o", label=label, color=color_for(label, colors))
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(xs), [str(v) for v in sorted(xs)])
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
    _peak_line(ax, peak, peak_label, "{:.0f}")
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel or y)
    if title:
        ax.set_title(title)
    ax.legend(fontsize=8)
    return ax
