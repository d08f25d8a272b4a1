"""What the course notebooks call: plumbing only.

The cuDNN graphs are written in the notebooks. This package loads the library (libcudnn),
knows the device and its feature gates (device, features), times (timing, sweep), checks
(checking), binds tensors to graphs (graphs), reads what ran on the GPU (profiling), plots
(plotting) and records headline numbers (results). ``helpers.recipes`` holds graphs and
procedures a notebook teaches and later notebooks reuse; maintainer tooling (the executor,
notebook metadata) lives in ``tools/`` and is never imported here.
"""
from .checking import TOLERANCE, CheckResult, check, check_table, poison_, rel_error, tolerance
from .device import DeviceInfo, backend_version, device_info, dtype_name, has_gpu, require_gpu, versions, working_dtype
from .exercises import exercise, grade_solution, solution
from .errors import (CourseError, CudnnLoadError, CudnnNotFoundError, CudnnVersionError, FeatureUnavailable, NoGPUError,
                     _compact_warnings, first_line)
from .features import Gate, feature_table, gate, notebook_requirements_met
from .gpu_time import NotCapturable, gpu_time
from .graphs import GraphIO, build, describe_tensors, get_handle, workspace_for
from .libcudnn import load_cudnn, loaded_library
from .parameters import ParameterError, check_parameters
from .paths import artifacts_dir, tidy_paths
from .plotting import bar_compare, color_for, line_compare, plot_sweep, use_style
from .profiling import kernels_launched
from .results import record, summary
from .sweep import grid, peak_extra_mib, perf_sweep
from .timing import (StepTimer, Timing, benchmark, flush_l2_cache, gbps, measured_bandwidth_gbps,
                     measured_peak_tflops, peak_tflops, percent_of_peak, tflops)

__all__ = [name for name in dir() if not name.startswith("_")]

_compact_warnings()
