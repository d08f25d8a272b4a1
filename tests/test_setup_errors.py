"""Every set-up failure is one line: a broken or missing libcudnn, a missing frontend, a cuDNN that is not 9 or
two copies mixed, no GPU. On CPU: files in temp folders, fake ``cudnn`` modules, and the search monkeypatched."""
import sys
import types

import pytest

import helpers
import helpers.libcudnn as libcudnn
from helpers.errors import CourseError, CudnnLoadError, CudnnNotFoundError, CudnnVersionError, NoGPUError, one_line


def assert_one_line(exc):
    text = str(exc)
    assert text and "\n" not in text, text
    assert exc._render_traceback_() == [f"{type(exc).__name__}: {text}"], "Jupyter shows that one line only"
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__), "no chained traceback"


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process where nothing is loaded yet: no ``cudnn`` module, nothing checked, torch loads no cuDNN,
    and LD_LIBRARY_PATH is one empty temp folder (first in the search). Everything is restored afterwards."""
    monkeypatch.delitem(sys.modules, "cudnn", raising=False)
    monkeypatch.setattr(libcudnn, "_verified", None, raising=False)
    monkeypatch.setattr(libcudnn, "_torch_loads_cudnn", lambda: None)
    monkeypatch.setattr(libcudnn, "loaded_library", lambda: None)
    folder = tmp_path / "lib"
    folder.mkdir()
    monkeypatch.setenv("LD_LIBRARY_PATH", str(folder))
    return folder


def fake_frontend(monkeypatch, backend=91900, frontend="1.32.0"):
    """A ``cudnn`` module whose backend reports ``backend`` (or raises it, if it is an exception)."""
    def backend_version():
        if isinstance(backend, Exception):
            raise backend
        return backend

    module = types.ModuleType("cudnn")
    module.backend_version, module.__version__ = backend_version, frontend
    monkeypatch.setitem(sys.modules, "cudnn", module)
    monkeypatch.setattr(libcudnn, "_verified", None, raising=False)
    monkeypatch.setattr(libcudnn, "loaded_copies", lambda: [], raising=False)
    return module


# ---------------------------------------------------------------- a broken libcudnn file
@pytest.mark.parametrize("content, what", [(b"", "file too short"), (b"x" * 19, "file too short"),
                                           (b"version https://git-lfs.github.com/spec/v1\n" * 3, "invalid ELF header")],
                         ids=["empty", "19 bytes", "text"])
def test_a_broken_libcudnn_on_ld_library_path_is_one_line_naming_the_file(fresh, content, what):
    broken = fresh / "libcudnn.so.9"
    broken.write_bytes(content)
    assert libcudnn.libcudnn_candidates()[0].path == str(broken), "it is the first choice"
    with pytest.raises(CudnnLoadError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    text = str(err.value)
    assert text.startswith(f"{broken} could not be loaded: {what}") and "not a shared library" in text
    assert "LD_LIBRARY_PATH" in text and "no other copy is tried" in text
    assert "cudnn" not in sys.modules, "the frontend was not imported on top of a broken library"
    assert isinstance(err.value, CudnnNotFoundError), "code that catches CudnnNotFoundError still catches it"


def frontend_that_runs(monkeypatch, tmp_path, body: str) -> None:
    """A ``cudnn`` package whose ``__init__`` is ``body``, first on sys.path; no libcudnn candidates."""
    package = tmp_path / "site" / "cudnn"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(libcudnn, "libcudnn_candidates", lambda: [])


def test_a_broken_file_the_frontend_finds_itself_is_one_line(fresh, monkeypatch, tmp_path):
    """The frontend's own search (LD_LIBRARY_PATH first) raises ctypes' OSError inside ``import cudnn``."""
    frontend_that_runs(monkeypatch, tmp_path, 'raise OSError("/opt/old/lib/libcudnn.so.9: invalid ELF header")\n')
    with pytest.raises(CudnnLoadError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    assert str(err.value).startswith("/opt/old/lib/libcudnn.so.9 could not be loaded: invalid ELF header")
    assert "take /opt/old/lib off LD_LIBRARY_PATH" in str(err.value)


# ---------------------------------------------------------------- no libcudnn, no frontend
@pytest.mark.skipif(bool(libcudnn.libcudnn_candidates()), reason="this machine has a libcudnn")
def test_no_libcudnn_on_this_machine_is_one_line(monkeypatch):
    """The real thing, where there is no libcudnn (a CPU box): one line that says what to install."""
    monkeypatch.setattr(libcudnn, "_verified", None, raising=False)
    with pytest.raises(CudnnNotFoundError) as err:
        helpers.load_cudnn()
    assert_one_line(err.value)
    text = str(err.value)
    assert text.startswith("no usable libcudnn.so.9 (searched LD_LIBRARY_PATH") and "pip install nvidia-cudnn-cu1" in text
    import torch

    if torch.version.cuda is None:
        assert "this torch is a CPU-only build" in text


@pytest.mark.parametrize("cuda, advice", [("12.8", "`pip install nvidia-cudnn-cu12`"),
                                          ("13.0", "`pip install nvidia-cudnn-cu13`"),
                                          (None, "this torch is a CPU-only build")])
def test_no_libcudnn_says_what_to_install(monkeypatch, cuda, advice):
    import torch

    fake_frontend(monkeypatch, backend=RuntimeError("Unable to find symbol cudnnGetVersion\n  (dlsym failed)"))
    monkeypatch.setattr(libcudnn, "libcudnn_candidates", lambda: [])
    monkeypatch.setattr(torch.version, "cuda", cuda)
    with pytest.raises(CudnnNotFoundError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    assert advice in str(err.value) and "Unable to find symbol cudnnGetVersion (dlsym failed)" in str(err.value)


def test_no_frontend_is_one_line(fresh, monkeypatch):
    monkeypatch.setitem(sys.modules, "cudnn", None)  # `import cudnn` raises ModuleNotFoundError
    monkeypatch.setattr(libcudnn, "libcudnn_candidates", lambda: [])
    with pytest.raises(CudnnNotFoundError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    assert "`pip install nvidia-cudnn-frontend`" in str(err.value)


def test_a_frontend_that_cannot_be_imported_is_one_line(fresh, monkeypatch, tmp_path):
    frontend_that_runs(monkeypatch, tmp_path, "import tvm_ffi_not_installed_here\n")
    with pytest.raises(CudnnNotFoundError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    assert "cannot be imported (No module named 'tvm_ffi_not_installed_here')" in str(err.value)


# ---------------------------------------------------------------- frontend and backend that do not match
@pytest.mark.parametrize("backend, shown", [(8907, "8.9.7"), (100100, "10.1.0")])
def test_a_backend_that_is_not_cudnn_9_is_one_line_naming_both_versions(monkeypatch, backend, shown):
    fake_frontend(monkeypatch, backend=backend)
    monkeypatch.setattr(libcudnn, "loaded_library", lambda: "/opt/cudnn/lib/libcudnn.so")
    with pytest.raises(CudnnVersionError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    text = str(err.value)
    assert f"cuDNN frontend 1.32.0 loaded cuDNN {shown} from /opt/cudnn/lib/libcudnn.so" in text
    assert "but the course needs a cuDNN 9" in text and "pip install" in text
    with pytest.raises(CudnnVersionError):
        libcudnn.load_cudnn()  # and again: a refused module is never taken as checked


def test_two_copies_mixed_is_one_line(monkeypatch):
    fake_frontend(monkeypatch)
    copies = ["/usr/lib/x86_64-linux-gnu", "/venv/lib/python3.12/site-packages/nvidia/cudnn/lib"]
    monkeypatch.setattr(libcudnn, "loaded_copies", lambda: copies)
    with pytest.raises(CudnnVersionError) as err:
        libcudnn.load_cudnn()
    assert_one_line(err.value)
    assert f"from {copies[0]} and {copies[1]}" in str(err.value)
    assert "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH" in str(err.value)


def test_loaded_copies_reads_the_folders_of_main_and_sub_libraries(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libcudnn.so.9.8.0\n"
                    "7f02-7f03 r-xp 0 08:01 2 /venv/nvidia/cudnn/lib/libcudnn_graph.so.9\n"
                    "7f04-7f05 r-xp 0 08:01 3 /venv/nvidia/cudnn/lib/libcudnn_ops.so.9\n"
                    "7f06-7f07 r-xp 0 08:01 4 /venv/torch/lib/libtorch_cuda.so\n"
                    "7f08-7f09 rw-p 0 00:00 0 [heap]\n")
    assert libcudnn.loaded_copies(str(maps)) == ["/usr/lib/x86_64-linux-gnu", "/venv/nvidia/cudnn/lib"]


def test_a_cudnn_9_backend_passes_once_checked(monkeypatch):
    module = fake_frontend(monkeypatch, backend=91900)
    assert libcudnn.load_cudnn() is module
    module.backend_version = None  # a later call returns the checked module at once (it sits in timed loops)
    assert libcudnn.load_cudnn() is module


def test_version_string():
    assert [libcudnn.version_string(v) for v in (90000, 91900, 8907, 100100)] == ["9.0.0", "9.19.0", "8.9.7", "10.1.0"]


# ---------------------------------------------------------------- no GPU; the errors themselves
def test_no_gpu_is_one_line(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a GPU machine answers like a CPU one here
    with pytest.raises(NoGPUError) as err:
        helpers.require_gpu()
    assert "\n" not in str(err.value) and str(err.value).startswith("No NVIDIA GPU")
    assert err.value._render_traceback_() == [f"NoGPUError: {err.value}"]


def test_one_line_joins_a_message():
    assert one_line("a\n  b\tc\r\n") == "a b c"
    assert issubclass(CudnnLoadError, CourseError) and issubclass(CudnnVersionError, CudnnNotFoundError)

