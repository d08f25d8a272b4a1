"""Reference answers, one file per notebook (``NN_<notebook>.py``), loaded by ``helpers.exercises.solution("NN.name")``.

They live inside the package so that an installed ``helpers`` finds them as a checkout does; ``make student``
writes hand-out notebooks that neither show nor grade them.
"""
