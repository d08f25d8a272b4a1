"""Notebook 06's exercises: the skeletons are "not done" (CPU), the reference answers pass and typical wrong
answers fail with the line that says why (GPU: the checkers build, serialize and run tiny matmuls)."""
import nbformat
from pathlib import Path

import pytest
import torch

import helpers as H
import grader as X
from helpers.recipes import plancache
from tests.support import requires_gpu

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "06_plan_serialization.ipynb"
KEYS = ("06.round_trip", "06.load_or_build")


def test_checkers_are_registered_and_the_solutions_load():
    for key in KEYS:
        assert X.checker_for(key)
        answer = X.solution(key)
        assert callable(answer) and answer.__name__ == key.split(".")[1]
        assert X.unfinished(answer) is None


def test_the_checker_and_the_notebook_agree_on_the_uids():
    from grader import nb06

    nb = nbformat.read(NOTEBOOK, as_version=4)
    learner = [c.source for c in nb.cells if c.cell_type == "code" and 'H.exercise("06.round_trip"' in c.source]
    assert len(learner) == 1 and 'UIDS = {"a": 11, "b": 12, "c": 13}' in learner[0]
    assert nb06.UIDS == {"a": 11, "b": 12, "c": 13}


def test_load_or_build_is_fed_an_entry_from_elsewhere_for_every_fingerprint_field():
    """The checker's foreign entries differ from this machine's fingerprint in one field (two for another GPU
    model: its name and SM version) and together cover every field the plan cache keys on."""
    from grader import nb06

    here = {"gpu": "NVIDIA H200", "sm": 90, "sm_count": 132, "driver": "580.95.05", "cuda_runtime": "13.0",
            "cudnn_backend": 91900, "cudnn_frontend": "1.32.0"}
    assert set(here) == set(plancache.FINGERPRINT_FIELDS)
    changed = set()
    for what, fingerprint in nb06._elsewhere(here):
        assert set(fingerprint) == set(here), what
        differs = {k for k in here if fingerprint[k] != here[k]}
        assert differs and (len(differs) == 1 or differs == {"gpu", "sm"}), what
        changed |= differs
    assert changed == set(plancache.FINGERPRINT_FIELDS)
    no_smi = dict(here, driver=None)   # nvidia-smi missing: an entry from another driver is still foreign
    assert any(fingerprint["driver"] is not None for _, fingerprint in nb06._elsewhere(no_smi))


def test_what_round_trip_returns_is_unpacked_or_refused_in_one_line():
    """Both calls of round_trip go through one unpacking: bytes (or a list of ints) and an empty pygraph."""
    from grader import nb06

    empty = H.load_cudnn(need_gpu=False).pygraph()
    assert nb06._returned(([1, 2], empty)) == (b"\x01\x02", empty)
    with pytest.raises(X.NotDone):
        nb06._returned(None)
    for result, match in [(b"blob", r"^return two things, \(blob, reloaded\); got bytes"),
                          (("text", empty), r"^the blob is a str; return graph.serialize\(as_bytes=True\)"),
                          ((b"blob", "graph"), r"^the second value is a str")]:
        with pytest.raises(X.Wrong, match=match):
            nb06._returned(result)
    assert all(nb06.AGAIN[k] > nb06.SHAPE[k] for k in nb06.SHAPE)   # a stale plan stays inside the second buffers


def test_the_exercise_text_names_the_cache_fingerprint():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    text = "\n".join(c.source for c in nb.cells)
    assert "plancache.current_fingerprint()" in text
    for field in plancache.FINGERPRINT_FIELDS:
        assert f"`{field}`" in text, field


# ---------------------------------------------------------------- wrong answers (GPU)
def _cudnn():
    return H.load_cudnn()


