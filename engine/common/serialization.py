"""Encoders for row-format sinks (PyFlink's ``pyflink.common.serialization``)."""

from __future__ import annotations

from typing import Any

__all__ = ["Encoder", "SimpleStringSchema"]


class Encoder:
    """Turns a record into the bytes written for it by a row-format file sink."""

    def __init__(self, charset: str = "utf-8"):
        self.charset = charset

    @staticmethod
    def simple_string_encoder(charset_name: str = "UTF-8") -> "Encoder":
        """``str(record)`` followed by a newline (Flink's ``SimpleStringEncoder``)."""
        return Encoder(charset_name.lower())

    def encode(self, element: Any) -> bytes:
        return (str(element) + "\n").encode(self.charset)


class SimpleStringSchema:
    """Strings to/from UTF-8 bytes."""

    def __init__(self, charset: str = "utf-8"):
        self.charset = charset

    def serialize(self, element: str) -> bytes:
        return element.encode(self.charset)

    def deserialize(self, message: bytes) -> str:
        return message.decode(self.charset)
