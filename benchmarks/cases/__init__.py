"""The benchmark cases, one module per kind of work.

Each case function takes a :class:`benchmarks.config.Context` and returns a
list of :class:`benchmarks.record.Row`. Failures of dlmg's side are recorded in
the rows; an exception escaping a case function is recorded by the suite as the
case's error.
"""
