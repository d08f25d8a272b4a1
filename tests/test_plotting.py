"""The plotting style (CPU, matplotlib Agg): colour by role, legends outside the data, log axes ticked at the
data, missing points that break a line, and ``style_problems`` catching each defect on a bad figure while a good
figure, and every figure the helpers draw, has none."""
import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402

from helpers import plotting as P  # noqa: E402
from helpers.lessons import transformer  # noqa: E402
from tests.figure_style import data_lines, style_problems  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# ------------------------------------------------------------------ colour by role
@pytest.mark.parametrize("label, role", [
    ("torch eager (cudnn.benchmark)", "torch eager"),    # 03: torch's path that mentions cuDNN is torch's
    ("cuDNN heuristic pick", "cudnn"),
    ("cuDNN + torch amax", "cudnn"),
    ("torch.compile reduce-overhead", "torch.compile"),
    ("torch GEMM, no epilogue", "torch eager"),
    ("F.sdpa (torch's C++ op)", "torch eager"),
    ("Python op, no cuDNN (floor)", "other"),            # 08: mentions cuDNN, runs none
    ("cuBLASLt + torch amax", "other"),
    ("heuristic", "heuristic"),
    ("Worst", "worst"),
])
def test_role_comes_from_how_the_label_begins_or_its_own_name(label, role):
    assert P.role_of(label) == role
    assert P.color_for(label) == P.COLORS[role]


def test_an_explicit_role_or_colour_wins():
    assert P.color_for("torch eager (cudnn.benchmark)", role="cudnn") == P.COLORS["cudnn"]
    assert P.color_for("static", {"static": "other"}) == P.COLORS["other"]   # a role name as the value
    assert P.color_for("static", {"static": "#123456"}) == "#123456"         # or a colour
    with pytest.raises(KeyError, match="no role"):
        P.color_for("x", role="fastest")


def test_the_course_style_follows_the_resolved_role_not_only_the_label():
    course, rival = P.line_style("cuDNN", 0), P.line_style("torch eager", 0)
    assert P.line_style("pinned", 0, {"pinned": "cudnn"}) == course          # 07: the course's line named by colors=
    assert P.line_style("pinned", 0, {"pinned": P.COLORS["cudnn"]}) == course   # or by the course's colour
    assert P.line_style("cuDNN heuristic", 0, {"cuDNN heuristic": "heuristic"}) == rival   # colors= wins over the label
    assert P.line_style("pinned", 0) == rival                                  # no colors=: the label decides
    df = pd.DataFrame({"tokens": [1, 2, 1, 2], "µs": [5, 6, 7, 8], "path": ["pinned"] * 2 + ["static"] * 2})
    ax = P.line_compare(df, x="tokens", y="µs", hue="path", ylabel="µs", title="t",
                        colors={"pinned": "cudnn", "static": "other"})
    widths = {line.get_label(): (line.get_linewidth(), line.get_linestyle()) for line in ax.get_lines()}
    assert widths["pinned"] == (course["linewidth"], "-") and widths["static"] == (rival["linewidth"], "--")
    assert style_problems(ax.figure) == []


def test_plain_numbers_for_tick_labels():
    assert [P.plain_number(v) for v in (16, 2048.0, 0.5, 40)] == ["16", "2048", "0.5", "40"]


# ------------------------------------------------------------------ the check on a bad and a good figure
def _bad_figure():
    """Every defect the review found, in one figure."""
    fig, (ax_lines, ax_bars) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [16, 256, 2048, 8192]
    ax_lines.plot(xs, [5, 6, 2, 1], marker="o", label="replay", color=P.COLORS["other"])
    ax_lines.plot(xs, [5, 5, 5, 5], marker="o", label="eager", color=P.COLORS["other"])   # drawn alike
    ax_lines.plot(xs, [1, 2, 3, 4], marker="o")                                           # no legend names it
    ax_lines.set_xscale("log", base=2)                                                     # ticks 2^n, data between
    ax_lines.axhline(5.5, ls="--", color="k")                                              # a peak line ...
    ax_lines.legend(loc="upper left")                                                       # ... and a legend on the data
    bars = ax_bars.bar(["cold (empty cache)", "cache from disk, second process"], [560.5, 38.3])
    bars[1].set_hatch("//")                                                                 # hatch not explained
    ax_bars.set_yscale("log")                                                               # 17x reads as 2x
    ax_bars.set_title("first build")
    for label in ax_bars.get_xticklabels():
        label.set_fontsize(30)                                                              # labels overlap
    return fig


def test_style_problems_finds_every_defect_of_a_bad_figure():
    problems = style_problems(_bad_figure())
    text = "\n".join(problems)
    for expected in ("covers 'replay'", "covers 'a reference line'", "drawn alike", "no legend names",
                     "labelled in powers", "falls between its labelled ticks", "hatch means",
                     "without their ratios", "tick labels of 'first build' overlap"):
        assert expected in text, f"{expected!r} not reported in:\n{text}"


