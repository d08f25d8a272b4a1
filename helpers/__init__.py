"""What the course notebooks call, by role: ``import helpers as H``, then ``H.<name>``.

The cuDNN graphs are written in the notebooks; this is plumbing only: set-up, checks, one clock, figures, gates.
``__all__`` is the surface (30 names at most; CONTRIBUTING.md's plan of the cores says which the cores call: 20 at
most).
A deep dive that needs more imports it from its module (``from helpers.timing.sweep import perf_sweep``). Names a
stored notebook still calls but the surface dropped resolve through ``__getattr__`` with a ``DeprecationWarning``
naming the replacement (``RENAMED``, ``MOVED``), until issue 56 re-runs the last notebook that calls one.
Importing it changes nothing in the process (``compact_warnings()`` is the setup cell's explicit call); maintainer
tooling lives in ``tools/`` and is never imported here.
"""
from types import ModuleType as _Module

# the setup cell: the GPU (or one line saying there is none), libcudnn loaded on purpose, the working dtype
from .device import require_gpu, working_dtype
from .errors import compact_warnings, first_line
from .libcudnn import load_cudnn
from .paths import tidy_paths


# each notebook's parameters, checked right after its parameters cell
def check_parameters(notebook: str, namespace: dict) -> None:
    """Raise one ``ParameterError`` listing every rule of ``helpers/parameters.py`` that notebook ``notebook``'s
    parameters in ``namespace`` (its ``globals()``) break. Notebooks not yet rewritten also get the old hidden
    ``DEEP_DIVES`` switch (``helpers/deep_dives.py``) until issue 56; rewritten ones guard each deep dive with
    ``H.deep_dive``, which installs nothing."""
    from . import deep_dives, parameters

    parameters.check_rules(notebook, namespace)
    deep_dives.switch(namespace)


# the core ends where the deep dives start: each deep dive's first code cell says so, visibly
from .deep_dives import deep_dive

# what this GPU and cuDNN can run, and the one line why not
from .features import gate

# the course's cuDNN handle on torch's current stream (01 writes create_handle and set_stream out once); a workspace
from .handles import get_handle
from .graphs import workspace_for

# checking against PyTorch: poison the output first, one tolerance table, bounds by norm and element-wise
from .checking import check, poison_, tolerance

# the one clock the cores quote: GPU time of the kernels (calls captured in a CUDA graph, replays timed with CUDA
# events, L2 flushed, median); the second clock, per call as a Python loop pays it; wall time of named steps
from .timing.gpu import NotCapturable, gpu_time
from .timing.per_call import call_time
from .timing.host import StepTimer
from .timing.kernels import kernels_launched
from .timing.rates import gbps, percent_of_peak, tflops

# figures that read on the website and a phone: stacked panels, alt text from the figure's own data
from .plotting import figure, plot_bars, plot_lines

# a worker program in a fresh process; a live progress bar
from .workers import run_worker
from .progress import progress

# headline numbers, recorded to results/<gpu>.csv
from .results import record


# exercises: the grader package (grader/), reached from a notebook through these two names only
def exercise(key: str, answer, *, quiet: bool = False):
    """Grade a learner's ``answer`` to exercise ``key`` ("02.residual_block") in one printed line."""
    from grader import exercise as grade

    return grade(key, answer, quiet=quiet)


def grade_solution(key: str):
    """Grade exercise ``key``'s reference solution (a stored notebook's ``solution`` cell): it must pass."""
    from grader import grade_solution as grade

    return grade(key)


__all__ = sorted(name for name, value in globals().items() if not name.startswith("_") and not isinstance(value, _Module))

# ---------------------------------------------------------------- the old surface, until issue 56
# A name the surface dropped -> (module it lives in, its replacement in words). The stored notebooks still call
# these; ``tests/test_surface.py`` lists which notebook calls which.
RENAMED = {
    "benchmark": ("helpers.timing.per_call", "H.call_time (the same timer, named for what it measures)"),
    "bar_compare": ("helpers.plotting", "H.plot_bars on H.figure()"),
    "line_compare": ("helpers.plotting", "H.plot_lines on H.figure()"),
    "plot_sweep": ("helpers.plotting", "H.plot_lines on H.figure() (x, y, hue='path'; rows that did not run as "
                                       "NaN; no bar form)"),
    "gpu_timing_or_reason": ("helpers.timing.gpu", "H.gpu_time (it raises H.NotCapturable with the reason)"),
    "gpu_ms_or_reason": ("helpers.timing.gpu", "H.gpu_time (it raises H.NotCapturable with the reason)"),
    "build": ("helpers.graphs", "the frontend's own graph.build([...]); a deep dive that times the five steps "
                                "imports build from helpers.graphs"),
    "GraphIO": ("helpers.graphs", "the frontend's own graph.tensor_like(t) and a {graph tensor: buffer} pack"),
    "use_style": ("helpers.plotting", "H.figure() (it applies the course's style)"),
    "legend_outside": ("helpers.plotting", "H.figure()'s panels with H.plot_lines (legend under the panel)"),
    "shared_legend": ("helpers.plotting", "H.figure(panels) with H.plot_lines (a legend under each panel)"),
    "mark_log_axes": ("helpers.plotting", "H.figure() (a log axis is labelled so when the figure is shown)"),
    "plain_log_ticks": ("helpers.plotting", "H.plot_lines(logy=True)"),
}
MOVED = {   # dropped from the surface, kept in its module for the deep dives
    "HATCH": "helpers.plotting", "hatch_handle": "helpers.plotting", "color_for": "helpers.plotting",
    "WorkerError": "helpers.workers", "alternating_rounds": "helpers.timing.per_call",
    "check_table": "helpers.checking", "rel_error": "helpers.checking", "cuda_call": "helpers.cuda_runtime",
    "describe_tensors": "helpers.graphs", "heuristic_modes": "helpers.graphs",
    "device_info": "helpers.device", "dtype_name": "helpers.device", "gpu_clocks": "helpers.device",
    "power_verdict": "helpers.device", "sample_clocks": "helpers.device", "versions": "helpers.device",
    "feature_table": "helpers.features", "notebook_requirements_met": "helpers.features",
    "timing_table": "helpers.timing.gpu", "host_timing": "helpers.timing.host", "host_us": "helpers.timing.host",
    "kernel_times": "helpers.timing.kernels", "short_kernel_name": "helpers.timing.kernels",
    "libcudnn_candidates": "helpers.libcudnn", "loaded_library": "helpers.libcudnn",
    "measured_bandwidth_gbps": "helpers.timing.rates", "measured_peak_tflops": "helpers.timing.rates",
    "peak_tflops": "helpers.timing.rates", "perf_sweep": "helpers.timing.sweep",
    "to_fp8": "helpers.quantize",
}


def replacement(name: str) -> str | None:
    """What replaces a name the surface dropped, in words; None for a name that was never on it."""
    if name in RENAMED:
        return RENAMED[name][1]
    if name in MOVED:
        return f"from {MOVED[name]} import {name} (a deep dive's import)"
    return None


def __getattr__(name: str):
    module = RENAMED[name][0] if name in RENAMED else MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'helpers' has no attribute {name!r}")
    import importlib
    import warnings

    # stacklevel=1: attributed to helpers, which Python's default filters keep quiet, so a stored notebook's
    # outputs (which nbval compares) stay as they were; the tests record it
    warnings.warn(f"H.{name} has left the toolbox's surface: use {replacement(name)}", DeprecationWarning,
                  stacklevel=1)
    return getattr(importlib.import_module(module), name)
