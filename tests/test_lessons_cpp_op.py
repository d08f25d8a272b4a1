"""helpers.lessons.cpp_op (notebook 08's C++ rung) on CPU: the gate's one-line reasons, the header search, and a
build that cannot start saying why. The build itself and the op's numbers run in notebook 08 on a GPU."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.lessons import cpp_op

ROOT = Path(__file__).resolve().parents[1]


def test_no_compiler_names_the_compiler(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    reason = cpp_op.missing_prerequisite()
    assert reason.startswith("needs a C++ compiler") and "no-such-compiler-xyz" in reason and "\n" not in reason


def test_no_ninja_says_how_to_get_it(monkeypatch):
    import torch.utils.cpp_extension as ext

    monkeypatch.setattr(cpp_op.shutil, "which", lambda name: "/usr/bin/c++")
    monkeypatch.setattr(ext, "is_ninja_available", lambda: False)
    assert cpp_op.missing_prerequisite() == "needs ninja to build C++ extensions: `pip install ninja`"


def test_missing_headers_are_named_with_what_provides_them(monkeypatch, tmp_path):
    import torch.utils.cpp_extension as ext

    monkeypatch.setattr(cpp_op.shutil, "which", lambda name: "/usr/bin/c++")
    monkeypatch.setattr(ext, "is_ninja_available", lambda: True)
    (tmp_path / "cudnn_frontend.h").write_text("")
    monkeypatch.setattr(cpp_op, "_candidate_dirs", lambda: [tmp_path])
    reason = cpp_op.missing_prerequisite()
    assert reason.startswith("needs headers that were not found:") and "cudnn_frontend.h" not in reason
    for header in ("cudnn.h", "cuda_runtime.h", "nvrtc.h"):
        assert header in reason


def test_a_cuda_runtime_header_without_its_crt_folder_is_passed_over(monkeypatch, tmp_path):
    partial, full = tmp_path / "wheel", tmp_path / "toolkit"
    for folder in (partial, full):
        folder.mkdir()
        (folder / "cuda_runtime.h").write_text("")
    (full / "crt").mkdir()
    (full / "crt" / "host_defines.h").write_text("")
    monkeypatch.setattr(cpp_op, "_candidate_dirs", lambda: [partial, full])
    assert cpp_op.include_dirs()["cuda_runtime.h"] == full


def test_load_refuses_with_the_gate_reason(monkeypatch):
    monkeypatch.setattr(cpp_op, "missing_prerequisite", lambda: "needs a C++ compiler: `c++` is not on PATH")
    with pytest.raises(RuntimeError, match=re.escape("the C++ op needs a C++ compiler")):
        cpp_op.load()


def test_the_source_ships_with_the_package():
    assert cpp_op.SOURCE.is_file() and "TORCH_LIBRARY(course_cpp" in cpp_op.SOURCE.read_text()
    assert '"helpers.lessons" = ["*.cpp"]' in (ROOT / "pyproject.toml").read_text()   # installed copies have it too
