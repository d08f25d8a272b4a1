"""tools/gates.py: a notebook's needs, read from its lines (CPU; the harness that acts on them: test_harness.py)."""
import nbformat
import pytest

from tools.gates import read_needs
from tools.notebooks import notebook_path


def _notebook(*sources, min_sm=None):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(src[3:]) if src.startswith("md:") else nbformat.v4.new_code_cell(src)
                for src in sources]
    if min_sm is not None:
        nb.metadata["cudnn_course"] = {"min_sm": min_sm}
    return nb


def test_a_gate_declared_once_gates_every_cell_that_names_it():
    needs = read_needs(_notebook(
        "print(FP8)",                                                     # above the declaration: not gated
        'FP8 = H.gate("fp8")\nprint("fp8:", FP8.reason)',
        "md:A markdown cell is not counted.",
        'if FP8.ok:\n    y = 1\nelse:\n    print("skipped:", FP8.reason)',
        'def f():\n    return 1   # FP8 only in a comment\nlabel = "FP8 GEMM"',   # nor a string: not gated
        'print(f"fp8 section: {FP8.reason}")',                            # an f-string names it
        'if H.gate("sdpa"):\n    o = 1',                                  # a gate called where it is used
        'H.grade_solution("08.swap_weights")',                            # what @checker(needs=) declares
        'H.exercise("08.swap_weights", swap_weights)',                    # a skeleton says "not done" anywhere
        'print(H.gate("sdpa").reason if FP8 else "")',                    # in the order the line names them
        "!nvidia-smi -L\nprint(FP8)",                                  # IPython syntax does not hide it
    ))
    assert needs.cells == ((), ("fp8",), ("fp8",), (), ("fp8",), ("sdpa",), ("native_cuda_graph",), (),
                           ("sdpa", "fp8"), ("fp8",))
    assert needs.gated == ["fp8", "sdpa", "native_cuda_graph"] and needs.features == ()


def test_what_a_notebook_requires_is_what_stops_it():
    """A gate's .require() as a statement of its own stops the notebook without the feature; inside a branch or a
    function it stops only that branch. H.require_gpu() anywhere: the notebook needs a GPU."""
    needs = read_needs(_notebook(
        "DEVICE = H.require_gpu()",
        'SDPA = H.gate("sdpa")\nSDPA.require()',
        'if FAST:\n    H.gate("fp8").require()\ndef later():\n    H.gate("override_shapes").require()',
        'H.gate("kernel_cache").require()   # stops here\nSDPA.require()', min_sm=80))
    assert needs.features == ("sdpa", "kernel_cache") and needs.gpu and needs.min_sm == 80
    assert needs.requires == {"gpu": True, "min_sm": 80, "features": ["sdpa", "kernel_cache"]}
    assert needs.gated == ["fp8", "override_shapes"], "a branch's gate gates its cell, not the notebook"
    bare = read_needs(_notebook("x = 1"))
    assert bare.requires == {"gpu": False, "features": []} and bare.cells == ((),)


@pytest.mark.parametrize("source, message", [
    ('G = H.gate("fp9")', r"code cell 1 \(id \w+\): line 1: unknown feature 'fp9'; known: \['bf16'"),
    ("name = 'fp8'\nG = H.gate(name)", r"code cell 1 \(id \w+\): line 2: H.gate\(\) needs its name as a string"),
    ("H.grade_solution(KEY)", r"line 1: H.grade_solution\(\) needs its name as a string literal"),
    ('H.grade_solution("08.swap_weight")', r"line 1: no checker for exercise '08.swap_weight' \(notebook 08 has: "),
])
def test_a_gate_the_harness_cannot_read_is_an_error(source, message):
    with pytest.raises(ValueError, match=message):
        read_needs(_notebook("x = 1", source))


def test_the_course_notebooks_read_as_their_title_cells_say():
    """05 stops without fused attention, 07 without a kernel cache or its serialization; 02, 04, 06 and 08 gate
    sections (02's and 04's norm deep dives on the norm graphs)."""
    def needs(number):
        return read_needs(nbformat.read(notebook_path(number), as_version=4))

    assert needs("05").features == ("sdpa",) and needs("05").gated == ["sdpa_serving", "sdpa_fp8"]
    assert needs("07").features == ("kernel_cache", "kernel_cache_serialize")
    assert needs("07").gated == ["override_shapes"]
    assert needs("02").gated == ["norm_graphs"] and needs("04").gated == ["fp8", "norm_graphs"]
    assert needs("06").gated == ["sdpa"]
    assert needs("08").gated == ["native_cuda_graph", "sdpa"]
    assert all(needs(n).requires == {"gpu": True, "features": []} for n in ("01",))
    assert all(needs(n).requires == {"gpu": True, "min_sm": 70, "features": []} for n in ("02", "03", "04", "06", "08"))
