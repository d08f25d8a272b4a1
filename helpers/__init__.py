"""What the course notebooks call: plumbing only.

The cuDNN graphs are written in the notebooks. This package loads the library (libcudnn),
knows the device, its clocks and its feature gates (device, features), times (timing, sweep), checks
(checking, with the course's one tolerance table), binds tensors to graphs and builds them
(graphs), quantises to FP8 (quantize), reads what ran on the GPU (profiling), starts workers in a
fresh process (workers), calls the CUDA runtime through cuda-python (cuda_runtime), plots (plotting) and
records headline numbers (results); ``helpers.training`` holds the transformer block notebook 08 trains. Importing it
changes nothing in the process (``compact_warnings()`` is the setup cell's explicit call). ``helpers.recipes`` holds graphs and
procedures a notebook teaches and later notebooks reuse; maintainer tooling (the executor,
notebook metadata) lives in ``tools/`` and is never imported here.
"""
from .checking import TOLERANCE, TOLERANCE_FOR, CheckResult, check, check_table, poison_, rel_error, tolerance
from .cuda_runtime import cuda_call
from .device import (DeviceInfo, backend_version, device_info, dtype_name, gpu_clocks, has_gpu, require_gpu,
                     sample_clocks, versions, working_dtype)
from .exercises import exercise, grade_solution, solution
from .errors import (CourseError, CudnnLoadError, CudnnNotFoundError, CudnnVersionError, FeatureUnavailable, NoGPUError,
                     compact_warnings, first_line)
from .features import Gate, feature_table, gate, notebook_requirements_met
from .graphs import DEFAULT_HEURISTICS, GraphIO, build, heuristic_modes, describe_tensors, workspace_for
from .handles import get_handle
from .libcudnn import load_cudnn, loaded_library
from .parameters import ParameterError, check_parameters
from .paths import artifacts_dir, tidy_paths
from .plotting import bar_compare, color_for, line_compare, plot_sweep, use_style
from .quantize import to_fp8
from .results import record, summary
from .timing.gpu import NotCapturable, gpu_ms_or_reason, gpu_time, timing_table
from .timing.host import StepTimer, host_timing, host_us
from .timing.kernels import kernel_times, kernels_launched, short_kernel_name
from .timing.per_call import Timing, alternating_rounds, benchmark, flush_l2_cache
from .timing.rates import gbps, measured_bandwidth_gbps, measured_peak_tflops, peak_tflops, percent_of_peak, tflops
from .timing.sweep import grid, peak_extra_mib, perf_sweep
from .workers import WorkerError, WorkerRun, run_worker

__all__ = [name for name in dir() if not name.startswith("_")]
