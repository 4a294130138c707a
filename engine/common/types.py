"""PyFlink's ``pyflink.common.types``: ``Row`` and ``RowKind``, defined in :mod:`rill.common.row`."""

from rill.common.row import Row, RowKind

__all__ = ["Row", "RowKind"]
