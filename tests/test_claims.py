"""tools/claims.py: the numbers the notebooks' prose states (issue 14's claim table starts here)."""
from pathlib import Path
from tools.notebooks import notebook_paths

ROOT = Path(__file__).resolve().parent.parent


def test_claims_are_measured_numbers_with_their_sentence_not_dimensions_or_code():
    from tools.claims import claims_in

    text = ("A 3×3 conv on 56×56 images. Fused took 0.08–0.10 ms across H200 runs, 2.4× eager.\n\n"
            "- `torch.compile` ran at 510 TFLOP/s (`x = 5 ms` in code is not a claim); 12% slower")
    found = [(c.value, c.unit) for c in claims_in(text, "02", "abc")]
    assert found == [("0.08–0.10", "ms"), ("2.4", "×"), ("510", "TFLOP/s"), ("12", "%")]
    first = claims_in(text)[0]
    assert first.sentence == "Fused took 0.08–0.10 ms across H200 runs, 2.4× eager."


def test_every_notebooks_prose_numbers_are_listed():
    from tools.claims import notebook_claims

    claims = [c for p in notebook_paths() for c in notebook_claims(p)]
    assert claims and all(c.sentence and c.cell for c in claims)


def test_a_measurement_must_say_where_it_was_seen_a_target_need_not():
    from tools.claims import claims_in, unqualified

    bare = claims_in("Fused took 0.08 ms.")
    assert [c.value for c in unqualified(bare)] == ["0.08"]
    assert unqualified(claims_in("Fused took 0.08–0.10 ms across H200 runs.")) == []
    assert unqualified(claims_in("On the H200 it is fast.\n\nFused took 0.08 ms.")) == []   # the cell names the GPU
    assert unqualified(claims_in("The bar: at least 2× faster than eager.")) == []
    assert unqualified(claims_in("The backward does 2.5× the forward's FLOPs.")) == []


def test_no_notebook_quotes_a_measurement_without_saying_where_it_was_seen():
    """Prose may quote numbers only as ranges seen on a named GPU, or as targets; the stored run's own
    numbers come from printed outputs (issue 14)."""
    from tools.claims import notebook_claims, unqualified

    bad = [str(c) for p in notebook_paths() for c in unqualified(notebook_claims(p))]
    assert not bad, "\n".join(bad)


# ---- bars quoted in prose against the bars the code prints (issue 25) ----------------------------------------

