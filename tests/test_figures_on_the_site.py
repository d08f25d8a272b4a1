"""Figures drawn with the toolbox's defaults read where the website shows them (CPU, Agg): panels stacked, an image
no wider than 1,400 px and at least 0.45 times as tall as wide, every text 9 px or more at the site's 700 px, no
legend over the data, log axes labelled so, and alt text that says what the figure shows and its result."""
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from PIL import Image  # noqa: E402

from helpers import plotting as P  # noqa: E402
from tests.figure_style import style_problems  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SWEEP = pd.DataFrame({"S": [1024, 2048, 4096, 8192] * 3,
                      "TFLOP/s": [420, 500, 560, 610, 230, 280, 310, 334, 400, 480, 540, 600],
                      "path": ["cuDNN SDPA"] * 4 + ["torch flash"] * 4 + ["torch cuDNN backend"] * 4})


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def bars():
    fig, ax = P.figure()
    P.plot_bars(ax, ["cuDNN graph", "torch.compile", "torch eager"], [0.100, 0.151, 0.202],
                ylabel="GPU time per call (ms)", title="conv → bias → ReLU, N32 C128 56² K256, bf16")
    return fig


def lines():
    fig, ax = P.figure()
    P.plot_lines(ax, SWEEP, x="S", y="TFLOP/s", hue="path", ylabel="TFLOP/s", title="causal SDPA forward, d=128",
                 logx=True)
    return fig


def stacked():
    fig, (top, bottom) = P.figure(2)
    P.plot_lines(top, SWEEP, x="S", y="TFLOP/s", hue="path", ylabel="TFLOP/s", title="forward", logx=True)
    P.plot_bars(bottom, ["cuDNN SDPA", "torch flash"], [610, 334], ylabel="TFLOP/s", title="at S = 8192")
    return fig


def log_bars():
    fig, ax = P.figure()
    P.plot_bars(ax, ["first build", "built again", "reloaded"], [12345.0, 58.2, float("nan")],
                ylabel="build ms (lower is better)", title="one graph, three ways", logy=True)
    return fig


FIGURES = {"bars": bars, "lines": lines, "stacked": stacked, "log bars": log_bars}


def shown(fig):
    """The PNG as the inline backend stores it (tight bounding box, the figure's dpi), decoded."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", dpi=fig.dpi)
    return Image.open(io.BytesIO(buffer.getvalue()))


def smallest_text_px(fig, image_width: int) -> tuple[float, str]:
    """The smallest visible text's height in px where the site shows the image ``SITE_WIDTH_PX`` wide."""
    scale = min(1.0, P.SITE_WIDTH_PX / image_width)
    texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    smallest = min(texts, key=lambda t: t.get_fontsize())
    return smallest.get_fontsize() * fig.dpi / 72 * scale, smallest.get_text()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_a_figure_reads_at_the_sites_width(name):
    fig = FIGURES[name]()
    image = shown(fig)
    width, height = image.size
    assert width <= P.MAX_WIDTH_PX, f"{name}: {width} px wide"
    assert height >= P.MIN_ASPECT * width, f"{name}: {width} × {height} px, flatter than {P.MIN_ASPECT}"
    px, text = smallest_text_px(fig, width)
    assert px >= P.MIN_TEXT_PX, f"{name}: {text!r} is {px:.1f} px at the site's {P.SITE_WIDTH_PX} px"
    assert style_problems(fig) == []


def test_panels_are_stacked_one_under_the_other():
    fig = stacked()
    top, bottom = fig.axes
    assert top.get_position().x0 == pytest.approx(bottom.get_position().x0, abs=0.05)
    assert top.get_position().y0 > bottom.get_position().y1


def test_the_check_would_catch_a_side_by_side_strip_with_small_text():
    fig, axes = plt.subplots(1, 3, figsize=(17, 4), dpi=110)   # like 05's 1,876 × 451 strip
    for ax in axes:
        ax.plot([1, 2], [3, 4])
        ax.set_title("a panel")
    width, height = shown(fig).size
    assert width > P.MAX_WIDTH_PX and height < P.MIN_ASPECT * width
    assert smallest_text_px(fig, width)[0] < P.MIN_TEXT_PX