def _matmul(a, b, uids=(11, 12, 13)):
    """C = A @ B, built; a UID of None leaves that tensor's UID to the frontend."""
    cudnn = _cudnn()
    graph = cudnn.pygraph(io_data_type=a.dtype, intermediate_data_type=torch.float32,
                          compute_data_type=torch.float32, handle=H.get_handle())
    ta, tb = graph.tensor_like(a), graph.tensor_like(b)
    tc = graph.matmul(A=ta, B=tb).set_output(True)
    for tensor, uid in zip((ta, tb, tc), uids):
        if uid is not None:
            tensor.set_uid(uid)
    H.build(graph)
    return graph, (ta, tb, tc)


def _reload_and_run(blob, pack):
    cudnn = _cudnn()
    fresh = cudnn.pygraph(handle=H.get_handle())
    fresh.deserialize(H.get_handle(), blob)
    fresh.execute(pack, H.workspace_for(fresh), handle=H.get_handle())
    return fresh


def forgets_set_uid(a, b, c):
    """Works in its own process (it feeds the frontend's automatic UIDs) but the plan has no agreed UIDs."""
    graph, (ta, tb, tc) = _matmul(a, b, uids=(None, None, None))
    blob = graph.serialize(as_bytes=True)
    return blob, _reload_and_run(blob, {ta.uid: a, tb.uid: b, tc.uid: c})


def forgets_the_output_uid(a, b, c):
    graph, (ta, tb, tc) = _matmul(a, b, uids=(11, 12, None))
    blob = graph.serialize(as_bytes=True)
    return blob, _reload_and_run(blob, {11: a, 12: b, tc.uid: c})


def returns_the_built_graph(a, b, c):
    graph, _ = _matmul(a, b)
    graph.execute({11: a, 12: b, 13: c}, H.workspace_for(graph), handle=H.get_handle())
    return graph.serialize(as_bytes=True), graph


def torch_product_next_to_an_unexecuted_reload(a, b, c):
    """The loophole: a real blob, a real (empty, reloaded) graph that never runs, and c from torch."""
    graph, _ = _matmul(a, b)
    blob = graph.serialize(as_bytes=True)
    fresh = _cudnn().pygraph(handle=H.get_handle())
    fresh.deserialize(H.get_handle(), blob)
    c.copy_(a @ b)
    return blob, fresh


def reload_into_scratch_and_torch_into_c(a, b, c):
    graph, _ = _matmul(a, b)
    blob = graph.serialize(as_bytes=True)
    fresh = _reload_and_run(blob, {11: a, 12: b, 13: torch.empty_like(c)})
    c.copy_(a @ b)
    return blob, fresh


def reload_into_scratch_then_copied(a, b, c):
    graph, _ = _matmul(a, b)
    blob = graph.serialize(as_bytes=True)
    scratch = torch.empty_like(c)
    fresh = _reload_and_run(blob, {11: a, 12: b, 13: scratch})
    c.copy_(scratch)
    return blob, fresh


@requires_gpu
@pytest.mark.parametrize("answer, expected", [
    (torch_product_next_to_an_unexecuted_reload,
     "✗ 06.round_trip: torch computed c (aten.bmm): that work belongs inside your cuDNN graph"),
    (reload_into_scratch_and_torch_into_c, "✗ 06.round_trip: torch computed c (aten.bmm)"),
    (reload_into_scratch_then_copied, "✗ 06.round_trip: c holds a copy of a cuDNN result (aten.copy_)"),
    (forgets_set_uid, "✗ 06.round_trip: your plan does not run when fed {11: a, 12: b, 13: c}"),
    (forgets_the_output_uid, "✗ 06.round_trip: your plan does not run when fed {11: a, 12: b, 13: c}"),
    (returns_the_built_graph, "✗ 06.round_trip: the graph you returned holds 1 op(s) of its own"),
])
def test_gpu_round_trip_rejects(capsys, answer, expected):
    verdict = H.exercise("06.round_trip", answer)
    assert verdict.status == "failed"
    assert capsys.readouterr().out.startswith(expected)


