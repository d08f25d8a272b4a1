"""Device facts: which GPU, its datasheet ceilings, the working dtype, versions; and its state now (SM clock,
power draw, why the clock is held down), read through NVML.

**Rehearsing another GPU.** ``COURSE_GPU=t4|l4|a100|h100`` (off by default; for maintainers and CI) makes
the course's own view of the device that of a GPU users have: name, compute capability, SM count, memory,
datasheet peaks, and so the working dtype and every feature gate (``helpers.features``). torch,
``torch.compile`` and cuDNN keep running on the real GPU; its L2 size stays real too (the cache flush must
cover the cache that exists). ``require_gpu()`` says the rehearsal is on and caps torch's caching allocator at
the profile's memory (``cap_memory``), so a notebook that would not fit that GPU fails here too: one line each,
once per process. See ``PROFILES``.
"""
from __future__ import annotations

import functools
import math
import os
import platform
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch

from .errors import NoGPUError

# Dense (no sparsity) tensor-core peaks in TFLOP/s and memory bandwidth in GB/s,
# from the vendors' datasheets. Matched by substring of the torch device name,
# most specific first. "fp16" means fp16 inputs with fp32 accumulation.
_DATASHEET = [
    # name        bf16    fp16    fp8     GB/s
    ("B200",     2250.0, 2250.0, 4500.0, 8000.0),
    ("H200",      989.0,  989.0, 1979.0, 4800.0),
    ("H100 PCIe", 756.0,  756.0, 1513.0, 2000.0),
    ("H100 NVL",  835.0,  835.0, 1671.0, 3900.0),
    ("H100",      989.0,  989.0, 1979.0, 3350.0),
    ("GH200",     989.0,  989.0, 1979.0, 4000.0),
    ("L40S",      362.0,  362.0,  733.0,  864.0),
    ("L4",        121.0,  121.0,  242.0,  300.0),
    ("RTX 4090",  165.0,  165.0,  330.0, 1008.0),
    ("A100-SXM4-80GB", 312.0, 312.0, None, 2039.0),
    ("A100",      312.0,  312.0,   None, 1555.0),
    ("A10G",       70.0,   70.0,   None,  600.0),
    ("A10",       125.0,  125.0,   None,  600.0),
    ("RTX 3090",   71.0,   71.0,   None,  936.0),
    ("T4",          None,  65.0,   None,  320.0),
    ("V100",        None, 125.0,   None,  900.0),
]


@dataclass(frozen=True)
class GPU:
    """A GPU as the course sees it; memory in GiB, as torch reports it (a "16 GB" T4 shows 14.7 GiB)."""
    name: str
    sm: tuple[int, int]
    sm_count: int
    memory_gb: float

    @property
    def sm_version(self) -> int:
        return 10 * self.sm[0] + self.sm[1]


# GPUs our users have, as the course sees them under COURSE_GPU; ``colab`` is the Colab tier that offers it.
@dataclass(frozen=True, kw_only=True)
class Profile(GPU):
    key: str
    colab: str


PROFILES = {p.key: p for p in (
    Profile(key="t4", name="Tesla T4", sm=(7, 5), sm_count=40, memory_gb=14.7, colab="free"),
    Profile(key="l4", name="NVIDIA L4", sm=(8, 9), sm_count=58, memory_gb=22.0, colab="paid"),
    Profile(key="a100", name="NVIDIA A100-SXM4-40GB", sm=(8, 0), sm_count=108, memory_gb=39.4, colab="paid"),
    Profile(key="h100", name="NVIDIA H100 80GB HBM3", sm=(9, 0), sm_count=132, memory_gb=79.1, colab="paid"),
)}
PROFILE_ENV = "COURSE_GPU"


def active_profile() -> Profile | None:
    """The profile ``COURSE_GPU`` names, or None when the switch is off (unset or empty)."""
    key = os.environ.get(PROFILE_ENV, "").strip().lower()
    if not key:
        return None
    if key not in PROFILES:
        raise ValueError(f"{PROFILE_ENV}={key!r} is not a GPU profile; use one of {', '.join(PROFILES)} (or unset it)")
    return PROFILES[key]


