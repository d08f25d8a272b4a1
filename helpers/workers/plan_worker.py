"""Notebook 06's worker: cold-build or deserialize cuDNN graphs in a fresh process, timing each.

    python -m helpers.workers.plan_worker build WORKDIR   # builds, serializes, saves inputs and outputs
    python -m helpers.workers.plan_worker load WORKDIR    # deserializes what ``build`` saved, runs it

Reads ``WORKDIR/job.json`` (``{"dtype": "bfloat16", "graphs": {name: spec}, "save_outputs": true}``; a spec
has ``kind`` = conv | matmul | sdpa, ``shape``, and optionally ``plan_name`` + ``heuristic_modes`` for a tuned
plan) and writes ``WORKDIR/report-<mode>.json``: per graph the build or load time, and (build) the chosen plan's
name and behaviour notes. Inputs come from a fixed seed and are saved by ``build``, so both processes agree;
outputs are saved for the notebook's checks unless ``save_outputs`` is false (repeat runs only time).
"""
from __future__ import annotations

import time

T_START = time.time()  # epoch seconds: the notebook subtracts its launch time (start-up + imports)

import json  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

import helpers as H  # noqa: E402
from helpers.graphs import GraphIO, build  # noqa: E402
from helpers.recipes import conv_bias_relu, sdpa  # noqa: E402
from helpers.recipes import new_graph  # noqa: E402

OUTPUTS = {"conv": "y", "matmul": "c", "sdpa": "o"}


def make_inputs(spec: dict, dtype: torch.dtype, seed: int = 0) -> dict:
    """The graph's tensors for ``spec`` (output buffers included), from a fixed seed."""
    s = spec["shape"]
    if spec["kind"] == "conv":
        return conv_bias_relu.make_tensors(s["N"], s["C"], s["H"], s["K"], dtype=dtype, seed=seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def rand(*shape):
        return torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)

    if spec["kind"] == "matmul":
        return dict(a=rand(1, s["M"], s["K"]), b=rand(1, s["K"], s["N"]) / s["K"] ** 0.5,
                    c=torch.empty(1, s["M"], s["N"], device="cuda", dtype=dtype))
    if spec["kind"] == "sdpa":
        return dict(q=rand(s["B"], s["H"], s["S"], s["D"]), k=rand(s["B"], s["H"], s["S"], s["D"]),
                    v=rand(s["B"], s["H"], s["S"], s["D"]))
    raise ValueError(f"unknown graph kind {spec['kind']!r}")


def matmul_graph(t: dict, handle=None):
    """A plain batched matmul C = A @ B."""
    graph = new_graph(t["a"].dtype, handle)
    io = GraphIO(graph, dtype=t["a"].dtype)
    io.output("c", graph.matmul(A=io.input("a", t["a"]), B=io.input("b", t["b"]), name="matmul"), t["c"])
    return graph, io


def make_graph(kind: str, t: dict, handle=None):
    """``(graph, io)`` for one kind, not yet built: conv and SDPA come from the recipes of 02 and 05.
    SDPA's output buffer is created here and added to ``t``."""
    if kind == "conv":
        return conv_bias_relu.graph(t, handle=handle)
    if kind == "matmul":
        return matmul_graph(t, handle)
    if kind == "sdpa":
        graph, io, outputs = sdpa.forward_graph(t["q"], t["k"], t["v"], causal=True, generate_stats=False,
                                                attn_scale=1.0 / math.sqrt(t["q"].shape[-1]), handle=handle)
        t["o"] = outputs["o"]
        return graph, io
    raise ValueError(f"unknown graph kind {kind!r}")


def build_plan(graph, spec: dict) -> int:
    """Build ``graph``; the selected plan's index. Without ``spec["plan_name"]`` the heuristics' first choice
    that builds (the plan ``build_plans`` selects); with it, that plan, found by name among the candidates of
    ``spec["heuristic_modes"]`` (notebook 03's saved choice)."""
    return build(graph, heuristics=spec.get("heuristic_modes"), pick=spec.get("plan_name") or "first").plan


def behavior_notes(graph) -> list[str]:
    """The selected plan's behaviour notes by name (``RUNTIME_COMPILATION``, ``CUBLASLT_DEPENDENCY`` ...)."""
    return [getattr(note, "name", str(note)) for note in graph.get_behavior_notes()]


