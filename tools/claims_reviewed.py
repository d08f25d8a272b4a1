"""A reviewer's reasons that a comparative in the prose holds on every run, though no printed verdict backs it.

    (notebook, markdown cell id, word) -> the reason, in one line

``python -m tools.claims --comparatives`` shows the reason next to the entry and names keys that no longer match
an entry (the prose or the cell changed: review it again). Words are as in ``tools.claims.COMPARATIVE_WORDS``.
Example: ``("02", "227589c0", "faster"): "bias + ReLU in the epilogue saves two passes over Y on any GPU"``.
"""

REVIEWED: dict[tuple[str, str, str], str] = {
    ('03', '80c645dc', 'slower'): 'defines the max_ms rule (a first run over the limit is timed once), not a measurement',
    ('03', '383fb5be', 'faster'): "names the two outcomes section 6 decides between and prints from the run, not a verdict",
    ('03', 'd62b516e', 'faster'): "describes the grader's rule (faster beyond the noise fails), not a measured outcome",
    ('04', '9a6a36ea', 'compute-bound'): 'a 1.1-TFLOP GEMM has an arithmetic intensity of thousands of FLOP per byte, far above the ridge point of any GPU the course runs on',
    ('05', 'c7df22ed', 'gains less'): "mechanism (Amdahl): the softmax runs on the CUDA cores at the same speed in FP8 and bf16, so attention's FP8 gain is below the matmuls' on any GPU",
    ('06', 'c595968a', 'slower'): 'defines what a factor below 1 means (a reload slower than a build); the rows above print which graphs it applies to',
    ('07', 'a5bf40ca', 'slower'): 'a condition for a pin to pay, not a verdict; the cell below it prints the pinned vs per-shape GPU time',
    ('07', '5b58f5e5', 'slower'): "a possibility ('may') from the mechanism (no specialisation on run-time sizes), not a verdict",
    ('07', '244d55b7', 'slower'): "a possibility ('may'); section 3's verdict prints the measured dynamic vs static kernel time",
    ('02', '452c0503', 'faster'): "states the course's bars (targets, which tools/claims --bars checks against the code), not a measured outcome",
    ('03', '9eb80bb7', 'wins'): "a condition for a winner to be useful ('only if it wins again'), not a verdict",
    ('04', 'e0ed6c07', 'loses'): "mechanism: what the fused AMAX costs, whichever way it goes; the line above prints which was faster on this run",
    ('07', '93927934', 'ahead'): "'compiled ahead' means ahead of time: it compares nothing",
    ('07', 'e1a0f382', 'loses'): "a restart frees the process's memory, compiled kernels included, on every run: it compares nothing",
    ('08', 'cf51f144', 'behind'): "'behind the cache' says where the recipe sits, it compares nothing",
    ('04', '0be9f1e6', 'slower'): "a condition ('if ... is not slower') telling how to read the printed times of the two routes, not a verdict",
}
