"""A reviewer's reasons that a comparative in the prose holds on every run, though no printed verdict backs it.

    (notebook, word, a quote from its sentence) -> the reason, in one line

The quote is a few words of the sentence around the word, as ``python -m tools.claims --comparatives`` prints it
(code spans read `…`): a review follows its sentence into whichever cell holds it, so splitting or merging cells
keeps it, and a review whose quote no longer stands in a sentence with that word is named stale (the sentence
changed: review it again). Words are as in ``tools.claims.COMPARATIVE_WORDS``. Example:
``("02", "faster", "bias + ReLU in the epilogue"): "saves two passes over Y on any GPU"``.
"""

REVIEWED: dict[tuple[str, str, str], str] = {
    ('03', 'slower', 'runs, L2 flushed before each; a plan slower than `…` is timed once'):
        'defines the max_ms rule (a first run over the limit is timed once), not a measurement',
    ('03', 'faster', '6 prints which case this run is, a faster plan beyond the timing'):
        'names the two outcomes section 6 decides between and prints from the run, not a verdict',
    ('03', 'faster', "heuristic's first when another plan is faster beyond the noise, fails."):
        "describes the grader's rule (faster beyond the noise fails), not a measured outcome",
    ('04', 'compute-bound', '`…` is a batched, compute-bound GEMM.'):
        'a 1.1-TFLOP GEMM has an arithmetic intensity of thousands of FLOP per byte, far above the ridge point of any GPU the course runs on',
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
    ('03', 'wins', 'noisy timings is only useful if it wins again.'):
        "a condition for a winner to be useful ('only if it wins again'), not a verdict",
    ('04', 'loses', "one costs whatever cuDNN's own kernel loses to cuBLASLt's."):
        'mechanism: what the fused AMAX costs, whichever way it goes; the line above prints which was faster on this run',
    ('07', 'ahead', 'topology, so no matmul kernel is compiled ahead), builds and times every'):
        "'compiled ahead' means ahead of time: it compares nothing",
    ('07', 'loses', 'A server restart loses everything compiled'):
        "a restart frees the process's memory, compiled kernels included, on every run: it compares nothing",
    ('08', 'behind', "The body is notebook 05's recipe behind the cache."):
        "'behind the cache' says where the recipe sits, it compares nothing",
    ('04', 'slower', '6 activations instead of 4, is not slower than the fused graph,'):
        "a condition ('if ... is not slower') telling how to read the printed times of the two routes, not a verdict",
}
