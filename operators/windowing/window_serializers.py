"""Binary forms of the windows (PyFlink's ``TimeWindowSerializer``, ``CountWindowSerializer``,
``GlobalWindowSerializer``; Flink's ``TimeWindow.Serializer`` etc.): what an assigner's
``get_window_serializer()`` returns. The layouts are Flink's: a TimeWindow is its start and end
as two big-endian 64-bit ints (16 bytes), a CountWindow its id (8 bytes), the GlobalWindow a
single zero byte.
"""

from __future__ import annotations

import struct
from io import BytesIO

from rill.common.serializer import TypeSerializer
from rill.operators.windowing.windows import CountWindow, GlobalWindow, TimeWindow

__all__ = ["TimeWindowSerializer", "CountWindowSerializer", "GlobalWindowSerializer"]

_TWO_LONGS = struct.Struct(">qq")
_LONG = struct.Struct(">q")


def _read(stream: BytesIO, n: int, what: str) -> bytes:
    data = stream.read(n)
    if len(data) != n:
        raise EOFError(f"{what}: needs {n} bytes, the stream has {len(data)} left")
    return data


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    """``TimeWindow`` <-> 16 bytes (start, end; big-endian signed 64-bit)."""

    def serialize(self, element: TimeWindow, stream: BytesIO) -> None:
        stream.write(_TWO_LONGS.pack(element.start, element.end))

    def deserialize(self, stream: BytesIO) -> TimeWindow:
        return TimeWindow(*_TWO_LONGS.unpack(_read(stream, 16, "TimeWindowSerializer")))


class CountWindowSerializer(TypeSerializer[CountWindow]):
    """``CountWindow`` <-> 8 bytes (its id; big-endian signed 64-bit)."""

    def serialize(self, element: CountWindow, stream: BytesIO) -> None:
        stream.write(_LONG.pack(element.id))

    def deserialize(self, stream: BytesIO) -> CountWindow:
        return CountWindow(_LONG.unpack(_read(stream, 8, "CountWindowSerializer"))[0])


class GlobalWindowSerializer(TypeSerializer[GlobalWindow]):
    """The ``GlobalWindow`` <-> one zero byte (Flink's ``GlobalWindow.Serializer``)."""

    def serialize(self, element: GlobalWindow, stream: BytesIO) -> None:
        stream.write(b"\x00")

    def deserialize(self, stream: BytesIO) -> GlobalWindow:
        _read(stream, 1, "GlobalWindowSerializer")
        return GlobalWindow.get()
