"""helpers.recipes.plancache: the file format and the build/load logic, on CPU (fake graphs, no cudnn)."""
import os
import warnings

import pytest

from helpers.recipes.plancache import MAGIC, PlanCache, PlanCacheError, PlanCacheWarning

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


def refused(cache, key, meta=None):
    """get() that must return None with exactly one PlanCacheWarning; returns the warning."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cache.get(key, meta=meta) is None
    found = [w.message for w in caught if issubclass(w.category, PlanCacheWarning)]
    assert len(found) == 1, [str(w.message) for w in caught]
    return found[0]


def dropped(cache, key, meta=None):
    """get() that must refuse the key's entry and move it (bytes unchanged) into rejected/; returns the reason."""
    path = cache.path_for(key)
    before = path.read_bytes()
    warning = refused(cache, key, meta)
    assert not path.exists(), "a bad entry is moved away, so the rebuild can replace it"
    assert warning.moved_to in cache.rejected() and warning.moved_to.read_bytes() == before, "kept, not deleted"
    assert f"moved to rejected/{warning.moved_to.name}" in str(warning), "the warning says where it went"
    assert f"plan cache: {path} " in str(warning), "every warning names the file by its full path"
    assert f".{warning.reason}." in warning.moved_to.name
    return warning.reason


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


def test_bad_header(cache):
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


def test_the_fingerprint_fields_are_one_list_with_a_reason_each():
    """FINGERPRINT_FIELDS is the one list (notebook 06's exercise and its checker use it too): the tests' FP and
    ELSEWHERE cover it, and every field says why a plan depends on it."""
    from helpers.recipes.plancache import FINGERPRINT_FIELDS

    assert list(FP) == list(FINGERPRINT_FIELDS) and set(ELSEWHERE) == set(FINGERPRINT_FIELDS)
    assert all(isinstance(why, str) and len(why) > 20 for why in FINGERPRINT_FIELDS.values())


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


