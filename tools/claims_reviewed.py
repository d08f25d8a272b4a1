"""A reviewer's reasons that a comparative in the prose holds on every run, though no printed verdict backs it.

    (notebook, word, a quote from its sentence) -> the reason, in one line

The quote is a few words of the sentence around the word, as ``python -m tools.claims --comparatives`` prints it
(code spans read `…`): a review follows its sentence into whichever cell holds it, so splitting or merging cells
keeps it, and a review whose quote no longer stands in a sentence with that word is named stale (the sentence
changed: review it again). Words are as in ``tools.claims.COMPARATIVE_WORDS``. Example:
``("02", "faster", "bias + ReLU in the epilogue"): "saves two passes over Y on any GPU"``.
"""

REVIEWED: dict[tuple[str, str, str], str] = {
    ('04', 'faster', 'the timer that runs first has the faster GPU'):
        "a hypothesis the cell below tests (three rotated rounds, SM cycles), stated as a condition ('if the GPU slows'), not a verdict",
    ('05', 'gains less', 'same speed as in bf16, so attention gains less than a plain GEMM does'):
        "mechanism (Amdahl): the softmax runs on the CUDA cores at the same speed in FP8 and bf16, so attention's FP8 gain is below the matmuls' on any GPU",
    ('06', 'slower', 'factor and can take it below 1 (a reload slower than a build).'):
        'defines what a factor below 1 means (a reload slower than a build); the rows above print which graphs it applies to',
    ('07', 'slower', 'good deal if its kernel is not much slower where it was not the'):
        'a condition for a pin to pay, not a verdict; the cell below it prints the pinned vs per-shape GPU time',
    ('07', 'slower', 'cannot specialise on them, so it may run slower than the one a static'):
        "a possibility ('may') from the mechanism (no specialisation on run-time sizes), not a verdict",
    ('07', 'slower', 'A dynamic kernel may run slower than a static one, and'):
        "a possibility ('may'); section 3's verdict prints the measured dynamic vs static kernel time",
    ('02', 'faster', 'the GPU-time clock: the fused graph at least 2× faster than torch eager'):
        "defines the course's targets (bars, which tools/claims --bars checks against the code), not a measured outcome",
    ('02', 'behind', 'the wall time of a call made while the GPU runs behind.'):
        "'runs behind' says the GPU is still busy with earlier calls while the host's time is taken: it compares nothing",
    ('03', 'wins', 'A winner picked from noisy timings is useful only if it wins again.'):
        "a condition for a winner to be useful ('only if it wins again'), not a verdict",
    ('07', 'ahead', 'topology, so no matmul kernel is compiled ahead), builds and times every'):
        "'compiled ahead' means ahead of time: it compares nothing",
    ('07', 'loses', 'A server restart loses everything compiled'):
        "a restart frees the process's memory, compiled kernels included, on every run: it compares nothing",
    ('08', 'behind', "The body is notebook 05's recipe behind the cache."):
        "'behind the cache' says where the recipe sits, it compares nothing",
}
