"""Notebook 02's worker: torch.compile of conv → bias → ReLU timed in a fresh process, cudnn.benchmark off or on.

    python -m helpers.workers.conv_compile --cudnn-benchmark off
    python -m helpers.workers.conv_compile --cudnn-benchmark on --n 32 --c 128 --hw 56 --k 256 --dtype bfloat16

Sets ``torch.backends.cudnn.benchmark`` from ``--cudnn-benchmark`` *before* compiling (in a fresh process nothing
was autotuned or compiled before), compiles ``relu(conv2d(x, w, b))`` on NHWC tensors in torch.compile's default
mode (``dynamic=False``), checks its output against float64 PyTorch, and times it with ``H.gpu_time`` (the calls
captured in a CUDA graph, replays timed with CUDA events, the L2 flushed before each; the median of ``--iters``).
The defaults are notebook 02's headline shape.

Prints one line, ``RESULT {json}``: cudnn_benchmark, shape, dtype, compile_s (the first call), median_ms, p10_ms,
p90_ms, iters, ok and check.
"""
from __future__ import annotations

import argparse
import json
import time

from helpers.workers import RESULT_PREFIX

DTYPES = ("bfloat16", "float16")


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cudnn-benchmark", choices=("off", "on"), required=True,
                        help="torch.backends.cudnn.benchmark, set before compiling")
    parser.add_argument("--n", type=int, default=32, help="batch")
    parser.add_argument("--c", type=int, default=128, help="input channels")
    parser.add_argument("--hw", type=int, default=56, help="input height = width")
    parser.add_argument("--k", type=int, default=256, help="output channels")
    parser.add_argument("--rs", type=int, default=3, help="filter height = width")
    parser.add_argument("--pad", type=int, default=1)
    parser.add_argument("--stride", type=int, default=1)
    parser.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="tensors in memory")
    parser.add_argument("--iters", type=int, default=20, help="timed CUDA-graph replays")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for name in ("n", "c", "hw", "k", "rs", "stride", "iters"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be ≥ 1, got {getattr(args, name)}")
    if args.pad < 0 or args.rs > args.hw + 2 * args.pad:
        parser.error(f"the {args.rs}x{args.rs} filter must fit the padded image (hw {args.hw}, pad {args.pad})")
    return args


def result_line(result: dict) -> str:
    """The worker's machine-readable line, as ``H.run_worker`` parses it: ``RESULT {json}``."""
    return RESULT_PREFIX + json.dumps(result)


def measure(args: argparse.Namespace) -> dict:
    import torch
    import torch.nn.functional as F

    import helpers as H
    from helpers.recipes import conv_bias_relu

    H.require_gpu()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = args.cudnn_benchmark == "on"   # before compiling

    def conv_bias_relu_torch(x, w, b):
        return F.relu(F.conv2d(x, w, b.flatten(), stride=args.stride, padding=args.pad))

    t = conv_bias_relu.make_tensors(args.n, args.c, args.hw, args.k, args.rs, args.pad, args.stride,
                                    dtype=getattr(torch, args.dtype), seed=args.seed)
    compiled = torch.compile(conv_bias_relu_torch, dynamic=False)   # the default mode
    t0 = time.perf_counter()
    out = compiled(t["x"], t["w"], t["b"])   # the first call compiles
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    verdict = H.check("torch.compile", out, conv_bias_relu.reference(t, padding=args.pad, stride=args.stride),
                      raise_on_fail=False, quiet=True)
    timing = H.gpu_time(lambda: compiled(t["x"], t["w"], t["b"]), iters=args.iters)
    return {"cudnn_benchmark": args.cudnn_benchmark == "on",
            "shape": {name: getattr(args, name) for name in ("n", "c", "hw", "k", "rs", "pad", "stride")},
            "dtype": args.dtype, "compile_s": compile_s, "median_ms": timing.median_ms,
            "p10_ms": timing.p10_ms, "p90_ms": timing.p90_ms, "iters": timing.runs,
            "ok": verdict.ok, "check": str(verdict)}


def main(argv=None) -> None:
    args = parse_args(argv)
    print(result_line(measure(args)), flush=True)


if __name__ == "__main__":
    main()
