"""dlmg's benchmark suite.

Every figure compares dlmg against the native framework doing the same work in
the same run (a ratio ``dlmg time / native time``). Run it with
``python benchmarks/run.py`` (quick), ``--full`` (larger sizes) or ``--gpu``
(the CUDA cases only); see :mod:`benchmarks.suite` for the options.
"""
