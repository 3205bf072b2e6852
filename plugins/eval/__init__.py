"""Bundled evaluators (PROVE suites, BFCL, τ²-bench, T-Eval, NESTFUL) and, in ``servers``, the
benchmark environments they wrap as PROVE servers."""