@dataclass(frozen=True, kw_only=True)
class DeviceInfo(GPU):
    """This process's GPU: ``require_gpu()`` and ``device_info()`` give it."""
    index: int
    l2_bytes: int
    # Datasheet ceilings (dense, no sparsity); None when the GPU is not in the table. The *measured* peaks
    # are ``measured_peak_tflops`` / ``measured_bandwidth_gbps`` (helpers/timing/rates.py).
    datasheet_tflops: dict = field(default_factory=dict)  # {"bfloat16": ..., "float16": ..., "float8_e4m3fn": ...}
    datasheet_gbps: float | None = None
    rehearsed_on: str | None = None  # the real GPU's name when a COURSE_GPU profile is on, else None

    @property
    def slug(self) -> str:
        """File-name-safe GPU name, e.g. ``nvidia-h200``."""
        return slugify(self.name)


def slugify(gpu_name: str) -> str:
    """File-name-safe GPU name: 'NVIDIA H200' -> 'nvidia-h200'."""
    return "".join(c if c.isalnum() else "-" for c in gpu_name.lower()).strip("-").replace("--", "-")


def dtype_name(dtype: torch.dtype) -> str:
    """torch's name without the prefix: ``torch.bfloat16`` -> ``'bfloat16'`` (titles, file names, saved choices)."""
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"expected a torch.dtype, got {type(dtype).__name__}")
    return str(dtype).removeprefix("torch.")


def has_gpu() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def require_gpu() -> "DeviceInfo":
    """The current GPU's facts, or ``NoGPUError`` with one clear line. Under a ``COURSE_GPU`` profile it
    prints, once per process, which GPU is rehearsed on which, and caps the memory (``cap_memory``)."""
    if not has_gpu():
        reason = "torch is a CPU-only build" if torch.version.cuda is None else "no CUDA device is visible to torch"
        raise NoGPUError(f"No NVIDIA GPU found ({reason}): these notebooks need one — use a GPU machine or Colab (Runtime → GPU).")
    info = device_info()
    if info.rehearsed_on and not _announced:
        _announced.append(info.name)
        print(f"{PROFILE_ENV}={active_profile().key}: rehearsing a {info.name} (sm{info.sm_version}, {info.sm_count} SMs, "
              f"{info.memory_gb:.1f} GiB) on the real {info.rehearsed_on}: gates, dtype, peaks and memory follow the "
              f"{info.name}; the kernels run on the {info.rehearsed_on}.")
        print(cap_memory(info))
    return info


def cap_memory(info: "DeviceInfo") -> str:
    """Cap torch's caching allocator on the rehearsed GPU at the profile's memory, so that a notebook too big for
    that GPU fails in the rehearsal too. Returns the line that says so; ``require_gpu()`` makes this call."""
    if not info.rehearsed_on:
        raise ValueError(f"cap_memory: {info.name} is the real GPU; the cap is for a {PROFILE_ENV} rehearsal")
    total = torch.cuda.get_device_properties(info.index).total_memory
    fraction = min(1.0, info.memory_gb * 2**30 / total)
    torch.cuda.set_per_process_memory_fraction(fraction, info.index)
    return (f"{PROFILE_ENV}={active_profile().key}: torch's allocator is capped at {info.memory_gb:.1f} GiB, the "
            f"{info.name}'s memory ({fraction:.1%} of the {info.rehearsed_on}'s {total / 2**30:.1f} GiB).")


_announced: list = []


def datasheet_row(gpu_name: str) -> tuple:
    """(bf16, fp16, fp8 TFLOP/s, GB/s) for the first table entry whose key is in ``gpu_name``; Nones if none is."""
    for key, *row in _DATASHEET:
        if key.lower() in gpu_name.lower():
            return tuple(row)
    return (None, None, None, None)


def device_info(index: int | None = None) -> DeviceInfo:
    """The GPU's facts as the course sees them: the real GPU, or the ``COURSE_GPU`` profile's."""
    if not has_gpu():
        require_gpu()
    index = torch.cuda.current_device() if index is None else index
    return _device_info(index, active_profile())


@functools.lru_cache(maxsize=None)
def _device_info(index: int, profile: Profile | None) -> DeviceInfo:
    props = torch.cuda.get_device_properties(index)
    l2_bytes = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)  # real in any case: the flush must cover it
    gpu = profile or GPU(props.name, (props.major, props.minor), props.multi_processor_count, props.total_memory / 2**30)
    bf16, fp16, fp8, gbps = datasheet_row(gpu.name)
    return DeviceInfo(name=gpu.name, sm=gpu.sm, sm_count=gpu.sm_count, memory_gb=gpu.memory_gb, index=index,
                      l2_bytes=l2_bytes, datasheet_tflops={"bfloat16": bf16, "float16": fp16, "float8_e4m3fn": fp8},
                      datasheet_gbps=gbps, rehearsed_on=props.name if profile is not None else None)


