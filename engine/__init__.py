"""Rill: a stream processing engine with the architecture of Apache Flink's runtime."""

__version__ = "0.1.0"