# ---------------------------------------------------------------- files the cache did not write
def users_files(folder):
    """A user's own files in the cache folder: a raw plan with and without the suffix, a copy of an entry
    under their own name, notes, a folder. Returns {path: bytes}."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {folder / "my_own_cudnn_graph.plan": b"\x00raw serialize() bytes" * 50,
             folder / "my_own_cudnn_graph": b"\x00raw serialize() bytes" * 50,
             folder / "backup.plan": MAGIC + b"\x10\x00\x00\x00" + b"a copy of an entry, kept by me",
             folder / "notes.txt": b"which plan is which",
             folder / "mine" / "x.plan": b"in a subfolder"}
    for path, data in files.items():
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
    return files


def assert_intact(files):
    for path, data in files.items():
        assert path.read_bytes() == data, f"{path.name} was changed"


def test_clear_deletes_only_the_caches_own_entries(cache):
    files = users_files(cache.directory)
    cache.put("k", BLOB)
    cache.put("k2", BLOB)
    assert cache.entries() == sorted([cache.path_for("k"), cache.path_for("k2")]), "a user's file is not an entry"
    cache.clear()
    assert cache.entries() == []
    assert_intact(files)


def test_clear_says_which_files_it_left_alone(cache):
    files = users_files(cache.directory)
    cache.put("k", BLOB)
    cache.put("bad", BLOB)
    cache.path_for("bad").write_bytes(cache.path_for("bad").read_bytes()[:-1])
    assert dropped(cache, "bad") == "truncated"
    theirs = cache.rejected_dir / "their-note.txt"
    theirs.write_bytes(b"not the cache's")
    left = sorted({p if p.parent in (cache.directory, cache.rejected_dir) else p.parent for p in files} | {theirs})
    assert cache.other_files() == left
    assert cache.clear() == left and cache.entries() == [] and len(cache.rejected()) == 1   # its own rejected: kept
    assert cache.clear(rejected=True) == left and cache.rejected() == []
    assert_intact(files)
    assert PlanCache(cache.directory / "new", fingerprint=FP).clear() == []


def test_clear_keeps_rejected_entries_unless_asked(cache):
    cache.put("k", BLOB)
    cache.path_for("k").write_bytes(cache.path_for("k").read_bytes()[:-1])
    assert dropped(cache, "k") == "truncated"
    theirs = cache.rejected_dir / "their-note.txt"
    theirs.write_bytes(b"not the cache's")
    cache.clear()
    assert len(cache.rejected()) == 1
    cache.clear(rejected=True)
    assert cache.rejected() == [] and theirs.read_bytes() == b"not the cache's"


@pytest.mark.parametrize("data", [b"x" * 19, b"\x00garbage" * 100, b"plain text, not a plan\n"],
                         ids=["19 bytes", "garbage", "text"])
def test_a_file_at_a_keys_path_that_is_not_an_entry(cache, data):
    """Someone else's file under a key's exact name: named as such, never moved, overwritten or deleted."""
    files = users_files(cache.directory)
    path = cache.path_for("k")
    path.write_bytes(data)
    warning = refused(cache, "k")
    assert warning.reason == "not-an-entry" and warning.moved_to is None
    assert str(path) in str(warning) and "is not a plan-cache entry" in str(warning)
    with pytest.raises(PlanCacheError) as err:
        cache.put("k", BLOB)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    assert cache.entries() == [] and cache.rejected() == []
    cache.clear(rejected=True)
    assert path.read_bytes() == data
    assert_intact(files)


def test_a_folder_or_a_link_at_a_keys_path_is_left_alone(cache, tmp_path):
    target = tmp_path / "elsewhere.plan"
    target.write_bytes(cache.put("k", BLOB).read_bytes())  # a real entry's bytes, behind a link
    cache.path_for("k").unlink()
    cache.path_for("k").symlink_to(target)
    cache.path_for("d").mkdir()
    for key in ("k", "d"):
        assert refused(cache, key).reason == "not-an-entry"
        with pytest.raises(PlanCacheError):
            cache.put(key, BLOB)
    cache.clear(rejected=True)
    assert cache.path_for("k").is_symlink() and cache.path_for("d").is_dir() and target.read_bytes()


def test_every_rejection_is_kept_in_rejected(cache):
    """Truncated, corrupt, foreign: each reported with its reason and found afterwards in rejected/."""
    reasons = []
    path = cache.put("k", BLOB, META)
    path.write_bytes(path.read_bytes()[:-100])
    reasons.append(dropped(cache, "k"))
    path = cache.put("k", BLOB, META)
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF
    path.write_bytes(bytes(data))
    reasons.append(dropped(cache, "k"))
    PlanCache(cache.directory, fingerprint=dict(FP, driver=ELSEWHERE["driver"])).put("k", BLOB, META)
    reasons.append(dropped(cache, "k"))
    cache.put("k", BLOB, META)
    reasons.append(dropped(cache, "k", meta=dict(META, shape=[64, 128, 56, 56])))
    assert reasons == ["truncated", "corrupt", "foreign", "mismatch"]
    rejected = cache.rejected()
    assert len(rejected) == 4 and sorted(p.name.split(".")[1] for p in rejected) == sorted(reasons)
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
    assert f"plan cache: {again.path} was refused by cuDNN" in str(again.warnings[0])


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


def test_get_or_build_keeps_what_cudnn_refused(cache):
    cache.get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    with pytest.warns(PlanCacheWarning):
        again = cache.get_or_build(FakeGraph(), build, new_graph=lambda: FakeGraph(refuse=True))
    (warning,) = again.warnings
    assert warning.moved_to in cache.rejected() and cache.get(again.key) == BLOB, "kept aside, and the rebuild stored"


def test_get_or_build_never_overwrites_a_users_file(cache):
    """The key's name holds someone else's file: build, warn, leave the file, return the graph unstored."""
    key = PlanCache.graph_key(FakeGraph())
    cache.path_for(key).parent.mkdir(parents=True)
    cache.path_for(key).write_bytes(b"mine")
    with pytest.warns(PlanCacheWarning, match="not a plan-cache entry"):
        result = cache.get_or_build(FakeGraph(), build, new_graph=FakeGraph)
    assert result.source == "built" and result.graph.built and not result.stored
    assert [w.reason for w in result.warnings] == ["not-an-entry"]
    assert cache.path_for(key).read_bytes() == b"mine"
