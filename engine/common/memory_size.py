"""``MemorySize`` (Flink's ``org.apache.flink.configuration.MemorySize``; PyFlink's
``pyflink.datastream.slot_sharing_group.MemorySize``): an amount of memory in bytes."""

from __future__ import annotations

import functools

__all__ = ["MemorySize"]


@functools.total_ordering
class MemorySize:
    """A non-negative number of bytes; ordered, hashable, equal by size.

    ``MemorySize(bytes_size=n)`` or ``MemorySize.of_mebi_bytes(m)``; the getters round down
    (``MemorySize(bytes_size=1536).get_kibi_bytes() == 1``). ``str()`` is Flink's
    ``toString``: the largest unit that divides the size exactly (``"1 mb"``, ``"1536 bytes"``).

    :raises ValueError: for a negative or non-int size (Flink: "bytes must be >= 0").
    """

    ZERO: "MemorySize"
    MAX_VALUE: "MemorySize"

    def __init__(self, j_memory_size=None, bytes_size: int = None):
        if j_memory_size is not None:
            raise TypeError("MemorySize: Rill has no Java MemorySize to wrap; pass bytes_size=")
        if isinstance(bytes_size, bool) or not isinstance(bytes_size, int) or bytes_size < 0:
            raise ValueError(f"MemorySize: bytes must be an int >= 0, got {bytes_size!r}")
        self._bytes = bytes_size

    @staticmethod
    def of_mebi_bytes(mebi_bytes: int) -> "MemorySize":
        return MemorySize(bytes_size=mebi_bytes << 20)

    def get_bytes(self) -> int:
        return self._bytes

    def get_kibi_bytes(self) -> int:
        return self._bytes >> 10

    def get_mebi_bytes(self) -> int:
        return self._bytes >> 20

    def get_gibi_bytes(self) -> int:
        return self._bytes >> 30

    def get_tebi_bytes(self) -> int:
        return self._bytes >> 40

    def __eq__(self, other) -> bool:
        return isinstance(other, MemorySize) and other._bytes == self._bytes

    def __lt__(self, other: "MemorySize") -> bool:
        if not isinstance(other, MemorySize):
            return NotImplemented
        return self._bytes < other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __str__(self) -> str:
        for shift, unit in ((40, "tb"), (30, "gb"), (20, "mb"), (10, "kb")):
            if self._bytes and self._bytes % (1 << shift) == 0:
                return f"{self._bytes >> shift} {unit}"
        return f"{self._bytes} bytes"

    def __repr__(self) -> str:
        return f"MemorySize({self})"


MemorySize.ZERO = MemorySize(bytes_size=0)
MemorySize.MAX_VALUE = MemorySize(bytes_size=(1 << 63) - 1)
