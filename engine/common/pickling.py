"""cloudpickle that keeps the source file of the code it pickles by value.

cloudpickle ships functions of modules that are not installed (the program file run as
``__main__``, a test module) by value, and its code reducer replaces every code object's
``co_filename`` with ``"<dynamic-code>"`` to make its output deterministic. A traceback from
such a function on a cluster then reads ``File "<dynamic-code>", line 12, in parse``: the line
is right, the file is lost. :class:`SourceKeepingPickler` pickles code objects with
:mod:`marshal` instead, which keeps every field (file name, line table, nested code), so the
remote frames show the program's file and line, and the source line itself wherever the file
exists (``linecache`` reads it). Both sides run the same Python version, as cloudpickle's
by-value code already requires.
"""

from __future__ import annotations

import collections
import io
import marshal
import pickle
import types

import cloudpickle

__all__ = ["SourceKeepingPickler", "dumps"]


def _load_code(data: bytes) -> types.CodeType:
    """A code object from :func:`marshal.dumps` bytes (the unpickling side of the reducer)."""
    return marshal.loads(data)


def _reduce_code(code: types.CodeType):
    return _load_code, (marshal.dumps(code),)


class SourceKeepingPickler(cloudpickle.Pickler):
    """``cloudpickle.Pickler`` whose code objects keep their ``co_filename``; everything else
    is cloudpickle's."""

    dispatch_table = collections.ChainMap({types.CodeType: _reduce_code}, cloudpickle.Pickler.dispatch_table)


def dumps(obj, protocol: int = pickle.HIGHEST_PROTOCOL) -> bytes:
    """``cloudpickle.dumps`` with :class:`SourceKeepingPickler`; load with ``pickle.loads``.

    :raises pickle.PicklingError, TypeError, ...: whatever cloudpickle raises for ``obj``.
    """
    buffer = io.BytesIO()
    SourceKeepingPickler(buffer, protocol=protocol).dump(obj)
    return buffer.getvalue()