def warm_up(dtype: torch.dtype) -> None:
    """Build, serialize, deserialize and run one tiny pointwise graph, so the one-time costs every graph
    shares (library loading, the handle, the first build and the first deserialize) are charged to nobody.
    An engine's own first use is not covered: the notebook lists a graph twice to measure it."""
    cudnn = H.load_cudnn()
    a = torch.randn(8, 8, 8, device="cuda", dtype=dtype)
    out = torch.empty_like(a)
    graph = new_graph(dtype)
    io = GraphIO(graph, dtype=dtype)
    io.output("out", graph.relu(input=io.input("a", a), name="relu"), out)
    build(graph)
    graph.execute(io.pack(), H.workspace_for(graph), handle=H.get_handle())
    again = cudnn.pygraph(handle=H.get_handle())
    again.deserialize(H.get_handle(), graph.serialize(as_bytes=True))
    again.execute(io.pack(), H.workspace_for(again), handle=H.get_handle())
    torch.cuda.synchronize()


def run(graph, pack: dict, out: torch.Tensor) -> None:
    H.poison_(out)
    graph.execute(pack, H.workspace_for(graph), handle=H.get_handle())
    torch.cuda.synchronize()


def build_one(name: str, spec: dict, dtype: torch.dtype, work: Path, save_outputs: bool = True) -> dict:
    t = make_inputs(spec, dtype)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graph, io = make_graph(spec["kind"], t)
    plan_index = build_plan(graph, spec)
    ms = (time.perf_counter() - t0) * 1e3
    blob = graph.serialize(as_bytes=True)
    (work / f"{name}.plan").write_bytes(blob)
    (work / f"{name}.uids.json").write_text(json.dumps(io.uids))
    torch.save(t, work / f"{name}.inputs.pt")
    run(graph, io.pack(), t[OUTPUTS[spec["kind"]]])
    if save_outputs:
        torch.save(t[OUTPUTS[spec["kind"]]].cpu(), work / f"{name}.build.out.pt")
    try:  # after serialize and run: it times nothing, and a failed query must not fail the graph
        notes = behavior_notes(graph)
        plan = graph.get_plan_name_at_index(plan_index)
    except Exception as exc:
        notes, plan = [], f"unknown ({H.first_line(exc, 80)})"
    return {"build_ms": ms, "plan_bytes": len(blob), "plan": plan, "notes": notes}


def load_one(name: str, spec: dict, work: Path, save_outputs: bool = True) -> dict:
    cudnn = H.load_cudnn()
    blob = (work / f"{name}.plan").read_bytes()
    uids = json.loads((work / f"{name}.uids.json").read_text())
    t = torch.load(work / f"{name}.inputs.pt", map_location="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    graph = cudnn.pygraph(handle=H.get_handle())     # a fresh, empty graph ...
    graph.deserialize(H.get_handle(), blob)          # ... receives the plan
    ms = (time.perf_counter() - t0) * 1e3
    run(graph, {uids[n]: t[n] for n in uids}, t[OUTPUTS[spec["kind"]]])   # bound by UID only
    if save_outputs:
        torch.save(t[OUTPUTS[spec["kind"]]].cpu(), work / f"{name}.load.out.pt")
    return {"load_ms": ms}


def main(mode: str, workdir: str) -> None:
    if mode not in ("build", "load"):
        raise SystemExit(f"mode must be build or load, got {mode!r}")
    H.load_cudnn()
    imported = time.time()
    work = Path(workdir)
    job = json.loads((work / "job.json").read_text())
    dtype = getattr(torch, job["dtype"])
    save_outputs = bool(job.get("save_outputs", True))
    warm_up(dtype)
    report = {"started_at": T_START, "imported_at": imported, "graphs": {}}
    for name, spec in job["graphs"].items():
        try:
            entry = (build_one(name, spec, dtype, work, save_outputs) if mode == "build"
                     else load_one(name, spec, work, save_outputs))
        except Exception as exc:  # report it; the notebook says which graph failed and why
            entry = {"error": H.first_line(exc, 200)}
        report["graphs"][name] = entry
    report["in_process_s"] = time.time() - T_START
    (work / f"report-{mode}.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:3])
