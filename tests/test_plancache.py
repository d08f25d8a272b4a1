"""helpers.recipes.plancache on CPU (fake graphs, no cudnn): the fingerprint, the key, every check an entry must pass
before use (each refusal shown with its reason), and the fall-back to a build."""
import os
import warnings

import pytest

from helpers.recipes.plancache import FINGERPRINT_FIELDS, PlanCache, PlanCacheWarning

FP = {"gpu": "NVIDIA H200", "sm": 90, "sm_count": 132, "driver": "580.159.04", "cuda_runtime": "13.0",
      "cudnn_backend": 91900, "cudnn_frontend": "1.32.0"}
# one value per fingerprint field that differs from FP's: what another machine (or an upgrade) would store
ELSEWHERE = {"gpu": "NVIDIA A100-SXM4-80GB", "sm": 80, "sm_count": 66, "driver": "570.86.15",
             "cuda_runtime": "12.8", "cudnn_backend": 92000, "cudnn_frontend": "1.33.0"}
BLOB = bytes(range(256)) * 40
META = {"shape": [32, 128, 56, 56], "dtype": "bfloat16"}


@pytest.fixture
def cache(tmp_path):
    return PlanCache(tmp_path / "plans", fingerprint=FP)


def refused(cache, key, meta=None) -> str:
    """get() must return None with one PlanCacheWarning, naming the file, and move the entry (bytes unchanged) into
    rejected/, named in the warning; returns the reason."""
    path = cache.path_for(key)
    before = path.read_bytes()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get(key, meta=meta) is None
    (warning,) = [w.message for w in caught if issubclass(w.category, PlanCacheWarning)]
    assert not path.exists(), "a bad entry is moved away, so the rebuild can replace it"
    (kept,) = [p for p in (cache.directory / "rejected").iterdir() if f".{warning.reason}." in p.name]
    assert kept.read_bytes() == before, "kept, not deleted"
    assert str(warning).startswith(f"plan cache: {path} ") and f"moved to rejected/{kept.name}" in str(warning)
    kept.unlink()
    return warning.reason


def test_round_trip_and_miss(cache):
    assert cache.get("k") is None
    path = cache.put("k", BLOB, META)
    assert path == cache.path_for("k") and cache.entries() == [path]
    assert cache.get("k") == BLOB and cache.get("k", meta=dict(META)) == BLOB
    assert cache.get("other") is None
    cache.put("k", b"second")
    assert cache.get("k") == b"second" and len(cache.entries()) == 1


def test_a_truncated_entry_is_refused(cache):
    path = cache.put("k", BLOB, META)
    data = path.read_bytes()
    for cut in (len(data) - 100, 10, 0):   # in the blob, in the header, nothing left
        path.write_bytes(data[:cut])
        assert refused(cache, "k") == "truncated"
        cache.put("k", BLOB, META)


def test_a_corrupt_entry_is_refused(cache):
    path = cache.put("k", BLOB)
    data = bytearray(path.read_bytes())
    data[-7] ^= 0xFF                      # a flipped bit in the plan: the checksum fails
    path.write_bytes(bytes(data))
    assert refused(cache, "k") == "corrupt"
    path = cache.put("k", BLOB)
    path.write_bytes(b"{not json" + path.read_bytes()[9:])
    assert refused(cache, "k") == "corrupt"


@pytest.mark.parametrize("field", sorted(FP))
def test_an_entry_of_another_fingerprint_is_refused_as_foreign(tmp_path, field):
    PlanCache(tmp_path, fingerprint=FP).put("k", BLOB)
    assert refused(PlanCache(tmp_path, fingerprint=dict(FP, **{field: ELSEWHERE[field]})), "k") == "foreign"


def test_an_entry_for_another_key_or_metadata_is_refused_as_a_mismatch(cache):
    os.replace(cache.put("key-of-shape-A", BLOB), cache.path_for("key-of-shape-B"))   # copied onto another name
    assert refused(cache, "key-of-shape-B") == "mismatch"
    cache.put("k", BLOB, META)
    assert refused(cache, "k", meta=dict(META, shape=[64, 128, 56, 56])) == "mismatch"


def test_a_failed_write_keeps_the_old_entry_and_leaves_no_temp_file(cache, monkeypatch):
    cache.put("k", BLOB)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        cache.put("k", b"new plan")
    monkeypatch.undo()
    assert cache.get("k") == BLOB, "the old entry is intact"
    assert [p.name for p in cache.directory.iterdir()] == [cache.path_for("k").name], "no temp file is left"


