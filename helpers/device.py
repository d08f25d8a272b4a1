"""Device facts, the working dtype, and feature gates that say *why* not."""
from __future__ import annotations

import functools
import platform
from dataclasses import dataclass, field

import torch

from .errors import FeatureUnavailable, NoGPUError

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
class DeviceInfo:
    name: str
    index: int
    sm: tuple[int, int]
    sm_count: int
    memory_gb: float
    l2_bytes: int
    peak_tflops: dict = field(default_factory=dict)  # {"bf16": ..., "fp16": ..., "fp8": ...}; None when unknown
    peak_gbps: float | None = None

    @property
    def sm_version(self) -> int:
        return 10 * self.sm[0] + self.sm[1]

    @property
    def slug(self) -> str:
        """File-name-safe GPU name, e.g. ``nvidia-h200``."""
        return slugify(self.name)


def slugify(gpu_name: str) -> str:
    """File-name-safe GPU name: 'NVIDIA H200' -> 'nvidia-h200'."""
    return "".join(c if c.isalnum() else "-" for c in gpu_name.lower()).strip("-").replace("--", "-")


def has_gpu() -> bool:
    return torch.cuda.is_available() and torch.cuda.device_count() > 0


def require_gpu() -> "DeviceInfo":
    """The current GPU's facts, or ``NoGPUError`` with one clear line."""
    if not has_gpu():
        reason = "torch is a CPU-only build" if torch.version.cuda is None else "no CUDA device is visible to torch"
        raise NoGPUError(f"No NVIDIA GPU found ({reason}): these notebooks need one — use a GPU machine or Colab (Runtime → GPU).")
    return device_info()


@functools.lru_cache(maxsize=None)
def device_info(index: int | None = None) -> DeviceInfo:
    if not has_gpu():
        require_gpu()
    index = torch.cuda.current_device() if index is None else index
    props = torch.cuda.get_device_properties(index)
    bf16 = fp16 = fp8 = gbps = None
    for key, *row in _DATASHEET:
        if key.lower() in props.name.lower():
            bf16, fp16, fp8, gbps = row
            break
    return DeviceInfo(
        name=props.name,
        index=index,
        sm=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        memory_gb=props.total_memory / 2**30,
        l2_bytes=int(getattr(props, "L2_cache_size", 0) or 50 * 2**20),
        peak_tflops={"bf16": bf16, "fp16": fp16, "fp8": fp8},
        peak_gbps=gbps,
    )


def working_dtype(device: DeviceInfo | None = None) -> torch.dtype:
    """bf16 on Ampere (sm80) and newer, fp16 before that."""
    device = device or require_gpu()
    return torch.bfloat16 if device.sm >= (8, 0) else torch.float16


def dtype_key(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
            getattr(torch, "float8_e4m3fn", None): "fp8"}.get(dtype, str(dtype).replace("torch.", ""))


# ---------------------------------------------------------------- measured peaks
@functools.lru_cache(maxsize=None)
def measured_peak_tflops(dtype: torch.dtype = torch.bfloat16, n: int = 8192) -> float:
    """Dense matmul rate torch reaches on this GPU (random data, median of runs)."""
    from .timing import benchmark

    require_gpu()
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    t = benchmark(lambda: a @ b, warmup=3, iters=10, flush_l2=False)
    del a, b
    return 2 * n**3 / (t.median_ms * 1e-3) / 1e12


@functools.lru_cache(maxsize=None)
def measured_bandwidth_gbps(nbytes: int = 2 * 2**30) -> float:
    """Device-to-device copy rate, counting bytes read plus bytes written."""
    from .timing import benchmark

    require_gpu()
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = benchmark(lambda: dst.copy_(src), warmup=3, iters=10, flush_l2=False)
    del src, dst
    return 2 * nbytes / (t.median_ms * 1e-3) / 1e9


def peak_tflops(dtype: torch.dtype, measured: bool = True) -> float:
    """The ceiling to quote '% of peak' against: measured by default, datasheet otherwise."""
    if measured:
        return measured_peak_tflops(dtype)
    value = require_gpu().peak_tflops.get(dtype_key(dtype))
    return value if value is not None else measured_peak_tflops(dtype)


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


