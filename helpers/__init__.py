"""What the course notebooks call, by role: ``import helpers as H``, then ``H.<name>``.

The cuDNN graphs are written in the notebooks; this is plumbing only. Every name below is used by a notebook
or a reference solution (``tests/test_surface.py`` keeps it so); everything else stays importable from its
module. Beside this surface a notebook imports only ``helpers.recipes`` (graphs a notebook teaches and later
ones reuse), ``helpers.lessons`` (plumbing one notebook needs) and the programs of ``helpers.workers``.
Importing it changes nothing in the process (``compact_warnings()`` is the setup cell's explicit call);
maintainer tooling lives in ``tools/`` and is never imported here.
"""
from types import ModuleType as _Module

# the setup cell: the GPU (or one line saying there is none), libcudnn loaded on purpose, the working dtype
from .device import require_gpu, working_dtype
from .errors import compact_warnings
from .libcudnn import load_cudnn

# the environment report (01): which libcudnn could load and which did, versions, machine paths tidied
from .device import versions
from .libcudnn import libcudnn_candidates, loaded_library
from .paths import tidy_paths

# the GPU and what it can do: its facts and dtype names, SM clock and throttle reasons, a power cap's verdict, feature gates
from .device import device_info, dtype_name, gpu_clocks, power_verdict, sample_clocks
from .features import feature_table, gate, notebook_requirements_met


# each notebook's parameters, checked right after its parameters cell
def check_parameters(notebook: str, namespace: dict) -> None:
    """Raise one ``ParameterError`` listing every rule of ``helpers/parameters.py`` that notebook ``notebook``'s
    parameters in ``namespace`` (its ``globals()``) break. Then, apart from the rules, install the ``DEEP_DIVES``
    switch (``helpers/deep_dives.py``), until the GPU issue puts explicit guards in the notebooks."""
    from . import deep_dives, parameters

    parameters.check(notebook, namespace)
    deep_dives.switch(namespace)


# graphs: the handle on torch's stream, named tensors with explicit UIDs, the build, the workspace
from .graphs import GraphIO, build, describe_tensors, heuristic_modes, workspace_for
from .handles import get_handle

# checking against PyTorch: poison the output first, one tolerance table, bounds by norm and element-wise
from .checking import check, check_table, poison_, rel_error, tolerance

# FP8: per-tensor scaling
from .quantize import to_fp8

# timing (helpers/timing/): per call with CUDA events, in rounds that take turns
from .timing.per_call import alternating_rounds, benchmark
# ... the GPU alone (calls replayed from a CUDA graph), or the reason there is none; the clocks side by side
from .timing.gpu import gpu_ms_or_reason, gpu_time, gpu_timing_or_reason, timing_table
# ... the host's side of a call, and the wall time of named steps
from .timing.host import StepTimer, host_timing, host_us
# ... every path at every point of a grid, one tidy table
from .timing.sweep import perf_sweep
# ... which kernels a call launches, and the GPU time of each
from .timing.kernels import kernel_times, kernels_launched, short_kernel_name
# ... rates, and the ceilings (measured, datasheet) to quote them against
from .timing.rates import gbps, measured_bandwidth_gbps, measured_peak_tflops, peak_tflops, percent_of_peak, tflops

# the CUDA runtime through cuda-python, one error check (08's native CUDA graphs)
from .cuda_runtime import cuda_call

# a worker program in a fresh process
from .workers import WorkerError, run_worker

# a live progress bar for a learner; headless runs store one line instead of its redraws
from .progress import progress

# plots in one style: colour by role, legends outside the data, hatches explained, log axes in plain numbers
from .plotting import (HATCH, bar_compare, color_for, hatch_handle, legend_outside, line_compare, mark_log_axes,
                       plain_log_ticks, plot_sweep, shared_legend, use_style)

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


# an exception as one line
from .errors import first_line

__all__ = sorted(name for name, value in globals().items() if not name.startswith("_") and not isinstance(value, _Module))