# ---------------------------------------------------------------- wrong answers of the issue-50 classes (GPU)
def _relu_matmul(a, b):
    """relu(A @ B) with the agreed UIDs, built: a nearby function that is right only where A @ B >= 0."""
    graph = _cudnn().pygraph(io_data_type=a.dtype, intermediate_data_type=torch.float32,
                             compute_data_type=torch.float32, handle=H.get_handle())
    ta, tb = graph.tensor_like(a).set_uid(11), graph.tensor_like(b).set_uid(12)
    graph.relu(input=graph.matmul(A=ta, B=tb)).set_output(True).set_uid(13)
    H.build(graph)
    return graph


def _in_a_thread(work):
    import threading

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()


def relu_plan_patched_in_a_thread(a, b, c):
    """Work where the tracer does not look: the reloaded plan computes relu(A @ B); a worker thread adds the
    negative part into c afterwards."""
    blob = _relu_matmul(a, b).serialize(as_bytes=True)
    fresh = _reload_and_run(blob, {11: a, 12: b, 13: c})
    _in_a_thread(lambda: c.add_(torch.clamp(a.float() @ b.float(), max=0).to(c.dtype)))
    return blob, fresh


def reload_into_scratch_torch_in_a_thread(a, b, c):
    """Work where the tracer does not look: the reload writes a scratch buffer, c comes from torch in a thread."""
    graph, _ = _matmul(a, b)
    blob = graph.serialize(as_bytes=True)
    fresh = _reload_and_run(blob, {11: a, 12: b, 13: torch.empty_like(c)})
    _in_a_thread(lambda: c.copy_(a @ b))
    return blob, fresh


def round_trip_on_a_side_stream_never_joined(a, b, c):
    """Streams: the reload executes on a side stream the caller's stream never waits for."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        return X.solution("06.round_trip")(a, b, c)


def _memoizing_round_trip():
    kept = []

    def round_trip_reusing_its_first_plan(a, b, c):
        """Inputs read once: the first call's plan serialized once, reloaded and run on every later call's tensors."""
        if not kept:
            graph, _ = _matmul(a, b)
            kept.append(graph.serialize(as_bytes=True))
        return kept[0], _reload_and_run(kept[0], {11: a, 12: b, 13: c})

    return round_trip_reusing_its_first_plan


def _memoizing_load_or_build():
    kept = []

    def load_or_build_keeping_its_first_graph(entry, graph):
        """Inputs read once: decides on the first call and returns that call's graph ever after."""
        if not kept:
            kept.append(X.solution("06.load_or_build")(entry, graph))
        return kept[0]

    return load_or_build_keeping_its_first_graph


@requires_gpu
@pytest.mark.parametrize("key, make, expected", [
    ("06.round_trip", lambda: relu_plan_patched_in_a_thread,
     "✗ 06.round_trip: c changed after your cuDNN graph wrote it"),
    ("06.round_trip", lambda: reload_into_scratch_torch_in_a_thread,
     "✗ 06.round_trip: c was not written by a cuDNN graph: nothing your code ran wrote it"),
    ("06.round_trip", lambda: round_trip_on_a_side_stream_never_joined,
     "✗ 06.round_trip: your graph ran on a side stream (stream "),
    ("06.round_trip", _memoizing_round_trip,
     "✗ 06.round_trip: called again with other tensors (a [1, 96, 48], b [1, 48, 64]): c was never written"),
    ("06.load_or_build", _memoizing_load_or_build,
     "✗ 06.load_or_build: it loaded an entry made on another GPU model"),
], ids=["relu_plan_patched_in_a_thread", "reload_into_scratch_torch_in_a_thread",
        "round_trip_on_a_side_stream_never_joined", "round_trip_reusing_its_first_plan",
        "load_or_build_keeping_its_first_graph"])
def test_gpu_a_wrong_answer_of_each_class_is_rejected(capsys, key, make, expected):
    verdict = H.exercise(key, make())
    assert verdict.status == "failed"
    out = capsys.readouterr().out
    assert out.startswith(expected), out


