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


def color_for(label: str) -> str:
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
    if peak:
        ax.axhline(peak, ls="--", color="k", lw=1)
        ax.annotate(f"{peak_label} {fmt.format(peak)}", (0, peak), xytext=(2, 3), textcoords="offset points", fontsize=8)
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
    if peak:
        ax.axhline(peak, ls="--", color="k", lw=1, label="peak")
    if logx:
        ax.set_xscale("log", base=2)
    ax.set_xlabel(x)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    return ax