# ---------------------------------------------------------------- feature gates
@dataclass(frozen=True)
class Gate:
    feature: str
    ok: bool
    reason: str

    def __bool__(self) -> bool:
        return self.ok

    def require(self) -> None:
        """Stop here with one clear line when the feature is missing."""
        if not self.ok:
            raise FeatureUnavailable(f"{self.feature}: {self.reason}")


# feature -> (minimum SM as (major, minor), minimum backend as int, human description)
FEATURES = {
    "bf16":                 ((8, 0), 0,     "bfloat16 tensor cores"),
    "sdpa":                 ((8, 0), 90000, "fused attention (SDPA) forward and backward"),
    "fp8":                  ((8, 9), 90100, "FP8 (e4m3) matmul"),
    "kernel_cache":         ((0, 0), 90400, "kernel cache / dynamic shapes"),
    "kernel_cache_serialize": ((0, 0), 91000, "serializing a kernel cache"),
    "native_cuda_graph":    ((0, 0), 90500, "cuDNN's native CUDA-graph API"),
    "override_shapes":      ((0, 0), 92100, "execute-time override shapes"),
}
_BLOCKED_BACKENDS = {"sdpa": {91000, 91001}}  # known-bad SDPA releases


def _fmt_backend(v: int) -> str:
    return f"{v // 10000}.{(v // 100) % 100}.{v % 100}"


def gate(feature: str) -> Gate:
    """Can this machine run ``feature``? ``Gate.ok`` plus a reason either way."""
    if feature not in FEATURES:
        raise ValueError(f"feature must be one of {sorted(FEATURES)}, got {feature!r}")
    min_sm, min_backend, what = FEATURES[feature]
    if not has_gpu():
        return Gate(feature, False, "no NVIDIA GPU is visible")
    d = device_info()
    if feature == "fp8" and d.sm[0] == 8 and d.sm < (8, 9):
        return Gate(feature, False, f"{what} needs sm89 (Ada) or sm90+ (Hopper); this {d.name} is sm{d.sm_version}")
    if d.sm < min_sm:
        return Gate(feature, False, f"{what} needs sm{10 * min_sm[0] + min_sm[1]}+; this {d.name} is sm{d.sm_version}")
    bv = backend_version()
    if bv == 0:
        return Gate(feature, False, "no libcudnn could be loaded")
    if bv < min_backend:
        return Gate(feature, False, f"{what} needs cuDNN backend ≥ {_fmt_backend(min_backend)}; loaded {_fmt_backend(bv)}")
    if bv in _BLOCKED_BACKENDS.get(feature, ()):
        return Gate(feature, False, f"cuDNN {_fmt_backend(bv)} has known {what} bugs; upgrade the backend")
    return Gate(feature, True, f"supported on {d.name} (sm{d.sm_version}) with cuDNN {_fmt_backend(bv)}")


def feature_table():
    """A pandas table: feature, supported?, reason."""
    import pandas as pd

    rows = [{"feature": FEATURES[f][2], "key": f, "supported": g.ok, "why": g.reason} for f in FEATURES for g in [gate(f)]]
    return pd.DataFrame(rows).set_index("key")


def notebook_requirements_met(requires: dict) -> tuple[bool, str]:
    """Evaluate a notebook's ``requires`` metadata (gpu, min_sm, min_cudnn, features)."""
    if requires.get("gpu", True) and not has_gpu():
        return False, "no NVIDIA GPU: this notebook re-executes on a GPU only"
    if not has_gpu():
        return True, ""
    d = device_info()
    min_sm = requires.get("min_sm")
    if min_sm and d.sm_version < int(min_sm):
        return False, f"needs sm{min_sm}+, this {d.name} is sm{d.sm_version}"
    for feature in requires.get("features", []):
        g = gate(feature)
        if not g.ok:
            return False, f"{feature}: {g.reason}"
    return True, ""
