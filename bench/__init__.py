"""Rill's throughput benchmarks: each workload runs on Rill and on the hand-written Python
loop that calls the same user functions, in the same process and the same run, and states
Rill's figure as a ratio of the loop's (see ``bench/README.md``).

Run from the repository root: ``python -m bench.run``.
"""
