"""helpers.recipes.plancache: the file format and the build/load logic, on CPU (fake graphs, no cudnn)."""
import os
import warnings

import pytest

from helpers.recipes.plancache import MAGIC, PlanCache, PlanCacheWarning

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


def dropped(cache, key, meta=None):
    """get() that must return None with exactly one PlanCacheWarning; returns its reason."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get(key, meta=meta) is None
    found = [w.message for w in caught if issubclass(w.category, PlanCacheWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    assert not cache.path_for(key).exists(), "a bad entry is removed, so the rebuild can replace it"
    return found[0].reason


def test_round_trip_and_miss(cache):
    assert cache.get("k") is None
    path = cache.put("k", BLOB, META)
    assert path == cache.path_for("k") and path.exists()
    assert cache.get("k") == BLOB
    assert cache.get("k", meta=dict(META)) == BLOB
    assert cache.get("other") is None


def test_put_rejects_a_list(cache):
    with pytest.raises(TypeError):
        cache.put("k", list(BLOB))


def test_truncated_entry(cache):
    path = cache.put("k", BLOB, META)
    data = path.read_bytes()
    for cut in (len(data) - 100, len(MAGIC) + 10, 5):   # in the blob, in the header, before the header
        path.write_bytes(data[:cut])
        assert dropped(cache, "k") == "truncated"
        cache.put("k", BLOB, META)


def test_empty_file(cache):
    cache.put("k", BLOB)
    cache.path_for("k").write_bytes(b"")
    assert dropped(cache, "k") == "truncated"


def test_corrupt_payload_fails_checksum(cache):
    path = cache.put("k", BLOB)
    data = bytearray(path.read_bytes())
    data[-7] ^= 0xFF
    path.write_bytes(bytes(data))
    assert dropped(cache, "k") == "corrupt"


def test_garbage_and_bad_header(cache):
    path = cache.put("k", BLOB)
    path.write_bytes(b"\x00garbage" * 100)
    assert dropped(cache, "k") == "corrupt"
    path = cache.put("k", BLOB)
    data = path.read_bytes()
    path.write_bytes(data[: len(MAGIC) + 4] + b"{not json" + data[len(MAGIC) + 13 :])
    assert dropped(cache, "k") == "corrupt"


@pytest.mark.parametrize("field", sorted(FP))
def test_foreign_fingerprint(tmp_path, field):
    writer = PlanCache(tmp_path, fingerprint=FP)
    writer.put("k", BLOB)
    other = dict(FP, **{field: ELSEWHERE[field]})
    reader = PlanCache(tmp_path, fingerprint=other)
    assert dropped(reader, "k") == "foreign"


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


def test_foreign_format_version(cache):
    path = cache.put("k", BLOB)
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"format": 1', b'"format": 2'))
    assert dropped(cache, "k") == "foreign"


def test_entry_for_another_key_is_never_returned(cache):
    """A file copied (or renamed) onto another key's name holds another graph's plan."""
    other = cache.put("key-of-shape-A", BLOB)
    os.replace(other, cache.path_for("key-of-shape-B"))
    assert dropped(cache, "key-of-shape-B") == "mismatch"


def test_other_metadata_is_never_returned(cache):
    cache.put("k", BLOB, META)
    assert dropped(cache, "k", meta=dict(META, shape=[64, 128, 56, 56])) == "mismatch"


def test_atomic_write_keeps_old_entry_on_failure(cache, monkeypatch):
    cache.put("k", BLOB)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        cache.put("k", b"new plan")
    monkeypatch.undo()
    assert cache.get("k") == BLOB, "the old entry is intact"
    assert [p.name for p in cache.directory.iterdir()] == [cache.path_for("k").name], "no temp file is left"


def test_overwrite(cache):
    cache.put("k", BLOB)
    cache.put("k", b"second")
    assert cache.get("k") == b"second"
    assert len(cache.entries()) == 1
    cache.clear()
    assert cache.entries() == []


# ---------------------------------------------------------------- get_or_build with fake graphs
class FakeGraph:
    def __init__(self, key="graph-1", blob=BLOB, refuse=False):
        self._key, self._blob, self.refuse = key, blob, refuse
        self.built = False
        self.loaded = None

    def key(self):
        return self._key

    def serialize(self, as_bytes=False):
        assert self.built, "serialize before build"
        return self._blob if as_bytes else list(self._blob)

    def deserialize(self, *args):
        if self.refuse:
            raise RuntimeError("CUDNN_STATUS_BAD_PARAM")
        self.loaded = args[-1]


def build(graph):
    graph.built = True


def test_get_or_build_builds_then_loads(cache):
    first = cache.get_or_build(FakeGraph(), build, tag="heuristic", meta=META, new_graph=FakeGraph)
    assert first.source == "built" and first.graph.built and first.path.exists()
    second = cache.get_or_build(FakeGraph(), build, tag="heuristic", meta=META, new_graph=FakeGraph)
    assert second.source == "loaded" and second.graph.loaded == BLOB and not second.graph.built
    other_tag = cache.get_or_build(FakeGraph(), build, tag="tuned", meta=META, new_graph=FakeGraph)
    assert other_tag.source == "built", "a tag is part of the key"
    other_graph = cache.get_or_build(FakeGraph(key="graph-2"), build, meta=META, new_graph=FakeGraph)
    assert other_graph.source == "built", "another graph key never loads this plan"


def test_get_or_build_rebuilds_a_corrupt_entry(cache):
    first = cache.get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    first.path.write_bytes(first.path.read_bytes()[:-10])
    with pytest.warns(PlanCacheWarning):
        again = cache.get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    assert again.source == "rebuilt" and again.graph.built
    assert [w.reason for w in again.warnings] == ["truncated"]
    assert cache.get_or_build(FakeGraph(), build, new_graph=FakeGraph).source == "loaded", "the rebuild was stored"


def test_get_or_build_rebuilds_when_cudnn_refuses_the_blob(cache):
    cache.get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    with pytest.warns(PlanCacheWarning):
        again = cache.get_or_build(FakeGraph(), build, new_graph=lambda: FakeGraph(refuse=True))
    assert again.source == "rebuilt" and [w.reason for w in again.warnings] == ["undeserializable"]


@pytest.mark.parametrize("field", ["sm_count", "driver", "cuda_runtime"])
def test_a_new_driver_cuda_or_sm_count_rebuilds_safely_and_loses_nothing(tmp_path, field):
    """The entry written before the change is refused (never run), the graph is rebuilt and stored under the
    new fingerprint, so the next run loads again; nothing raises and no plan is lost."""
    before = PlanCache(tmp_path, fingerprint=FP)
    assert before.get_or_build(FakeGraph(), build, meta=META, new_graph=FakeGraph).source == "built"
    after = PlanCache(tmp_path, fingerprint=dict(FP, **{field: ELSEWHERE[field]}))
    with pytest.warns(PlanCacheWarning):
        result = after.get_or_build(FakeGraph(), build, meta=META, new_graph=FakeGraph)
    assert result.source == "rebuilt" and result.graph.built and [w.reason for w in result.warnings] == ["foreign"]
    again = after.get_or_build(FakeGraph(), build, meta=META, new_graph=FakeGraph)
    assert again.source == "loaded" and again.graph.loaded == BLOB, "the rebuilt plan was stored"
    assert len(after.entries()) == 1


def test_get_or_build_foreign_entry(tmp_path):
    PlanCache(tmp_path, fingerprint=FP).get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    newer = PlanCache(tmp_path, fingerprint=dict(FP, cudnn_backend=92000))
    with pytest.warns(PlanCacheWarning):
        result = newer.get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    assert result.source == "rebuilt" and [w.reason for w in result.warnings] == ["foreign"]