@requires_gpu
def test_gpu_round_trip_accepts_the_reference(capsys):
    assert H.exercise("06.round_trip", X.solution("06.round_trip"))
    assert capsys.readouterr().out.startswith("✓ 06.round_trip: correct")


def _machine():
    return plancache.current_fingerprint()


def _load(entry):
    fresh = _cudnn().pygraph(handle=H.get_handle())
    fresh.deserialize(H.get_handle(), entry["plan"])
    return fresh


def _build(graph):
    H.build(graph)
    return graph


def always_loads(entry, graph):
    return _load(entry) if entry is not None else _build(graph)


def checks_the_gpu_name_only(entry, graph):
    ok = entry is not None and entry["fingerprint"]["gpu"] == H.device_info().name and entry["key"] == graph.key()
    return _load(entry) if ok else _build(graph)


def ignores_cudnn(entry, graph):
    here = {k: v for k, v in _machine().items() if k != "cudnn_backend"}
    ok = (entry is not None and {k: entry["fingerprint"][k] for k in here} == here and entry["key"] == graph.key())
    return _load(entry) if ok else _build(graph)


def compares_four_fields(entry, graph):
    """GPU model, SM version, SM count and cuDNN backend only: blind to the driver, CUDA runtime and frontend."""
    fields = ("gpu", "sm", "sm_count", "cudnn_backend")
    ok = (entry is not None and all(entry["fingerprint"][k] == _machine()[k] for k in fields)
          and entry["key"] == graph.key())
    return _load(entry) if ok else _build(graph)


def ignores_the_key(entry, graph):
    return _load(entry) if entry is not None and entry["fingerprint"] == _machine() else _build(graph)


def always_builds(entry, graph):
    return _build(graph)


def builds_then_loads(entry, graph):
    """The handed graph built on every call; the loaded plan returned on a match: the hit saves nothing."""
    _build(graph)
    return always_loads(entry, graph) if entry is not None and entry["fingerprint"] == _machine() \
        and entry["key"] == graph.key() else graph


@requires_gpu
@pytest.mark.parametrize("answer, expected", [
    (always_loads, "✗ 06.load_or_build: it loaded an entry made on another GPU model"),
    (checks_the_gpu_name_only, "✗ 06.load_or_build: it loaded an entry made on a "),
    (ignores_cudnn, "✗ 06.load_or_build: it loaded an entry made with another cuDNN backend"),
    (compares_four_fields, "✗ 06.load_or_build: it loaded an entry made under another driver"),
    (ignores_the_key, "✗ 06.load_or_build: it loaded an entry for another graph"),
    (always_builds, "✗ 06.load_or_build: it rebuilt for an entry made here, for this graph"),
    (builds_then_loads, "✗ 06.load_or_build: it loaded an entry made here, for this graph, but built a plan first "
                        "(1 build(s) on the graph handed in)"),
])
def test_gpu_load_or_build_rejects(capsys, answer, expected):
    verdict = H.exercise("06.load_or_build", answer)
    assert verdict.status == "failed"
    out = capsys.readouterr().out
    assert out.startswith(expected), out
    if answer is checks_the_gpu_name_only:
        assert "SMs" in out


@requires_gpu
def test_gpu_load_or_build_accepts_the_reference(capsys):
    assert H.exercise("06.load_or_build", X.solution("06.load_or_build"))
    assert capsys.readouterr().out.startswith("✓ 06.load_or_build: correct")


# ------------------------------------------------------------------ CPU: a wrong answer each checker refuses
# (tests/test_exercises_cpu.py collects these) torch computing the product, which 06.round_trip refuses on the CPU;
# 06.load_or_build builds a graph before it calls the answer: the CPU test of the function that decides its verdict
def _torch_product(a, b, c):
    c.copy_(a @ b)
    return b"not a plan", H.load_cudnn(need_gpu=False).pygraph()


TORCH_ANSWERS = {"06.round_trip": _torch_product}
DECIDED_BY = {"06.load_or_build": "test_load_or_build_is_fed_an_entry_from_elsewhere_for_every_fingerprint_field"}
