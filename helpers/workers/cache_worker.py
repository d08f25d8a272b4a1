"""Notebook 07's worker: builds measured in a fresh process, where nothing compiled earlier can help.

    python -m helpers.workers.cache_worker conv --batch 24 --channels 128 --filters 128 --size 28 [--cache FILE]
    python -m helpers.workers.cache_worker mlp --mode pinned --tokens 128 384 1000 2048 --hidden 1024 --ffn 4096

``conv``: the first dynamic-shape build of conv → bias → ReLU, with an empty kernel cache or with one loaded
from disk (``--cache``). Before it, an untimed static build of another batch size loads cuDNN's libraries; the
runtime compiler is *not* warmed up, so a cold build pays its start-up, as a restarted server would.

``mlp``: matmul → bias → GELU built for every token count in one build mode (``--mode``):

- ``static``: an ordinary build per token count (no kernel cache, no dynamic shapes);
- ``heuristics``: dynamic shapes and one kernel cache; the heuristics choose the configuration per token count;
- ``pinned``: dynamic shapes and one kernel cache; the first token count's configuration (engine and knobs) is
  replayed for the others (``build(pin=...)``: ``create_execution_plan``; the heuristics step in where it is
  refused).

Both the libraries and the runtime compiler are warmed up first (a static and a dynamic conv build: another
topology, so no MLP kernel is compiled ahead), so every mode's first build is a compile, not a start-up. After
all builds, each graph is timed per call (``H.call_time``) and on the GPU alone (``gpu_ms_or_reason``), then
checked against PyTorch.

Prints one line, ``RESULT {json}``. conv: build_ms (the measured build), load_ms (reading and loading the cache
file), warmup_ms, ok and check. mlp: mode, warmup_ms, ok and ``rows``, one per token count with tokens,
build_ms, plan, how (heuristics / pinned / pin refused), call_ms, gpu_ms (null where capture fails), ok, check.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

import helpers as H
from helpers.graphs import build
from helpers.timing.gpu import gpu_ms_or_reason
from helpers.recipes import conv_bias_relu, matmul_bias_act

MLP_MODES = ("static", "heuristics", "pinned")


def _ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


def first_build(batch: int, c: int, k: int, hw: int, rs: int, cache_path: str | None) -> dict:
    """The conv mode: one dynamic-shape build of ``batch`` with an empty cache or the one in ``cache_path``."""
    dtype = H.working_dtype()
    pad = rs // 2
    t0 = time.perf_counter()
    warm = conv_bias_relu.make_tensors(2, c, hw, k, rs, pad, dtype=dtype)
    build(conv_bias_relu.graph(warm, padding=pad)[0])        # untimed library warm-up, static, no cache
    warmup_ms = _ms_since(t0)
    cudnn = H.load_cudnn()
    cache = cudnn.create_kernel_cache()
    load_ms = 0.0
    if cache_path:
        t0 = time.perf_counter()
        with open(cache_path) as f:                            # reading the file and loading it, both timed
            cache.deserialize(f.read())
        load_ms = _ms_since(t0)
    t = conv_bias_relu.make_tensors(batch, c, hw, k, rs, pad, dtype=dtype)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graph, io = conv_bias_relu.graph(t, padding=pad, kernel_cache=cache, is_dynamic_shape_enabled=True)
    build(graph)                                             # the measured build
    build_ms = _ms_since(t0)
    H.poison_(t["y"])
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()
    verdict = H.check(f"fresh process, batch {batch}", t["y"], conv_bias_relu.reference(t, padding=pad),
                      raise_on_fail=False, quiet=True)
    return {"build_ms": build_ms, "load_ms": load_ms, "warmup_ms": warmup_ms, "ok": verdict.ok, "check": str(verdict)}


def build_mlp(t: dict, *, cache=None, dynamic: bool = False, pin=None):
    """gelu(x @ w + b) for the tensors ``t``, built: ``(graph, io, plan index)``, as notebook 07's ``mlp_graph`` and
    ``build_plan`` build it: ``build(pick="first")`` builds the heuristics' first candidate that builds; with
    ``pin=(engine_id, knobs)``, ``build(pin=pin)`` builds exactly that configuration."""
    graph, io = matmul_bias_act.graph(t, kernel_cache=cache, is_dynamic_shape_enabled=dynamic)
    index = build(graph, pick="first", pin=pin).plan       # compiles the kernel, or finds it in the cache
    io.check_buffers()
    return graph, io, index


def _warm_up(dtype: torch.dtype) -> float:
    """Libraries and the runtime compiler, on a conv (another topology): a static and a dynamic build, untimed."""
    t0 = time.perf_counter()
    warm = conv_bias_relu.make_tensors(2, 16, 8, 16, dtype=dtype)
    build(conv_bias_relu.graph(warm)[0])
    build(conv_bias_relu.graph(warm, is_dynamic_shape_enabled=True)[0])
    return _ms_since(t0)


def mlp_sweep(mode: str, tokens: list[int], hidden: int, ffn: int, *, warmup: int = 5, iters: int = 20) -> dict:
    """The mlp mode: build every token count the ``mode`` way, then time and check each graph."""
    if mode not in MLP_MODES:
        raise ValueError(f"mode must be one of {', '.join(MLP_MODES)}, got {mode!r}")
    cudnn = H.load_cudnn()
    dtype = H.working_dtype()
    warmup_ms = _warm_up(dtype)
    cache = None if mode == "static" else cudnn.create_kernel_cache()
    rows, built, pin = [], {}, None
    for n in tokens:
        t = matmul_bias_act.make_tensors(1, n, hidden, ffn, dtype=dtype)
        torch.cuda.synchronize()
        how = "heuristics"
        t0 = time.perf_counter()
        if pin is not None:
            try:
                graph, io, index = build_mlp(t, cache=cache, dynamic=True, pin=pin)
                how = "pinned"
            except Exception as exc:  # the configuration refuses this size: the heuristics choose
                graph, io, index = build_mlp(t, cache=cache, dynamic=True)
                how = f"pin refused ({type(exc).__name__}), heuristics"
        else:
            graph, io, index = build_mlp(t, cache=cache, dynamic=mode != "static")
        build_ms = _ms_since(t0)
        if mode == "pinned" and pin is None:
            pin = graph.get_engine_and_knobs_at_index(index)   # the first token count's configuration
        rows.append({"tokens": n, "build_ms": build_ms, "plan": graph.get_plan_name_at_index(index), "how": how})
        built[n] = (graph, io)
    handle = H.get_handle()
    for row in rows:                                           # timing only after every build is done
        graph, io = built[row["tokens"]]
        pack, workspace = io.pack(), H.workspace_for(graph)

        def run(graph=graph, pack=pack, workspace=workspace):
            graph.execute(pack, workspace, handle=handle)

        row["call_ms"] = H.call_time(run, warmup=warmup, iters=iters).median_ms
        gpu_ms, no_capture = gpu_ms_or_reason(run, iters=iters)
        row["gpu_ms"] = None if no_capture else gpu_ms       # JSON null where the calls cannot be captured
        t = io.buffers
        H.poison_(t["y"])
        graph.execute(io.pack(), workspace, handle=H.get_handle())
        torch.cuda.synchronize()
        verdict = H.check(f"{mode}, {row['tokens']} tokens", t["y"], matmul_bias_act.reference(t),
                          raise_on_fail=False, quiet=True)
        row.update(ok=verdict.ok, check=str(verdict))
    return {"mode": mode, "warmup_ms": warmup_ms, "ok": all(r["ok"] for r in rows), "rows": rows}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="graph", required=True, metavar="{conv,mlp}")
    conv = sub.add_parser("conv", help="first dynamic-shape conv build, empty cache or --cache FILE")
    conv.add_argument("--batch", type=int, required=True)
    conv.add_argument("--channels", type=int, required=True)
    conv.add_argument("--filters", type=int, required=True)
    conv.add_argument("--size", type=int, required=True, help="input height = width")
    conv.add_argument("--filter-size", type=int, default=3)
    conv.add_argument("--cache", help="a kernel cache written by cache.serialize() (default: start empty)")
    mlp = sub.add_parser("mlp", help="matmul+bias+GELU per token count in one build mode, then timed")
    mlp.add_argument("--mode", choices=MLP_MODES, required=True)
    mlp.add_argument("--tokens", type=int, nargs="+", required=True, help="token counts, built in this order")
    mlp.add_argument("--hidden", type=int, required=True, help="K: x is [1, tokens, hidden]")
    mlp.add_argument("--ffn", type=int, required=True, help="N: w is [1, hidden, ffn]")
    mlp.add_argument("--warmup", type=int, default=5, help="untimed calls before timing")
    mlp.add_argument("--iters", type=int, default=20, help="timed calls (per call and GPU time)")
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.graph == "conv":
        result = first_build(args.batch, args.channels, args.filters, args.size, args.filter_size, args.cache)
    else:
        result = mlp_sweep(args.mode, args.tokens, args.hidden, args.ffn, warmup=args.warmup, iters=args.iters)
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