def test_a_log_axis_is_labelled_so_when_the_figure_is_shown():
    fig, ax = P.figure()
    ax.plot([1, 10, 100], [1, 2, 3], label="cuDNN")
    ax.set_xscale("log")
    ax.set_xlabel("tokens")
    fig._repr_mimebundle_()
    assert ax.get_xlabel() == "tokens (log scale)"


@pytest.mark.parametrize("name, expected", [
    ("bars", "Bar chart 'conv → bias → ReLU, N32 C128 56² K256, bf16', GPU time per call (ms): cuDNN graph 0.1, "
             "torch.compile 0.151, torch eager 0.202; cuDNN graph: 1.51× faster than torch.compile, 2.02× faster than "
             "torch eager."),
    ("lines", "Line chart 'causal SDPA forward, d=128', TFLOP/s against S (log scale), 3 lines; at S = 8192: "
              "cuDNN SDPA 610, torch flash 334, torch cuDNN backend 600; cuDNN SDPA at 1.83× torch flash, 1.02× torch "
              "cuDNN backend."),
    ("log bars", "Bar chart 'one graph, three ways', build ms (lower is better) (log scale): first build 12,345, built again 58.2, "
                 "reloaded did not run; built again best, 212× faster than first build."),
])
def test_alt_text_says_what_the_figure_shows_and_its_result(name, expected):
    assert P.alt_text(FIGURES[name]()) == expected


def test_alt_text_of_stacked_panels_has_a_sentence_each_and_travels_with_the_png():
    fig = stacked()
    data, metadata = fig._repr_mimebundle_()
    alt = metadata["image/png"]["alt"]
    assert data == {} and alt.startswith("2 stacked panels. Line chart 'forward'") and "Bar chart 'at S = 8192'" in alt
    assert "cuDNN SDPA at 1.83× torch flash" in alt


def test_alt_text_names_no_winner_where_the_axis_does_not_say_which_way_is_better():
    fig, ax = P.figure()
    P.plot_bars(ax, ["a", "b"], [1, 2], ylabel="count", title="calls")
    assert P.alt_text(fig) == "Bar chart 'calls', count: a 1, b 2."


def test_a_ratio_in_the_thousands_is_written_without_a_power_of_ten():
    fig, ax = P.figure()
    P.plot_bars(ax, ["cuDNN tuned best", "slowest plan"], [0.1, 146.8], ylabel="GPU ms (lower is better)",
                title="plans", logy=True)
    assert P.alt_text(fig).endswith("cuDNN tuned best: 1,468× faster than slowest plan.")
    assert [t.get_text() for t in ax.texts] == ["0.1 (1×)", "147 (1,468×)"]


@pytest.mark.parametrize("label, direction", [
    ("GPU ms per call", "lower"), ("µs", "lower"), ("build time (s)", "lower"), ("TFLOP/s", "higher"),
    ("speedup vs eager", "higher"), ("GB/s (log scale)", "higher"), ("steps/s", "higher"), ("images/s", "higher"),
    ("% of the GPU's peak", "higher"), ("µs per step (lower is better)", "lower"), ("score (higher is better)", "higher"),
    ("candidate plans", None)])
def test_which_way_is_better_comes_from_the_axis_label(label, direction):
    assert P.better(label) == direction


def test_a_notebook_stores_the_alt_text_beside_its_png():
    """In a real kernel with the inline backend (as ``tools.execute`` runs one), the figure's PNG output carries the
    alt text as its metadata, where the website reads it."""
    pytest.importorskip("ipykernel")
    import nbformat
    from nbclient import NotebookClient

    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n%matplotlib inline\nimport helpers as H\n"
            "fig, ax = H.figure()\nH.plot_bars(ax, ['cuDNN', 'torch eager'], [1.0, 2.0], ylabel='GPU ms', title='t')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=120, kernel_name="python3").execute()
    (shown,) = [o for o in nb.cells[0].outputs if "image/png" in o.get("data", {})]
    assert [o.output_type for o in nb.cells[0].outputs] == ["display_data"]   # one figure, no stray value
    assert shown.metadata["image/png"]["alt"] == "Bar chart 't', GPU ms: cuDNN 1, torch eager 2; cuDNN: 2× faster than torch eager."
