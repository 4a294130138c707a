"""The binary encoding of untyped values in snapshot files: msgpack with three extension types.

Where a state's descriptor declares no type (keys of ``key_by(lambda ...)``, states created
without type information, operator state), a snapshot column holds each value as one msgpack
document (Flink would use its Kryo fallback serializer here). msgpack covers ``None``, ``bool``,
64-bit ``int``, ``float`` (64-bit), ``str``, ``bytes``, ``list`` and ``dict``; what it lacks is
an extension type (``ExtType(code, data)``):

====  ==========================  ===========================================================
code  Python value                data
====  ==========================  ===========================================================
1     ``tuple`` (exactly)         a msgpack array of the items, each encoded by these rules
2     ``int`` beyond 64 bits      the decimal digits as ASCII (``b"-123..."``)
3     anything else               ``cloudpickle.dumps(value)`` (subclasses of built-ins too:
                                  an ``IntEnum`` member, a ``TimeWindow``, a ``Row``)
====  ==========================  ===========================================================

Types are matched exactly (``strict_types``): a ``list`` stays a ``list`` and a ``tuple`` a
``tuple``, so decoding gives back an equal value of the same type. Maps are decoded with any
hashable key (``strict_map_key=False``). Code 3 needs Python (and the pickled classes) to
decode; codes 1 and 2 do not. Decoding in a Spark UDF: see the README section "Reading
checkpoints with Spark".
"""

from __future__ import annotations

from typing import Any, List, Sequence

import cloudpickle
import msgpack

__all__ = ["EXT_TUPLE", "EXT_BIG_INT", "EXT_PICKLED", "encode_object", "decode_object",
           "encode_objects", "decode_objects",
           "new_packer", "new_unpacker", "decode_object_stream"]

EXT_TUPLE = 1
EXT_BIG_INT = 2
EXT_PICKLED = 3


def _default(value: Any) -> msgpack.ExtType:
    kind = type(value)
    if kind is tuple:
        return msgpack.ExtType(EXT_TUPLE, _packer().pack(list(value)))
    if kind is int:  # msgpack packs -2**63 .. 2**64-1 itself; only bigger ones get here
        return msgpack.ExtType(EXT_BIG_INT, str(value).encode("ascii"))
    return msgpack.ExtType(EXT_PICKLED, cloudpickle.dumps(value))


def _packer() -> msgpack.Packer:
    # A fresh packer per nesting level: a Packer is not re-entrant from its own default hook.
    return msgpack.Packer(default=_default, strict_types=True, use_bin_type=True)


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_TUPLE:
        return tuple(decode_object(data))
    if code == EXT_BIG_INT:
        return int(data.decode("ascii"))
    if code == EXT_PICKLED:
        return cloudpickle.loads(data)
    raise ValueError(f"Unknown msgpack extension type {code} in a snapshot value "
                     f"(known: {EXT_TUPLE} tuple, {EXT_BIG_INT} big int, {EXT_PICKLED} pickled)")


def encode_object(value: Any) -> bytes:
    """One value as msgpack bytes by the rules of the module docstring.

    :raises pickle.PicklingError: (or what cloudpickle raises) for a value that is neither
        msgpack-native nor picklable.
    """
    return _packer().pack(value)


def decode_object(data: bytes) -> Any:
    """The value :func:`encode_object` encoded.

    :raises ValueError: for bytes that are not such an encoding (an unknown extension code,
        truncated data).
    """
    try:
        return msgpack.unpackb(data, ext_hook=_ext_hook, raw=False, strict_map_key=False,
                               use_list=True)
    except (msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as e:
        raise ValueError(f"Not a msgpack-encoded snapshot value: {e}") from e


def new_packer() -> msgpack.Packer:
    """A packer by the rules of the module docstring, for callers that encode many values one
    at a time (``new_packer().pack(value) == encode_object(value)``); not thread-safe."""
    return _packer()


def new_unpacker() -> msgpack.Unpacker:
    """A streaming unpacker by the rules of the module docstring: ``feed`` it concatenated
    encodings, read values with ``next``; ``tell()`` is the offset after the last value read."""
    return msgpack.Unpacker(ext_hook=_ext_hook, raw=False, strict_map_key=False, use_list=True)


def decode_object_stream(data: bytes) -> List[Any]:
    """The values of ``data``, a concatenation of :func:`encode_object` encodings, in order
    (msgpack documents are self-delimiting, so concatenated encodings need no framing).

    :raises ValueError: for bytes that are not such a concatenation.
    """
    unpacker = new_unpacker()
    unpacker.feed(data)
    try:
        return list(unpacker)
    except (msgpack.FormatError, msgpack.StackError) as e:
        raise ValueError(f"Not a sequence of msgpack-encoded snapshot values: {e}") from e


def encode_objects(values: Sequence[Any]) -> List[bytes]:
    """:func:`encode_object` of each value, with one packer for the batch."""
    pack = _packer().pack
    return [pack(v) for v in values]


def decode_objects(data: Sequence[bytes]) -> List[Any]:
    """:func:`decode_object` of each element."""
    return [decode_object(d) for d in data]
