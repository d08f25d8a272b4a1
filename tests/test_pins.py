"""The stored run's versions (``constraints.txt``): written from the stamps, read back by the setup cell's note,
and a hand edit or a mixed set of stamps fails on CPU. The Makefile's use of it: ``tests/test_makefile.py``."""
import pytest

from helpers.libcudnn import stored_run_versions, version_note
from tools import pins as P

RUN = {"gpu": "NVIDIA H200", "date": "2026-12-04T15:54:28", "torch": "2.11.0+cu130", "cuda": "13.0",
       "cudnn_backend": "9.19.0", "cudnn_frontend": "1.32.0"}


def test_the_committed_pins_are_the_stored_runs_versions():
    """constraints.txt is what `python -m tools.execute` wrote from the notebooks' stamps, not a hand edit."""
    problems = P.pins_problems()
    assert not problems, "\n".join(problems)


def test_the_pins_are_the_stamps_versions_torch_by_its_public_version_cudnn_by_the_runs_cuda():
    assert P.pins_from(RUN) == ["torch==2.11.0", "nvidia-cudnn-cu13==9.19.0.*", "nvidia-cudnn-frontend==1.32.0"]
    assert P.pins_from(dict(RUN, cuda="12.8", torch="2.11.0+cu128"))[:2] == ["torch==2.11.0",
                                                                               "nvidia-cudnn-cu12==9.19.0.*"]


def test_a_hand_edit_of_the_pins_fails_in_one_line(tmp_path):
    edited = tmp_path / "constraints.txt"
    edited.write_text(P.PINS.read_text().replace("torch==2.11.0", "torch==2.15.0"))
    (problem,) = P.pins_problems(edited)
    assert problem.startswith("constraints.txt is not the stored run's versions (torch==") and "\n" not in problem
    (missing,) = P.pins_problems(tmp_path / "none" / "constraints.txt")
    assert "python -m tools.cli pins" in missing


def test_stamps_that_ran_on_other_versions_cannot_be_pinned_and_say_which():
    stamps = {"01_a.ipynb": RUN, "02_b.ipynb": RUN, "05_c.ipynb": dict(RUN, torch="2.15.0+cu130")}
    versions, (problem,) = P.stored_run(stamps)
    assert versions is None and "01, 02 on torch 2.11.0+cu130" in problem and "05 on torch 2.15.0+cu130" in problem
    with pytest.raises(ValueError):
        P.pins_text(stamps)


def test_what_the_writer_writes_the_setup_cell_reads(tmp_path):
    path = tmp_path / "constraints.txt"
    path.write_text(P.pins_text({"01_a.ipynb": RUN, "08_b.ipynb": RUN}))
    assert stored_run_versions(path) == {"torch": "2.11.0", "cuDNN": "9.19.0", "frontend": "1.32.0"}
    assert stored_run_versions(tmp_path / "absent.txt") == {}                # an installed copy: nothing to say


STORED = {"torch": "2.11.0", "cuDNN": "9.19.0", "frontend": "1.32.0"}


@pytest.mark.parametrize("here, says", [
    ({"torch": "2.11.0+cu130", "cuDNN": "9.19.0", "frontend": "1.32.0"}, None),       # the stored run
    ({"torch": "2.11.0+cu128", "cuDNN": "9.19.0", "frontend": "1.32.0"}, None),       # Colab's pair
    ({"torch": "2.15.0+cu130", "cuDNN": "9.19.0", "frontend": "1.32.0"}, ["torch 2.15.0+cu130", "torch 2.11.0"]),
    ({"torch": "2.11.0+cu130", "cuDNN": "9.27.0", "frontend": "1.32.0"}, ["cuDNN 9.27.0", "cuDNN 9.19.0"]),
    ({"torch": "2.15.0", "cuDNN": "9.27.0", "frontend": "1.32.0"}, ["torch 2.15.0 and cuDNN 9.27.0 here",
                                                                    "torch 2.11.0 and cuDNN 9.19.0 in the run"]),
])
def test_the_setup_cells_note_is_one_line_naming_both_versions_only_when_they_differ(here, says):
    note = version_note(here, STORED)
    if says is None:
        assert note is None
    else:
        assert "\n" not in note and all(part in note for part in says), note
    assert version_note(here, {}) is None


def test_load_cudnns_note_names_the_version_that_differs(monkeypatch, capsys):
    from helpers import libcudnn

    class FakeCudnn:
        __version__ = "1.32.0"

        @staticmethod
        def backend_version():
            return 92700

    monkeypatch.setattr("torch.__version__", "2.11.0+cu130")
    libcudnn._say_if_not_the_stored_run(FakeCudnn)
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("Not the course's stored run: cuDNN 9.27.0 here, cuDNN 9.19.0 in the run")
