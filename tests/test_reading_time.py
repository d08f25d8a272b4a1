"""The workshop budget (the website's workshop page): tools.reading_time's formula, the DEEP_DIVES switch, and the budget
itself on the stored notebooks."""
import json
import types

import pytest

from helpers import deep_dives
from helpers.progress import progress
from tools import reading_time as rt
from tools.execute import inject_core_switch
from tools.notebooks import notebook_paths


def md(text, id="m"):
    return {"cell_type": "markdown", "source": text, "id": id, "metadata": {}}


def code(text, outputs=(), id="c"):
    return {"cell_type": "code", "source": text, "id": id, "metadata": {}, "outputs": list(outputs)}


def test_the_formula_counts_words_code_lines_and_output_lines():
    assert rt.markdown_words("Read [the docs](https://x.y/z) — **now**, <b>please</b>.") == 5
    assert rt.code_lines("x = 1\n\n# a comment\n  y = 2  # trailing\n") == 2
    cell = code("print(1)", [{"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
                             {"output_type": "display_data", "data": {"image/png": "..", "text/plain": "<Figure>"}},
                             {"output_type": "execute_result", "data": {"text/html": "<tr><tr><tr>", "text/plain": "x"}}])
    assert rt.output_lines(cell) == 2 + 1 + 3
    part = rt.measure([md("one two three four"), cell])
    assert part.minutes == pytest.approx(4 / 200 + 1 / 10 + 6 / 60)


def test_a_careful_read_is_slower_and_gives_each_figure_a_minute():
    cell = code("print(1)", [{"output_type": "stream", "name": "stdout", "text": "a\nb\n"},
                             {"output_type": "display_data", "data": {"image/png": "..", "text/plain": "<Figure>"}}])
    part = rt.measure([md("one two three four"), cell])
    assert (part.outputs, part.figures) == (3, 1)
    assert part.minutes_at(rt.CAREFUL) == pytest.approx(4 / 120 + 1 / 6 + 2 / 30 + 1.0)
    assert part.minutes_at(rt.SKIMMING) == part.minutes


def test_the_careful_budget_names_each_breach():
    core = rt.measure([md("w " * 4300), code("\n".join(["H.check(y)"] * 21))])
    deep = rt.measure([code("# Deep dive A: x\n" + "\n".join(["y = g.execute(p)"] * 41), id="d")])
    found = "\n".join(rt.careful_problems([rt.Notebook("09_x", core, deep, 1, [], [], None, None)]))
    for expected in ("reads carefully in 39 min, over 35", "core code cell c has 21 lines, over 20",
                     "deep-dive code cell d has 42 lines, over 40", "0 cuDNN API references and 21 H.* calls, under 1.5"):
        assert expected in found, found
    assert rt.careful_problems([rt.Notebook("09_y", rt.measure([code("g.execute(p)\ng.build()\nH.check(y)")]),
                                            rt.Part(), 0, [], [], None, None)]) == []


def test_the_core_ends_at_the_deep_dives_heading_and_api_references_are_counted():
    nb = {"cells": [md("# 02 · Title"), code("g = cudnn.pygraph()\ny = g.conv_fprop(x, w)\nH.check(y, ref)"),
                    md("# Deep dives\n\nOptional."), code("# Deep dive A: a sweep\nH.perf_sweep(p, f)")]}
    core, deep = rt.split_core(nb)
    assert len(core) == 2 and len(deep) == 2
    part = rt.measure(core)
    assert (part.api, part.helpers) == (2, 1)
    assert rt.measure([code("torch.add(a, b)\nH.build(g)\nplt.plot(x)")]).api == 0
    assert rt.measure([code("torch.backends.cudnn.benchmark = True\nprint(torch.backends.cudnn.version())")]).api == 0


def test_the_budget_names_each_breach():
    nb = rt.Notebook("09_x", rt.measure([md("w " * 200), code("\n".join(["H.check(y)"] * 30))]), rt.Part(), 1,
                     ["d1"], [], None, None)
    found = "\n".join(rt.problems([nb]))
    for expected in ("200 words", "30 lines", "nor a '# Deep dive X", "0 cuDNN API references"):
        assert expected in found


def test_cells_after_a_deep_dive_guard_need_no_marker_and_cells_before_any_need_one():
    deep = [md("# Deep dives"), code("x = 1", id="loose"), code("# Deep dive A: fine\ny = 2", id="marked"),
            md("## Deep dive B · more"), code('H.deep_dive("B", "more", DEEP_DIVES)', id="guard"),
            code("z = 3", id="after"), code('H.record("01", "m", 1.0, "ms")', id="record")]
    assert rt.unguarded(deep) == ["loose"]
    assert rt.unguarded([code("w = 0", id="w")]) == ["w"]


def test_the_tool_reads_the_notebooks_it_is_given(tmp_path, capsys):
    path = tmp_path / "09_draft.ipynb"
    path.write_text(json.dumps({"cells": [md("# 09 · A draft"), code("g = cudnn.pygraph()\ng.build([A])")]}))
    assert rt.main(["--careful", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("09_draft: core 0 min") and "all cores: 0 min" in out


def test_a_marked_cell_prints_one_line_and_skips_only_when_the_switch_is_off():
    shell = types.SimpleNamespace(user_ns={})
    skip = deep_dives._transformer(shell)
    cell = ["# Deep dive B: the sweep\n", "raise SystemExit\n"]
    assert skip(cell) == cell                                   # default: runs
    shell.user_ns["DEEP_DIVES"] = False
    assert skip(cell) == ["print('skipped: deep dive B (the sweep), DEEP_DIVES = False')\n"]
    assert skip(["x = 1\n"]) == ["x = 1\n"]                    # a core cell always runs
    assert deep_dives.marker("# Deep dive A · clocks\nx") == ("A", "clocks")
    assert deep_dives.marker("# deep diving\nx") is None


def test_install_is_a_no_op_outside_ipython():
    assert deep_dives.install() is False


def test_a_core_run_injects_the_switch_after_the_parameters_cell():
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import helpers"),
                                         nbformat.v4.new_code_cell("DEEP_DIVES = True")])
    nb.cells[1].metadata["tags"] = ["parameters"]
    inject_core_switch(nb)
    assert nb.cells[2].source.startswith("DEEP_DIVES = False") and len(nb.cells) == 3


def test_headless_progress_prints_one_line(monkeypatch, capsys):
    monkeypatch.setenv("COURSE_HEADLESS", "1")
    assert list(progress(range(3), "points")) == [0, 1, 2]
    out = capsys.readouterr()
    assert out.out.startswith("points: 3 steps in") and out.err == ""


BOOKS = rt.read_all()


API_RULE = "cuDNN API references"


@pytest.mark.parametrize("book", BOOKS, ids=[b.name for b in BOOKS])
def test_each_notebook_keeps_the_workshop_budget(book):
    assert [p for p in rt.problems([book]) if API_RULE not in p] == []


@pytest.mark.parametrize("book", BOOKS, ids=[b.name for b in BOOKS])
def test_each_core_refers_to_the_api_at_least_as_often_as_to_the_helpers(book):
    assert [p for p in rt.problems([book]) if API_RULE in p] == []


def test_all_cores_fit_one_day():
    """The table itself is generated where it is shown (the website); tests/test_site.py reads it there."""
    assert sum(b.core.minutes for b in BOOKS) <= rt.CORES_MAX_MIN


def test_no_stored_output_holds_a_progress_bar():
    for path in notebook_paths():
        for cell in json.loads(path.read_text())["cells"]:
            for out in cell.get("outputs", []):
                text = "".join(out.get("text", "")) if out.get("output_type") == "stream" else ""
                assert "\r" not in text and "it/s]" not in text, f"{path.name} {cell.get('id')}: a stored progress bar"


def test_a_core_run_reports_ok_and_runs_with_the_switch_off(tmp_path, monkeypatch):
    """A core run on a tiny notebook (a real kernel, CPU): status 'ok', DEEP_DIVES False inside, cells timed."""
    import nbformat

    from tools import execute, notebooks

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("DEEP_DIVES = True"),
                                         nbformat.v4.new_code_cell("print('core' if DEEP_DIVES is False else 'all')")])
    nb.cells[0].metadata["tags"] = ["parameters"]
    path = tmp_path / "09_tiny.ipynb"
    nbformat.write(nb, path)
    monkeypatch.setattr(execute, "LOG_DIR", tmp_path / "logs")
    name, status, runtime = execute.execute_one(str(path), str(tmp_path / "out"), 120, False, core=True)
    assert status == "ok" and runtime > 0
    ran = nbformat.read(tmp_path / "out" / "09_tiny.ipynb", as_version=4)
    assert ran.cells[2].outputs[0]["text"] == "core\n"
    assert 0 <= notebooks.core_seconds(ran) < runtime


def test_the_core_time_spans_the_core_cells_of_the_full_run():
    import nbformat

    from tools import notebooks

    def timed(source, start, end):
        cell = nbformat.v4.new_code_cell(source)
        cell.metadata["execution"] = {"iopub.execute_input": f"2026-12-04T10:00:{start:02d}.000000Z",
                                      "shell.execute_reply": f"2026-12-04T10:00:{end:02d}.500000Z"}
        return cell

    nb = nbformat.v4.new_notebook(cells=[timed("x = 1", 1, 2), timed("y = 2", 3, 7),
                                         nbformat.v4.new_markdown_cell("# Deep dives"),
                                         timed("# Deep dive A: more\nz = 3", 8, 30)])
    assert notebooks.core_seconds(nb) == 6.5            # 10:00:01 to 10:00:07.5; the deep dive is not counted
    nb.cells[2].source = "## Not the heading"
    assert notebooks.core_seconds(nb) == 29.5           # no deep dives: the whole run
    assert notebooks.core_seconds(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x")])) is None
