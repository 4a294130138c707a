"""``TypeSerializer`` (PyFlink's ``pyflink.common.serializer``; Flink's
``api.common.typeutils.TypeSerializer``): writes a value of one type to a binary stream and
reads it back, for user-defined types that need a fixed binary form (window serializers,
custom state). Rill's own data paths serialize with declared types and msgpack/Arrow; a
``TypeSerializer`` is what user code and PyFlink-ported assigners name.
"""

from __future__ import annotations

import abc
from io import BytesIO
from typing import Generic, TypeVar

__all__ = ["TypeSerializer"]

T = TypeVar("T")


class TypeSerializer(abc.ABC, Generic[T]):
    """Serializes values of one type to a ``BytesIO`` and back (PyFlink's ``TypeSerializer``);
    two serializers of the same class and settings are equal."""

    @abc.abstractmethod
    def serialize(self, element: T, stream: BytesIO) -> None:
        """Write ``element`` at the stream's position."""

    @abc.abstractmethod
    def deserialize(self, stream: BytesIO) -> T:
        """Read one element from the stream's position.

        :raises EOFError: when the stream ends before a whole element.
        """

    def __eq__(self, other) -> bool:
        return isinstance(other, self.__class__) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
