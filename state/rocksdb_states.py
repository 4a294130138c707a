"""RocksDB state objects: the interfaces of :mod:`rill.state.api` over one column family each
(Flink's ``RocksDBValueState``, ``RocksDBListState``, ``RocksDBMapState``,
``RocksDBReducingState``, ``RocksDBAggregatingState`` on ``AbstractRocksDBState``).

Every entry's RocksDB key is the backend's current-key prefix (2-byte big-endian key group +
msgpack key, see :mod:`rill.state.rocksdb`) followed by the msgpack namespace, and for map
state the msgpack user key. Values are msgpack (:mod:`rill.state.checkpoint.object_codec`):
a value, reduced value or accumulator as one document; a list as the concatenation of its
elements' documents (so ``add`` appends bytes without decoding the list); a map as one RocksDB
entry per user key.

Unlike the heap states, reads return copies (as Flink's RocksDB backend): mutating a value
got from ``value()``/``get()`` does not change the state until it is written back.

Errors on access: before the backend has a current key, ``RuntimeError("No key set. ...")``;
with an unhashable namespace, ``TypeError`` naming the state and the namespace.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from rill.state.api import (
    VOID_NAMESPACE,
    AggregatingState,
    InternalKvState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from rill.state.checkpoint.object_codec import decode_object, decode_object_stream
from rill.state.descriptors import StateDescriptor

__all__ = ["AbstractRocksDBState", "RocksDBValueState", "BatchedRocksDBValueState", "RocksDBListState", "RocksDBMapState",
           "RocksDBReducingState", "RocksDBAggregatingState", "STATE_CLASSES"]

_NO_KEY_MESSAGE = "No key set. This method should not be called outside of a keyed context."
_NULL_LIST_ELEMENT = "You cannot add null to a ListState."
_NULL_LIST = "List of values to add cannot be null."


class AbstractRocksDBState(InternalKvState):
    """Base of the RocksDB state objects (Flink's ``AbstractRocksDBState``).

    :param backend: the owning ``RocksDBKeyedStateBackend`` (its ``_key_bytes``, the current
        key's prefix, and its ``pack`` are read on every access).
    :param column_family: the state's column family (a raw-mode ``rocksdict.Rdict``).
    :param descriptor: the descriptor the state was registered with.
    """

    __slots__ = ("_backend", "_cf", "_descriptor", "_namespace", "_ns_bytes", "_pack")

    def __init__(self, backend: Any, column_family: Any, descriptor: StateDescriptor) -> None:
        self._backend = backend
        self._cf = column_family
        self._descriptor = descriptor
        self._pack = backend.pack
        self._namespace: Any = None
        self._ns_bytes: Optional[bytes] = None
        self.set_current_namespace(VOID_NAMESPACE)

    def set_current_namespace(self, namespace: Any) -> None:
        """Bind the state to ``namespace`` (encoded once here; an unhashable one raises on the
        next access)."""
        self._namespace = namespace
        self._ns_bytes = self._backend.namespace_bytes(namespace)

    def get_current_namespace(self) -> Any:
        return self._namespace

    @property
    def descriptor(self) -> StateDescriptor:
        """The descriptor the state was registered with."""
        return self._descriptor

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._descriptor.name!r}, namespace={self._namespace!r})"

    def _access_error(self) -> Exception:
        if self._backend._key_bytes is None:
            return RuntimeError(_NO_KEY_MESSAGE)
        return TypeError(f"State '{self._descriptor.name}': namespace {self._namespace!r} of type "
                         f"{type(self._namespace).__name__} is unhashable")

    def _db_key(self) -> bytes:
        """The RocksDB key of the current key and namespace."""
        try:
            return self._backend._key_bytes + self._ns_bytes
        except TypeError:  # no current key (None + bytes) or an unhashable namespace (bytes + None)
            raise self._access_error() from None

    def _get_raw(self) -> Optional[bytes]:
        return self._cf.get(self._db_key())

    def clear(self) -> None:
        """Remove the current key's entry in the current namespace (no-op if absent)."""
        del self._cf[self._db_key()]


class RocksDBValueState(AbstractRocksDBState, ValueState):
    """A :class:`~rill.state.api.ValueState` in RocksDB (Flink's ``RocksDBValueState``)."""

    __slots__ = ()

    def value(self) -> Any:
        """The current key's value (a copy), or ``None``.

        :raises RuntimeError: if no key is set.
        """
        raw = self._cf.get(self._db_key())
        return None if raw is None else decode_object(raw)

    def update(self, value: Any) -> None:
        """Set the current key's value; ``None`` removes the entry.

        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self.clear()
        else:
            self._cf[self._db_key()] = self._pack(value)


class BatchedRocksDBValueState(RocksDBValueState):
    """Per-batch access for operators (Rill; Flink reads per record): the values of many keys
    in the current namespace with one multi-get, written back with one write batch. The
    backend's current key is neither read nor changed."""

    __slots__ = ()

    def get_values(self, keys: List[Any]) -> Dict[Any, Any]:
        """``{key: value}`` of the distinct ``keys`` (``None`` for a key without a value).

        :raises UnsupportedKeyError, ValueError: as ``set_current_key`` for a bad key.
        """
        unique = list(dict.fromkeys(keys))
        ns = self._ns_bytes
        if ns is None:
            raise self._access_error()
        prefix_of = self._backend.key_prefix
        raws = self._cf.get([prefix_of(k) + ns for k in unique])
        return {k: None if raw is None else decode_object(raw) for k, raw in zip(unique, raws)}

    def put_values(self, values: Dict[Any, Any]) -> None:
        """Store ``{key: value}`` in the current namespace in one write batch; a value of
        ``None`` removes the key's entry. A state with a declared type (whose ``update``
        converts) writes through ``update`` per key instead, so values are converted alike."""
        if type(self).update is BatchedRocksDBValueState.update:
            self._backend.write_values(self._descriptor.name, self._ns_bytes, values)
            return
        backend = self._backend
        saved = backend._key_bytes
        try:
            for key, value in values.items():
                backend._key_bytes = backend.key_prefix(key)
                self.update(value)
        finally:
            backend._key_bytes = saved


class AbstractRocksDBMergingState(AbstractRocksDBState):
    """Base of the states whose namespaces can be merged (Flink's
    ``AbstractRocksDBAppendingState`` / ``InternalMergingState``); subclasses define
    :meth:`_merge_raw` on the stored bytes."""

    __slots__ = ()

    def _merge_raw(self, target: bytes, source: bytes) -> Optional[bytes]:
        raise NotImplementedError

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the current key's entries of the ``sources`` namespaces into ``target`` and
        remove them (session windows merging); ``target`` is untouched if no source has one.

        :raises RuntimeError: if no key is set.
        """
        backend = self._backend
        prefix = backend._key_bytes
        if prefix is None:
            raise RuntimeError(_NO_KEY_MESSAGE)
        cf = self._cf
        merged = None
        for source in sources:
            if source == target:
                continue
            source_key = prefix + backend.namespace_bytes(source)
            raw = cf.get(source_key)
            if raw is not None:
                del cf[source_key]
                merged = raw if merged is None else self._merge_raw(merged, raw)
        if merged is None:
            return
        target_key = prefix + backend.namespace_bytes(target)
        current = cf.get(target_key)
        if current is not None:
            merged = self._merge_raw(current, merged)
        if merged is None:
            del cf[target_key]
        else:
            cf[target_key] = merged


class RocksDBListState(AbstractRocksDBMergingState, ListState):
    """A :class:`~rill.state.api.ListState` in RocksDB (Flink's ``RocksDBListState``): the
    elements' encodings concatenated, so ``add`` appends bytes."""

    __slots__ = ()

    def get(self) -> List[Any]:
        """The current key's elements (a new list); empty if there are none.

        :raises RuntimeError: if no key is set.
        """
        raw = self._get_raw()
        return [] if raw is None else decode_object_stream(raw)

    def add(self, value: Any) -> None:
        """Append ``value``.

        :raises ValueError: if ``value`` is ``None``.
        :raises RuntimeError: if no key is set.
        """
        if value is None:
            raise ValueError(f"{_NULL_LIST_ELEMENT} (state '{self._descriptor.name}')")
        key = self._db_key()
        cf = self._cf
        raw = cf.get(key)
        encoded = self._pack(value)
        cf[key] = encoded if raw is None else raw + encoded

    def _encoded(self, values: Iterable[Any]) -> bytes:
        if values is None:
            raise ValueError(f"{_NULL_LIST} (state '{self._descriptor.name}')")
        copied = list(values)
        for index, value in enumerate(copied):
            if value is None:
                raise ValueError(f"{_NULL_LIST_ELEMENT} (state '{self._descriptor.name}', element {index})")
        pack = self._pack
        return b"".join(pack(v) for v in copied)

    def add_all(self, values: Iterable[Any]) -> None:
        """Append every element of ``values``; nothing is added if one is ``None``.

        :raises ValueError: if ``values`` is ``None`` or contains ``None``.
        :raises RuntimeError: if no key is set.
        """
        encoded = self._encoded(values)
        if encoded:
            key = self._db_key()
            raw = self._cf.get(key)
            self._cf[key] = encoded if raw is None else raw + encoded

    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements by ``values``; empty removes the entry.

        :raises ValueError: if ``values`` is ``None`` or contains ``None`` (state unchanged).
        :raises RuntimeError: if no key is set.
        """
        encoded = self._encoded(values)
        if encoded:
            self._cf[self._db_key()] = encoded
        else:
            self.clear()

    def _merge_raw(self, target: bytes, source: bytes) -> bytes:
        return target + source


class RocksDBMapState(AbstractRocksDBState, MapState):
    """A :class:`~rill.state.api.MapState` in RocksDB (Flink's ``RocksDBMapState``): one RocksDB
    entry per user key, under the (key, namespace) prefix, so a map is read by a prefix scan."""

    __slots__ = ()

    def _user_key(self, key: Any) -> bytes:
        return self._db_key() + self._pack(key)

    def _scan(self) -> List[Tuple[bytes, bytes]]:
        """The (user key bytes, value bytes) of the current key and namespace."""
        return self._backend.scan_prefix(self._cf, self._db_key())

    def get(self, key: Any) -> Any:
        """The value of user key ``key``, or ``None``.

        :raises RuntimeError: if no key is set.
        """
        raw = self._cf.get(self._user_key(key))
        return None if raw is None else decode_object(raw)

    def put(self, key: Any, value: Any) -> None:
        """Map user key ``key`` to ``value`` (``None`` is a legal value).

        :raises RuntimeError: if no key is set.
        """
        self._cf[self._user_key(key)] = self._pack(value)

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        """Add every mapping of ``dict_value`` (a mapping or an iterable of pairs).

        :raises ValueError: if ``dict_value`` is ``None``.
        :raises RuntimeError: if no key is set.
        """
        if dict_value is None:
            raise ValueError(f"State '{self._descriptor.name}': put_all() needs a dict, got None")
        prefix = self._db_key()
        pack = self._pack
        for key, value in dict(dict_value).items():
            self._cf[prefix + pack(key)] = pack(value)

    def remove(self, key: Any) -> None:
        """Remove the mapping of ``key``.

        :raises RuntimeError: if no key is set.
        """
        del self._cf[self._user_key(key)]

    def contains(self, key: Any) -> bool:
        return self._cf.get(self._user_key(key)) is not None

    def items(self) -> List[Tuple[Any, Any]]:
        return [(decode_object(k), decode_object(v)) for k, v in self._scan()]

    def keys(self) -> List[Any]:
        return [decode_object(k) for k, _ in self._scan()]

    def values(self) -> List[Any]:
        return [decode_object(v) for _, v in self._scan()]

    def is_empty(self) -> bool:
        return not self._backend.scan_prefix(self._cf, self._db_key(), limit=1)

    def clear(self) -> None:
        """Remove every mapping of the current key in the current namespace."""
        prefix = self._db_key()
        for user_key, _ in self._backend.scan_prefix(self._cf, prefix):
            del self._cf[prefix + user_key]


class RocksDBReducingState(AbstractRocksDBMergingState, ReducingState):
    """A :class:`~rill.state.api.ReducingState` in RocksDB (Flink's ``RocksDBReducingState``).
    ``add(None)`` clears the entry, as does a reduce result of ``None`` (as the heap state)."""

    __slots__ = ("_reduce",)

    def __init__(self, backend: Any, column_family: Any, descriptor: StateDescriptor) -> None:
        super().__init__(backend, column_family, descriptor)
        self._reduce: Callable[[Any, Any], Any] = descriptor.reduce_callable  # type: ignore[attr-defined]

    def get(self) -> Any:
        """The reduced value, or ``None`` if nothing was added.

        :raises RuntimeError: if no key is set.
        """
        raw = self._get_raw()
        return None if raw is None else decode_object(raw)

    def add(self, value: Any) -> None:
        """Reduce ``value`` into the current key's value; a raising reduce function leaves the
        state unchanged.

        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self.clear()
            return
        key = self._db_key()
        raw = self._cf.get(key)
        if raw is not None:
            value = self._reduce(decode_object(raw), value)
            if value is None:
                del self._cf[key]
                return
        self._cf[key] = self._pack(value)

    def _merge_raw(self, target: bytes, source: bytes) -> Optional[bytes]:
        merged = self._reduce(decode_object(target), decode_object(source))
        return None if merged is None else self._pack(merged)


class RocksDBAggregatingState(AbstractRocksDBMergingState, AggregatingState):
    """An :class:`~rill.state.api.AggregatingState` in RocksDB (Flink's
    ``RocksDBAggregatingState``): stores the accumulator; ``get()`` is ``get_result`` of it.
    ``add(None)`` clears the entry; an accumulator of ``None`` is not stored."""

    __slots__ = ("_agg_function",)

    def __init__(self, backend: Any, column_family: Any, descriptor: StateDescriptor) -> None:
        super().__init__(backend, column_family, descriptor)
        self._agg_function = descriptor.get_agg_function()  # type: ignore[attr-defined]

    def get(self) -> Any:
        """``get_result(accumulator)``, or ``None`` if nothing was added.

        :raises RuntimeError: if no key is set.
        """
        raw = self._get_raw()
        return None if raw is None else self._agg_function.get_result(decode_object(raw))

    def add(self, value: Any) -> None:
        """Add ``value`` to the current key's accumulator (``create_accumulator()`` when absent).

        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self.clear()
            return
        key = self._db_key()
        raw = self._cf.get(key)
        fn = self._agg_function
        acc = fn.add(value, fn.create_accumulator() if raw is None else decode_object(raw))
        if acc is None:
            del self._cf[key]
        else:
            self._cf[key] = self._pack(acc)

    def get_accumulator(self) -> Any:
        """The stored accumulator, or ``None`` (for window operators and tests)."""
        raw = self._get_raw()
        return None if raw is None else decode_object(raw)

    def _merge_raw(self, target: bytes, source: bytes) -> Optional[bytes]:
        merged = self._agg_function.merge(decode_object(target), decode_object(source))
        return None if merged is None else self._pack(merged)


#: The state class of each ``StateType`` name.
STATE_CLASSES = {
    "VALUE": BatchedRocksDBValueState,
    "LIST": RocksDBListState,
    "MAP": RocksDBMapState,
    "REDUCING": RocksDBReducingState,
    "AGGREGATING": RocksDBAggregatingState,
}