def test_the_fingerprint_names_gpu_sm_count_driver_cuda_and_cudnn(monkeypatch):
    """current_fingerprint() reads every field from the device helpers (faked here: no GPU needed)."""
    import types

    import helpers.device as device
    import helpers.libcudnn as libcudnn
    from helpers.recipes.plancache import current_fingerprint

    gpu = device.DeviceInfo(name="NVIDIA H200", index=0, sm=(9, 0), sm_count=132, memory_gb=140.0, l2_bytes=60 << 20)
    fake_cudnn = types.SimpleNamespace(backend_version=lambda: 91900, __version__="1.32.0")
    monkeypatch.setattr(device, "require_gpu", lambda: gpu)
    monkeypatch.setattr(device, "versions", lambda: {"driver": "580.159.04", "cuda (torch build)": "13.0"})
    monkeypatch.setattr(libcudnn, "load_cudnn", lambda: fake_cudnn)
    assert current_fingerprint() == FP


def test_the_fingerprint_fields_are_one_list_with_a_reason_each():
    """FINGERPRINT_FIELDS is the one list (notebook 06's exercise and its checker use it too): the tests' FP and
    ELSEWHERE cover it, and every field says why a plan depends on it."""
    assert list(FP) == list(FINGERPRINT_FIELDS) and set(ELSEWHERE) == set(FINGERPRINT_FIELDS)
    assert all(isinstance(why, str) and len(why) > 20 for why in FINGERPRINT_FIELDS.values())


# ---------------------------------------------------------------- get_or_build with fake graphs
class FakeGraph:
    def __init__(self, key="graph-1", refuse=False):
        self._key, self.refuse = key, refuse
        self.built = False
        self.loaded = None

    def key(self):
        return self._key

    def serialize(self, as_bytes=False):
        assert self.built and as_bytes, "serialize(as_bytes=True) after build"
        return BLOB

    def deserialize(self, *args):
        if self.refuse:
            raise RuntimeError("CUDNN_STATUS_BAD_PARAM")
        self.loaded = args[-1]


def build(graph):
    graph.built = True


def get_or_build(cache, graph=None, new_graph=FakeGraph, **kwargs):
    """get_or_build with fakes: the result and the reasons of the PlanCacheWarnings it raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = cache.get_or_build(graph or FakeGraph(), build, new_graph=new_graph, **kwargs)
    return result, [w.message.reason for w in caught if issubclass(w.category, PlanCacheWarning)]


def test_get_or_build_builds_then_loads(cache):
    first, _ = get_or_build(cache, tag="heuristic", meta=META)
    assert first.source == "built" and first.graph.built and first.path.exists()
    second, why = get_or_build(cache, tag="heuristic", meta=META)
    assert (second.source, why) == ("loaded", []) and second.graph.loaded == BLOB and not second.graph.built
    assert get_or_build(cache, tag="tuned", meta=META)[0].source == "built", "a tag is part of the key"
    assert get_or_build(cache, FakeGraph(key="graph-2"), meta=META)[0].source == "built", "so is the graph's key"


@pytest.mark.parametrize("spoil, reason", [(lambda path: path.write_bytes(path.read_bytes()[:-10]), "truncated"),
                                           (lambda path: path.write_bytes(path.read_bytes()[:-1] + b"?"), "corrupt")])
def test_get_or_build_rebuilds_a_bad_entry_and_stores_the_rebuild(cache, spoil, reason):
    spoil(get_or_build(cache)[0].path)
    again, why = get_or_build(cache)
    assert (again.source, why) == ("rebuilt", [reason]) and again.graph.built
    assert get_or_build(cache)[0].source == "loaded", "the rebuild was stored"


def test_get_or_build_rebuilds_when_cudnn_refuses_the_blob(cache):
    get_or_build(cache)
    with pytest.warns(PlanCacheWarning, match=r"plan cache: .* was refused by cuDNN \(RuntimeError\); moved to "
                                              r"rejected/.*\.undeserializable\."):
        cache.get_or_build(FakeGraph(), build, new_graph=lambda: FakeGraph(refuse=True))
    again, why = get_or_build(cache, new_graph=lambda: FakeGraph(refuse=True))
    assert again.source == "rebuilt" and why == ["undeserializable"]


@pytest.mark.parametrize("field", ["sm_count", "driver", "cuda_runtime", "cudnn_backend"])
def test_a_new_driver_cuda_cudnn_or_sm_count_rebuilds_safely_and_loses_nothing(tmp_path, field):
    """The entry written before the change is refused (never run), the graph is rebuilt and stored under the
    new fingerprint, so the next run loads again; nothing raises and no plan is lost."""
    assert get_or_build(PlanCache(tmp_path, fingerprint=FP), meta=META)[0].source == "built"
    after = PlanCache(tmp_path, fingerprint=dict(FP, **{field: ELSEWHERE[field]}))
    result, why = get_or_build(after, meta=META)
    assert (result.source, why) == ("rebuilt", ["foreign"]) and result.graph.built
    again = get_or_build(after, meta=META)[0]
    assert again.source == "loaded" and again.graph.loaded == BLOB, "the rebuilt plan was stored"
    assert len(after.entries()) == 1 and len(list((tmp_path / "rejected").iterdir())) == 1, "the old one kept aside"
