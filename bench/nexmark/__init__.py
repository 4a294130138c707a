"""Nexmark on Rill (issue 16): the deterministic generator as a splittable Rill source, queries
q0-q8, q11 and q12 as DataStream programs, plain-Python references, and the benchmark
(``python -m bench.nexmark`` / ``rill bench nexmark``). See bench/README.md, "Nexmark"."""
