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
