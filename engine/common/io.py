"""Input formats (PyFlink's ``pyflink.common.io``; Flink's ``api.common.io.InputFormat``)."""

from __future__ import annotations

from rill.common.connector.source import Source

__all__ = ["InputFormat"]


class InputFormat(Source):
    """A bounded input read with ``StreamExecutionEnvironment.create_input`` (Flink's
    ``InputFormat``, e.g. ``AvroInputFormat``).

    Rill runs an input format on the Source API (FLIP-27) rather than Flink's legacy
    ``InputFormatSourceFunction``: a subclass is a :class:`~rill.common.connector.source.Source`
    whose splits are its input splits (``create_splits`` / ``create_reader``), so
    ``create_input(fmt)`` is ``from_source(fmt, None, "Custom Source")``.
    """
