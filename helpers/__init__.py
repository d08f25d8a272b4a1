"""Plumbing for the cuDNN Frontend course notebooks.

The cuDNN graphs themselves live in the notebooks; this package only loads the
library, knows the device, times, checks, plots and records.
"""
from .checking import TOLERANCE, CheckResult, check, check_table, poison_, rel_error, tolerance
from .device import (DeviceInfo, Gate, backend_version, device_info, feature_table, gate, has_gpu,
                     measured_bandwidth_gbps, measured_peak_tflops, peak_tflops, require_gpu, versions,
                     working_dtype)
from .errors import CourseError, CudnnNotFoundError, FeatureUnavailable, NoGPUError, _compact_warnings
from .graphs import GraphIO, StepTimer, build, get_handle, workspace_for
from .libcudnn import load_cudnn, loaded_library
from .paths import tidy_paths
from .profiling import kernels_launched
from .plotting import bar_compare, color_for, line_compare, use_style
from .results import record, summary
from .timing import Timing, benchmark, flush_l2_cache, gbps, tflops

__all__ = [name for name in dir() if not name.startswith("_")]

_compact_warnings()