def _good_figure():
    fig, (ax_lines, ax_bars) = plt.subplots(1, 2, figsize=(10, 4))
    xs = [16, 256, 2048, 8192]
    ax_lines.plot(xs, [5, 6, 2, 1], marker="o", label="replay", color=P.color_for("cudnn"))
    ax_lines.plot(xs, [5, 5, np.nan, 5], marker="s", label="eager", color=P.color_for("other"))
    ax_lines.set_xscale("log")
    P.ticks_at_data(ax_lines, xs)
    ax_lines.set_yscale("log")
    P.plain_log_ticks(ax_lines)
    P.bar_compare(["cold", "from disk"], [560.5, 38.3], ylabel="ms", title="first build: 14.6x faster from disk",
                  ax=ax_bars, hatched=["from disk"], hatch_label="loaded from disk")
    ax_bars.set_yscale("log")
    P.plain_log_ticks(ax_bars)
    fig.tight_layout()
    P.shared_legend(fig, [ax_lines])
    P.mark_log_axes(fig)
    return fig


def test_a_good_figure_has_no_problems():
    assert style_problems(_good_figure()) == []


def test_a_log_axis_that_does_not_say_so_is_a_problem_and_mark_log_axes_fixes_it():
    fig, ax = plt.subplots()
    ax.plot([1, 10, 100], [1, 2, 3], label="cuDNN frontend graph")
    ax.set_xscale("log")
    ax.set_xlabel("sequence length")
    assert any("does not say it is log" in p for p in style_problems(fig))
    P.mark_log_axes(fig)
    assert ax.get_xlabel() == "sequence length (log scale)"
    P.mark_log_axes(fig)
    assert ax.get_xlabel() == "sequence length (log scale)"


# ------------------------------------------------------------------ the helpers draw figures that pass the check
def _sweep_table():
    rows = []
    for s in (512, 1024, 2048, 4096):
        for path, rate in (("cuDNN frontend graph", 2.0), ("torch eager", 1.0), ("FlexAttention (compiled)", 1.5)):
            ran = path != "FlexAttention (compiled)" or s in (1024, 4096)
            rows.append({"S": s, "path": path, "status": "ok" if ran else "not run", "TFLOP/s": rate * s,
                         "peak MiB": rate * 100})
    return pd.DataFrame(rows)


def test_a_point_that_did_not_run_breaks_its_line():
    ax = P.plot_sweep(_sweep_table(), x="S", logx=True, colors={"FlexAttention (compiled)": "#bcbd22"})
    flex = next(line for line in ax.get_lines() if line.get_label() == "FlexAttention (compiled)")
    assert list(flex.get_xdata()) == [512, 1024, 2048, 4096]
    assert np.isnan(flex.get_ydata()[[0, 2]]).all() and not np.isnan(flex.get_ydata()[[1, 3]]).any()
    assert style_problems(ax.figure) == []


def test_two_sweep_panels_with_one_shared_legend_pass_the_check():
    fig, (ax_rate, ax_mem) = plt.subplots(1, 2, figsize=(12, 4.4))
    P.plot_sweep(_sweep_table(), x="S", ax=ax_rate, logx=True, peak=9000, legend=False, title="rate")
    P.plot_sweep(_sweep_table(), x="S", y="peak MiB", ax=ax_mem, logx=True, logy=True, legend=False, title="memory")
    fig.tight_layout()
    P.shared_legend(fig)
    assert style_problems(fig) == []
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)


def test_line_compare_ticks_a_log_axis_at_the_data_and_passes_the_check():
    df = pd.DataFrame({"batch": [1, 2, 4, 64, 1, 2, 4, 64], "ms": [60, 8, 7, 7, 58, 57, 57, 56],
                       "mode": ["cached"] * 4 + ["no cache"] * 4})
    ax = P.line_compare(df, x="batch", y="ms", hue="mode", ylabel="ms", title="builds", logx=True, logy=True,
                        colors={"cached": "cudnn", "no cache": "worst"})
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "64"]
    assert {to_hex(line.get_color()) for line in ax.get_lines()} == {P.COLORS["cudnn"], P.COLORS["worst"]}
    assert style_problems(ax.figure) == []


def test_bar_compare_rotates_overlapping_labels_and_explains_its_hatch():
    labels = ["native update", "native re-populate + instantiate", "re-capture", "bare re-capture"]
    ax = P.bar_compare(labels, [26.7, 43.7, 180.9, 151.6], ylabel="µs on the host", title="t",
                       hatched=[1], hatch_label="hatched: re-populated")
    assert ax.patches[1].get_hatch() == "//" and not ax.patches[0].get_hatch()
    assert style_problems(ax.figure) == []
    with pytest.raises(ValueError, match="hatch_label"):
        P.bar_compare(["a"], [1.0], ylabel="y", title="t", hatched=[0])


def test_loss_gap_needs_two_curves_of_one_length():
    with pytest.raises(ValueError, match="one non-zero length"):
        transformer.loss_gap([1.0], [1.0, 2.0])