def working_dtype(device: DeviceInfo | None = None) -> torch.dtype:
    """bf16 on Ampere (sm80) and newer, fp16 before that."""
    device = device or require_gpu()
    return torch.bfloat16 if device.sm >= (8, 0) else torch.float16


# ---------------------------------------------------------------- versions
def versions() -> dict:
    """Versions that decide what runs (GPU-free parts work without a GPU)."""
    info = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda (torch build)": torch.version.cuda,
    }
    try:
        from .libcudnn import load_cudnn, loaded_library
        from .paths import tidy_paths

        cudnn = load_cudnn()
        info["cudnn frontend"] = cudnn.__version__
        info["cudnn backend"] = cudnn.backend_version_string()
        info["libcudnn"] = tidy_paths(loaded_library())
    except Exception as exc:  # report, don't fail: this feeds an environment table
        from .paths import tidy_paths

        info["cudnn backend"] = tidy_paths(f"unavailable ({exc})")
    if has_gpu():
        d = device_info()
        info["gpu"] = d.name
        info["sm"] = f"{d.sm[0]}.{d.sm[1]}"
        info["driver"] = _driver_version()
    return info


def _driver_version() -> str | None:
    try:
        import subprocess

        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError, IndexError):
        return None


def backend_version() -> int:
    """cuDNN backend version as an int (9.19.0 -> 91900); 0 when no libcudnn loads."""
    try:
        from .libcudnn import load_cudnn

        return int(load_cudnn().backend_version())
    except Exception:
        return 0


# ---------------------------------------------------------------- the GPU's state now: clock, power, throttling
# NVML's clock-event ("throttle") reasons, bit -> short name (nvml.h, nvmlClocksEventReason*)
CLOCK_EVENT_REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
                       0x8: "hw_slowdown", 0x10: "sync_boost", 0x20: "sw_thermal_slowdown",
                       0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}


