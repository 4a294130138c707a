"""``OutputTag``: the name of a side output (PyFlink's ``pyflink.datastream.OutputTag``,
Flink's ``org.apache.flink.util.OutputTag``)."""

from __future__ import annotations

from typing import Any, Optional

__all__ = ["OutputTag"]


class OutputTag:
    """Names a side output of an operator.

    A ``ProcessFunction`` emits to a side output by yielding ``(output_tag, value)``: a 2-tuple
    whose first item is an ``OutputTag`` instance (PyFlink's convention). The stream is read
    back with ``DataStream.get_side_output(output_tag)``.

    Two tags are equal when their ids are equal (the type information is not compared, as in
    Flink's ``OutputTag.equals``), and equal tags hash equal, so a tag created again with the
    same id selects the same side output.

    :param tag_id: the side output's id; a non-empty ``str``.
    :param type_info: optional type information of the side output's values (only recorded).
    :raises TypeError: if ``tag_id`` is not a ``str``.
    :raises ValueError: if ``tag_id`` is empty (PyFlink's message).
    """

    __slots__ = ("tag_id", "type_info")

    def __init__(self, tag_id: str, type_info: Optional[Any] = None) -> None:
        if tag_id is not None and not isinstance(tag_id, str):
            raise TypeError(f"OutputTag tag_id must be a str, got {tag_id!r} of type {type(tag_id).__name__}")
        if not tag_id:
            raise ValueError("OutputTag tag_id cannot be None or empty string")
        self.tag_id = tag_id
        self.type_info = type_info

    def get_id(self) -> str:
        """The tag's id (Flink's ``OutputTag.getId``)."""
        return self.tag_id

    def get_type_info(self) -> Optional[Any]:
        return self.type_info

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, OutputTag):
            return NotImplemented
        return self.tag_id == other.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __reduce__(self):
        return (OutputTag, (self.tag_id, self.type_info))

    def __repr__(self) -> str:
        if self.type_info is None:
            return f"OutputTag({self.tag_id!r})"
        return f"OutputTag({self.tag_id!r}, {self.type_info!r})"
