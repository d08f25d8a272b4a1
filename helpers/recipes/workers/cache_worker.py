"""Notebook 07's worker: the first dynamic-shape build of conv → bias → ReLU in a fresh process,
with an empty kernel cache or with one loaded from disk.

    python -m helpers.recipes.workers.cache_worker --batch 24 --channels 128 --filters 128 --size 28 [--cache FILE]

Prints one line, ``RESULT {json}``: build_ms (the measured build), load_ms (reading and loading the cache file),
warmup_ms (an untimed static build that loads the libraries first), ok and check (the output against
PyTorch).
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import helpers as H
from helpers.recipes import conv_bias_relu


def first_build(batch: int, c: int, k: int, hw: int, rs: int, cache_path: str | None) -> dict:
    dtype = H.working_dtype()
    pad = rs // 2
    t0 = time.perf_counter()
    warm = conv_bias_relu.make_tensors(2, c, hw, k, rs, pad, dtype=dtype)
    H.build(conv_bias_relu.graph(warm, padding=pad)[0])        # untimed library warm-up, static, no cache
    warmup_ms = (time.perf_counter() - t0) * 1e3
    cudnn = H.load_cudnn()
    cache = cudnn.create_kernel_cache()
    load_ms = 0.0
    if cache_path:
        t0 = time.perf_counter()
        with open(cache_path) as f:                            # reading the file and loading it, both timed
            cache.deserialize(f.read())
        load_ms = (time.perf_counter() - t0) * 1e3
    t = conv_bias_relu.make_tensors(batch, c, hw, k, rs, pad, dtype=dtype)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graph, io = conv_bias_relu.graph(t, padding=pad, kernel_cache=cache, is_dynamic_shape_enabled=True)
    H.build(graph)                                             # the measured build
    build_ms = (time.perf_counter() - t0) * 1e3
    H.poison_(t["y"])
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()
    verdict = H.check(f"fresh process, batch {batch}", t["y"], conv_bias_relu.reference(t, padding=pad),
                      raise_on_fail=False, quiet=True)
    return {"build_ms": build_ms, "load_ms": load_ms, "warmup_ms": warmup_ms, "ok": verdict.ok, "check": str(verdict)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--channels", type=int, required=True)
    parser.add_argument("--filters", type=int, required=True)
    parser.add_argument("--size", type=int, required=True, help="input height = width")
    parser.add_argument("--filter-size", type=int, default=3)
    parser.add_argument("--cache", help="a kernel cache written by cache.serialize() (default: start empty)")
    args = parser.parse_args(argv)
    torch.backends.cudnn.allow_tf32 = False
    result = first_build(args.batch, args.channels, args.filters, args.size, args.filter_size, args.cache)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