def _notebook(markdown: str, printed: str, between: list[str] = ()):
    """A synthetic notebook: one markdown cell (id "md1"), optional code cells, and a code cell (id "code1") that
    printed ``printed``."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    cells = [new_markdown_cell(markdown, id="md1")]
    cells += [new_code_cell("pass", id=f"gap{i}") for i, _ in enumerate(between)]
    cells.append(new_code_cell("print(...)", id="code1", outputs=[new_output("stream", name="stdout", text=printed)]))
    return new_notebook(cells=cells)


BAR_CODE = ("bar: cuDNN replay >= 5x faster than the eager cuDNN loop: 6.78x -> met\n"
            "  small: eager ÷ fused, GPU time   1.62x  (bar 1.3x: met)\n"
            "forward at S=8192: 629 TFLOP/s = 80% of the measured peak  (bar 600: met)\n"
            "bar: fused, % of measured peak   82.68% (at least 75%): met\n"
            "bar, S=4096: FP8 vs bf16 = 1.46x (target ≥ 1.3x): met\n"
            "worst plan: plan 31, ≥ 120.888 ms (≥ 1468x the best)\n")          # not a bar line: no bar, target, met


def test_printed_bars_are_read_in_every_form_the_notebooks_print():
    from tools.claims import printed_bars

    bars = [b.shown for b in printed_bars(_notebook("", BAR_CODE), "08")]
    assert bars == ["5×", "1.3×", "600 TFLOP/s", "75%", "1.3×"]     # "(bar 600: met)" takes the line's TFLOP/s


def test_a_prose_bar_is_a_number_after_a_cue_or_before_bar_not_any_number_in_the_sentence():
    from tools.claims import prose_bars

    text = ("The bar sits on attention, whose cold build took 0.3–0.9 s across H200 runs. Fused at least 2× faster, "
            "at least 75 % of peak and at least 600 TFLOP/s; it needs cuDNN ≥ 9.5 at S ≥ 4k.\n\n"
            "Against the course's 5× bar, which this run met or missed.")
    assert [b.shown for b in prose_bars(_notebook(text, ""))] == ["2×", "75%", "600 TFLOP/s", "5×"]


def test_a_prose_bar_the_code_does_not_print_fails_with_one_line_naming_it():
    from tools.claims import bar_mismatches

    right = "Across H200 runs it ranged from under 5× to over 12× against the course's 5× bar."
    assert bar_mismatches(_notebook(right, BAR_CODE), "08") == []
    wrong = right.replace("5× bar", "50× bar")
    problems = bar_mismatches(_notebook(wrong, BAR_CODE), "08")
    assert len(problems) == 1 and "\n" not in problems[0]
    assert problems[0].startswith("08 md1: prose bar 50× is not a bar the code prints "
                                  "(printed: 5×, 1.3×, 600 TFLOP/s, 75%)")


def test_bar_units_compare_by_family_x_and_times_are_one_unit():
    from tools.claims import bar_mismatches

    code = "bar: reload at least 20x faster -> met\nbar: step <= 2 ms -> met\n"
    assert bar_mismatches(_notebook("The bar: a step ≤ 2 MS, and at least 20 X faster.", code), "06") == []  # any case
    assert bar_mismatches(_notebook("The bars: at least 20× faster, and a step ≤ 2000 µs.", code), "06") == []
    assert bar_mismatches(_notebook("The bar: at least 20 % faster.", code), "06")     # % is not ×
    assert bar_mismatches(_notebook("The bar: a step ≤ 20 ms.", code), "06")           # 20 ms is not 2 ms


def test_a_condition_printed_on_a_bar_line_is_not_a_bar():
    from tools.claims import bar_mismatches, printed_bars

    code = "bar: cuDNN decode >= 1.0x torch SDPA at B >= 16, paged: lowest 0.962x -> NOT met\n(bar 600: met) 612 TFLOP/s\n"
    assert [b.shown for b in printed_bars(_notebook("", code))] == ["1.0×", "600 TFLOP/s"]
    assert bar_mismatches(_notebook("The bar: at least 16× faster.", code), "05")   # 16 is no printed bar


def test_every_bar_the_prose_quotes_is_a_bar_its_notebook_prints():
    from tools.claims import bar_mismatches, prose_bars, _notebook as read

    assert sum(len(prose_bars(*read(p))) for p in notebook_paths()) >= 8        # 02, 05, 07, 08 quote bars
    bad = [line for p in notebook_paths() for line in bar_mismatches(p)]
    assert not bad, "\n".join(bad)


# ---- comparatives and the printed verdicts that back them (issue 25) ------------------------------------------

def test_comparatives_are_found_with_their_sentence_notebook_and_cell():
    from tools.claims import comparatives

    text = ("Fused is faster than eager. Decode is bandwidth-bound: judge it in GB/s. AMAX costs almost "
            "nothing fused. The `faster` in code is not prose.")
    found = [(e.notebook, e.cell, e.word, e.sentence) for e in comparatives(_notebook(text, ""), "04", reviewed={})]
    assert found == [("04", "md1", "faster", "Fused is faster than eager."),
                     ("04", "md1", "bandwidth-bound", "Decode is bandwidth-bound: judge it in GB/s."),
                     ("04", "md1", "almost nothing", "AMAX costs almost nothing fused.")]


def test_a_comparative_is_backed_by_a_printed_line_with_its_word_or_for_speed_a_verdict_nearby():
    from tools.claims import comparatives, unbacked

    text = "Fused is faster than eager. Decode is bandwidth-bound. AMAX is negligible."
    verdict = _notebook(text, "bar: fused vs eager 2.1x (at least 2x): met\nfused vs eager: fused ahead by 110%\n"
                              "decode: bandwidth-bound (3.1 TB/s)\n")
    words = {e.word: e.backed_by for e in comparatives(verdict, "04", reviewed={})}
    assert words["faster"] == "cell code1: fused vs eager: fused ahead by 110%"   # a side named backs a speed word
    assert words["bandwidth-bound"] == "cell code1: decode: bandwidth-bound (3.1 TB/s)"   # the same word backs it
    assert words["negligible"] == ""                                                # a verdict does not back it
    assert [e.word for e in unbacked(comparatives(verdict, "04", reviewed={}))] == ["negligible"]
    # a verdict printed too far away (more than three code cells on) backs nothing
    far = _notebook(text, "ahead\nbandwidth-bound\nnegligible\n", between=["", "", ""])
    assert [e.word for e in unbacked(comparatives(far, "04", reviewed={}))] == ["faster", "bandwidth-bound",
                                                                                 "negligible"]


def test_a_bars_met_says_nothing_of_who_is_quicker_so_it_backs_no_speed_word():
    from tools.claims import comparatives, unbacked

    met_only = _notebook("Fused is faster than eager.", "bar: fused vs eager 2.1x (at least 2x): met\n")
    assert [e.word for e in unbacked(comparatives(met_only, "04", reviewed={}))] == ["faster"]


def test_a_reviewed_reason_is_shown_next_to_its_entry_and_a_stale_one_is_named():
    from tools.claims import comparatives, stale_reviews, unbacked

    reviewed = {("04", "negligible", "AMAX is negligible"): "one max per tile against a GEMM's K-loop on any GPU",
                ("04", "faster", "the sentence is gone"): "it said something else"}
    entries = comparatives(_notebook("AMAX is negligible.", ""), "04", reviewed=reviewed)
    (entry,) = unbacked(entries)
    assert entry.reason == reviewed[("04", "negligible", "AMAX is negligible")]
    assert str(entry).endswith("[reviewed: one max per tile against a GEMM's K-loop on any GPU]")
    assert stale_reviews(entries, reviewed) == [("04", "faster", "the sentence is gone")]


def test_a_review_follows_its_sentence_into_another_cell_and_goes_stale_when_the_sentence_changes():
    from nbformat.v4 import new_markdown_cell
    from tools.claims import comparatives, stale_reviews

    reviewed = {("04", "negligible", "AMAX is negligible"): "one max per tile"}
    nb = _notebook("Intro.\n\nAMAX is negligible here.", "")
    first, second = nb.cells[0].source.split("\n\n")
    nb.cells[:1] = [new_markdown_cell(first, id="md1"), new_markdown_cell(second, id="md2")]   # the cell split
    (entry,) = comparatives(nb, "04", reviewed=reviewed)
    assert (entry.cell, entry.reason) == ("md2", "one max per tile") and stale_reviews([entry], reviewed) == []
    nb.cells[1].source = "AMAX costs almost nothing, and it is negligible."
    entries = comparatives(nb, "04", reviewed=reviewed)
    assert all(not e.reason for e in entries) and stale_reviews(entries, reviewed) == list(reviewed)


def test_the_reviewed_reasons_match_comparatives_in_the_notebooks():
    from tools.claims import comparatives, reviewed_reasons, stale_reviews

    reviewed = reviewed_reasons()
    entries = [e for p in notebook_paths() for e in comparatives(p, reviewed=reviewed)]
    assert all(isinstance(r, str) and r.strip() for r in reviewed.values())
    assert stale_reviews(entries, reviewed) == []


def test_every_comparative_in_the_notebooks_is_backed_by_a_printed_verdict_or_a_reviewed_reason():
    """Issue 25: a conclusion word in the prose is printed from the measurement nearby, or a reviewer says why it
    holds on every run (tools/claims_reviewed.py)."""
    from tools.claims import comparatives, reviewed_reasons, unbacked

    reviewed = reviewed_reasons()
    loose = [str(e) for p in notebook_paths() for e in unbacked(comparatives(p, reviewed=reviewed)) if not e.reason]
    assert loose == [], "unbacked comparatives (print a verdict, or give a reason in tools/claims_reviewed.py):\n" + \
        "\n".join(loose)


def test_the_comparatives_command_runs_on_the_notebooks_and_prints_a_count_line(capsys):
    import re
    from tools.claims import main

    assert main(["--comparatives"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"\d+ unbacked comparatives .* of \d+ in the markdown of 8 notebooks; per notebook: "
                        r"01 \d+, 02 \d+, 03 \d+, 04 \d+, 05 \d+, 06 \d+, 07 \d+, 08 \d+", lines[-1])
    assert all(line.startswith(("? ", "  ", "stale review")) for line in lines[:-1])


def test_the_bars_command_checks_the_notebooks(capsys):
    from tools.claims import main

    assert main(["--bars"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(", 0 not")


# ---- numbers changed in the prose since the GPU run -----------------------------------------------------------

def test_a_bare_number_after_a_claim_and_a_connective_is_the_same_quantity():
    from tools.claims import claims_in

    text = "NVIDIA's H200 results put FP8 at about 870–1060 TFLOP/s against 630–700 for bf16."
    assert [(c.value, c.unit) for c in claims_in(text)] == [("870–1060", "TFLOP/s"), ("630–700", "TFLOP/s")]
    for other in ("A step takes 3 ms and 16 layers run.", "It took 2 ms over 3 warm-up calls.", "5 ms or 6 GiB."):
        assert len(claims_in(other)) == 1, other                                 # the number has a word of its own
    assert [(c.value, c.unit) for c in claims_in("Builds took 40 ms to 600 ms on the H200.")] == [("40", "ms"),
                                                                                                  ("600", "ms")]


def _stamped_prose(markdown: str, record):
    from nbformat.v4 import new_markdown_cell, new_notebook

    nb = new_notebook(cells=[new_markdown_cell(markdown, id="md1")])
    nb.metadata["cudnn_course"] = {"execution": {"prose_claims": record}}
    return nb


def test_a_number_changed_after_the_run_is_listed_with_its_cell_bar_or_not():
    from tools.claims import changed_claims, prose_record

    ran = "On the H200 the build took 0.3–0.9 s; the bar is at least 20× faster."
    record = prose_record(_stamped_prose(ran, None))
    assert record == {"md1": ["0.3–0.9 s", "20 ×"]}
    assert changed_claims(_stamped_prose(ran, record), "06") == []
    (changed,) = changed_claims(_stamped_prose(ran.replace("0.3–0.9 s", "0.1–0.9 s"), record), "06")
    assert (changed.notebook, changed.cell, changed.value, changed.unit) == ("06", "md1", "0.1–0.9", "s")
    assert [c.value for c in changed_claims(_stamped_prose(ran.replace("20×", "25×"), record), "06")] == ["25"]
    assert changed_claims(_stamped_prose(ran + " It also took 2 ms there.", record), "06")[0].value == "2"
    assert changed_claims(_stamped_prose(ran, None), "06") is None             # a stamp from before the record


def test_a_changed_measured_number_in_a_real_notebooks_prose_is_listed(tmp_path, capsys):
    """05 quotes NVIDIA's bf16 rate as a bare range after the FP8 one ("… TFLOP/s against 630–700 for bf16"): not a
    bar, a measured quantity. Changed after the run, `tools.claims --changed` lists it and exits 1."""
    import nbformat
    from tools.claims import main, prose_record
    from tools.notebooks import META_KEY, notebook_path

    nb = nbformat.read(notebook_path("05"), as_version=4)
    nb.metadata[META_KEY]["execution"]["prose_claims"] = prose_record(nb)
    path = tmp_path / "05_sdpa_attention.ipynb"
    nbformat.write(nb, path)
    assert main(["--changed", str(path)]) == 0
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and "against 630–700 for bf16" in c.source)
    cell.source = cell.source.replace("630–700", "930–1000")
    nbformat.write(nb, path)
    capsys.readouterr()
    assert main(["--changed", str(path)]) == 1
    (line, summary) = capsys.readouterr().out.splitlines()
    assert line.startswith(f"! 05_sdpa_attention.ipynb cell {cell.id}: the prose says 930–1000 TFLOP/s, which its GPU "
                           "run's prose did not") and summary.startswith("1 numeric claims")
    assert line.endswith("re-execute it on a GPU (python -m tools.execute notebooks/05_sdpa_attention.ipynb)")
    assert main([str(path)]) == 0 and f"! 05 {cell.id}  930–1000 TFLOP/s" in capsys.readouterr().out


def test_the_changed_command_names_a_stamp_without_the_record(tmp_path, capsys):
    import nbformat
    from tools.claims import main
    from tools.notebooks import META_KEY

    nb = nbformat.read(notebook_paths()[0], as_version=4)
    nb.metadata[META_KEY]["execution"].pop("prose_claims", None)
    nbformat.write(nb, tmp_path / notebook_paths()[0].name)
    name = notebook_paths()[0].name
    assert main(["--changed", str(tmp_path / name)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"! {name}: its stamp records no prose (executed before tools.execute recorded it): re-execute it on a GPU "
        f"(python -m tools.execute notebooks/{name})",
        "1 numeric claims in the markdown of 1 notebooks changed since their GPU run"]


def test_splitting_a_markdown_cell_changes_no_claim():
    from nbformat.v4 import new_markdown_cell
    from tools.claims import changed_claims, prose_record

    ran = "On the H200 the build took 0.3–0.9 s.\n\nThe bar is at least 20× faster."
    nb = _stamped_prose(ran, prose_record(_stamped_prose(ran, None)))
    first, second = ran.split("\n\n")
    nb.cells = [new_markdown_cell(first, id="md1"), new_markdown_cell(second, id="md2")]
    assert changed_claims(nb, "06") == []
    nb.cells[1].source = second.replace("20×", "25×")
    assert [(c.cell, c.value) for c in changed_claims(nb, "06")] == [("md2", "25")]


def test_no_number_in_the_prose_changed_since_its_notebooks_gpu_run(capsys):
    """`python -m tools.claims --changed` on the committed notebooks: every number the prose states is one the
    prose said when the notebook last ran on a GPU (the stamp's ``prose_claims``). One line per changed number."""
    from tools.claims import main

    code = main(["--changed"])
    out = capsys.readouterr().out.splitlines()
    assert code == 0, "\n".join(out[:-1])
    assert out == [f"0 numeric claims in the markdown of {len(notebook_paths())} notebooks changed since their GPU run"]
