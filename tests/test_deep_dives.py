"""The visible deep-dive guard (``H.deep_dive``), run in a real IPython kernel on the CPU: with ``DEEP_DIVES =
False`` "Run all" stops at the first deep dive's guard with one line that says why and how to go on, and the cells
below never run; with ``True`` the guard prints nothing; ``tools.execute --core`` counts that stop as the core's end."""
from pathlib import Path

import nbformat
import pytest

from helpers.deep_dives import DeepDivesOff, deep_dive
from tools.execute import stopped_at_the_deep_dives

ROOT = Path(__file__).resolve().parent.parent


def test_the_guard_does_nothing_when_on_and_says_why_when_off():
    assert deep_dive("B", "the kernel ladder", True) is None
    with pytest.raises(DeepDivesOff) as caught:
        deep_dive("B", "the kernel ladder", False)
    line = caught.value._render_traceback_()
    assert len(line) == 1 and line[0].startswith("DeepDivesOff: stopped on purpose: DEEP_DIVES = False, so the core")
    assert "deep dive B (the kernel ladder)" in line[0] and "set DEEP_DIVES = True in the parameters cell" in line[0]


def test_the_guard_refuses_anything_but_the_switch_itself():
    with pytest.raises(TypeError, match="pass the parameters cell's DEEP_DIVES"):
        deep_dive("B", "the kernel ladder", "no")


def _run_all(deep_dives: bool):
    """A three-part notebook run as "Run all" runs it (stop at the first error), in a fresh kernel."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    cells = [f"import sys; sys.path.insert(0, {str(ROOT)!r})\nimport helpers as H\nDEEP_DIVES = {deep_dives}",
             "print('core')", "H.deep_dive('A', 'a second clock', DEEP_DIVES)", "print('deep dive A ran')"]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    client = NotebookClient(nb, timeout=120, kernel_name="python3")
    try:
        client.execute()
    except CellExecutionError:
        pass
    return nb


@pytest.fixture(scope="module")
def kernel_available():
    pytest.importorskip("ipykernel")
    pytest.importorskip("nbclient")
    from jupyter_client.kernelspec import KernelSpecManager

    if "python3" not in KernelSpecManager().find_kernel_specs():
        pytest.skip("no python3 kernel spec here")


def test_run_all_stops_at_the_guard_with_one_line_and_runs_nothing_below(kernel_available):
    nb = _run_all(False)
    guard, below = nb.cells[2], nb.cells[3]
    (error,) = guard.outputs
    assert error.output_type == "error" and error.ename == "DeepDivesOff"
    assert len(error.traceback) == 1 and "DEEP_DIVES = False" in error.traceback[0]
    assert below.outputs == [] and below.execution_count is None
    assert stopped_at_the_deep_dives(nb)


def test_with_the_switch_on_the_guard_prints_nothing(kernel_available):
    nb = _run_all(True)
    assert nb.cells[2].outputs == []
    assert nb.cells[3].outputs[0].text == "deep dive A ran\n"
    assert not stopped_at_the_deep_dives(nb)