def clock_event_names(mask: int) -> list[str]:
    """The names of the reasons set in an NVML clock-event mask, lowest bit first (unknown bits as hex)."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    return names + ([hex(unknown)] if unknown else [])


@functools.lru_cache(maxsize=None)
def _nvml_handle(index: int):
    """pynvml and the NVML handle of torch's device ``index`` (found by UUID, so CUDA_VISIBLE_DEVICES is
    respected; by index only when no such variable reorders the devices). Raises what it meets."""
    import pynvml

    pynvml.nvmlInit()
    try:
        uuid = str(torch.cuda.get_device_properties(index).uuid).removeprefix("GPU-")
        return pynvml, pynvml.nvmlDeviceGetHandleByUUID(f"GPU-{uuid}".encode())
    except Exception:
        if os.environ.get("CUDA_VISIBLE_DEVICES"):
            raise
        return pynvml, pynvml.nvmlDeviceGetHandleByIndex(index)


def gpu_clocks(index: int | None = None) -> dict:
    """The GPU's state now, from NVML: ``sm_mhz`` (SM clock), ``max_sm_mhz``, ``power_w`` (draw, NVML's own
    averaging), ``power_limit_w`` (the enforced power limit the board is held under), ``throttle`` (why the
    clock is held down: NVML's clock-event reasons, e.g. ``["sw_power_cap"]``)
    and ``reason`` ("" when read, else why not). Never raises: without pynvml (the ``nvidia-ml-py`` package),
    without a GPU, or where NVML refuses, the numbers are NaN, ``throttle`` is empty and ``reason`` says why."""
    nan = float("nan")
    state = dict(sm_mhz=nan, max_sm_mhz=nan, power_w=nan, power_limit_w=nan, throttle=[], reason="")
    try:
        if not has_gpu():
            return dict(state, reason="no GPU")
        pynvml, handle = _nvml_handle(torch.cuda.current_device() if index is None else index)
    except ImportError:
        return dict(state, reason="pynvml is not installed (pip install nvidia-ml-py)")
    except Exception as exc:  # NVML missing, or this device not found in it
        return dict(state, reason=f"NVML: {type(exc).__name__}: {exc}"[:120])
    sm = getattr(pynvml, "NVML_CLOCK_SM", 1)
    events = (getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)   # the newer name of ...
              or getattr(pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None))   # ... the older one
    reads = dict(sm_mhz=lambda: float(pynvml.nvmlDeviceGetClockInfo(handle, sm)),
                 max_sm_mhz=lambda: float(pynvml.nvmlDeviceGetMaxClockInfo(handle, sm)),
                 power_w=lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                 power_limit_w=lambda: pynvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0,   # mW, like power
                 throttle=lambda: clock_event_names(int(events(handle))))
    for key, read in reads.items():
        try:
            state[key] = read()
        except Exception as exc:  # one quantity this GPU or driver does not report: keep the others
            state["reason"] = state["reason"] or f"{key}: {type(exc).__name__}"
    return state


@contextmanager
def sample_clocks(interval_s: float = 0.01, index: int | None = None):
    """Read ``gpu_clocks()`` every ``interval_s`` seconds in a background thread while the ``with`` block runs.
    Yields a dict that is filled when the block ends: ``sm_mhz`` (mean of the samples), ``sm_mhz_min``,
    ``power_w`` (mean), ``power_w_max`` (the highest sample), ``power_limit_w`` (the least enforced limit read),
    ``throttle`` (every reason seen, sorted), ``samples`` (how many were read) and
    ``reason`` (why none were, else ""). A clock read once after the GPU has gone idle can show the full clock
    again; sampled while the work runs, it shows the clock the work ran at. Never raises on its own account."""
    index = torch.cuda.current_device() if index is None and has_gpu() else index   # the caller's device
    result = dict(sm_mhz=float("nan"), sm_mhz_min=float("nan"), power_w=float("nan"), power_w_max=float("nan"),
                  power_limit_w=float("nan"), throttle=[], samples=0, reason="")
    seen, stop = [], threading.Event()

    def poll():
        while True:
            state = gpu_clocks(index)
            if not math.isnan(state["sm_mhz"]):
                seen.append(state)
            elif not seen:  # nothing to read here (no pynvml, no GPU, NVML refuses): stop trying
                result["reason"] = state["reason"]
                return
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=poll, name="sample_clocks", daemon=True)
    thread.start()
    try:
        yield result
    finally:
        stop.set()
        thread.join()
        result.update(_clock_summary(seen))


def _clock_summary(samples: list) -> dict:
    """Mean and least SM clock, mean and highest power, the least enforced power limit and every throttle reason
    of ``gpu_clocks()`` samples (none: {})."""
    if not samples:
        return {}
    clocks = [s["sm_mhz"] for s in samples]
    powers = [s["power_w"] for s in samples if not math.isnan(s["power_w"])]
    limits = [s.get("power_limit_w", math.nan) for s in samples]
    limits = [w for w in limits if not math.isnan(w)]
    return dict(sm_mhz=sum(clocks) / len(clocks), sm_mhz_min=min(clocks),
                power_w=sum(powers) / len(powers) if powers else float("nan"),
                power_w_max=max(powers) if powers else float("nan"),
                power_limit_w=min(limits) if limits else float("nan"),
                throttle=sorted({name for s in samples for name in s["throttle"]}), samples=len(samples))


def power_verdict(c: dict) -> str:
    """Whether the window ``c`` (what ``sample_clocks()`` yields: ``samples``, ``reason``, ``power_w_max``,
    ``power_limit_w``, ``throttle``) shows a power cap: capped only when NVML's ``sw_power_cap`` flag was seen AND
    the highest power sample came within 10% of the enforced limit. The flag alone proves nothing: NVML averages
    power over time, idle gaps included, so a draw far below the limit neither shows nor rules out a cap."""
    if not c.get("samples"):
        return f"clock and power not read ({c.get('reason') or 'no samples'}): no verdict on a power cap"
    top, limit = c.get("power_w_max", math.nan), c.get("power_limit_w", math.nan)
    if math.isnan(top) or math.isnan(limit) or limit <= 0:
        return "power or power limit not read: no verdict on a power cap"
    flagged = "sw_power_cap" in c.get("throttle", [])
    if flagged and top >= 0.9 * limit:
        return (f"power-capped: the draw reached {top / limit:.0%} of the enforced limit and the driver lowered "
                f"the SM clock")
    if flagged:
        return (f"the cap flag was seen but the highest power sample is {top / limit:.0%} of the limit: NVML "
                f"averages power over time, idle gaps included, so this window neither shows nor rules out a cap")
    return f"not power-capped: no cap flag, and the draw peaked at {top / limit:.0%} of the limit"
