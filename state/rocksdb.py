"""The RocksDB keyed state backend (Flink's ``RocksDBKeyedStateBackend`` of
``EmbeddedRocksDBStateBackend``): keyed state on local disk, for state larger than memory.

Storage: one RocksDB instance per backend (per keyed operator of a subtask), in a fresh
directory under ``state.backend.rocksdb.localdir`` (:mod:`rill.state.rocksdb_options`), removed
by :meth:`RocksDBKeyedStateBackend.dispose`; one column family per registered state. Every
RocksDB key is laid out as Flink's (``RocksDBKeySerializationUtils``)::

    key group (2 bytes, big-endian) | key | namespace [| user key (map state)]

with key, namespace and user key as msgpack documents
(:mod:`rill.state.checkpoint.object_codec`). msgpack documents are self-delimiting, so the
layout needs no length fields and a (key, namespace) prefix never matches another pair's
entries; the big-endian key group makes RocksDB's byte order key-group order, so a key group is
a prefix scan and a whole column family iterates key group by key group. Equal keys must encode
equally: ``1``, ``1.0`` and ``True`` are one dict key on the heap but three keys here (as three
differently-serialized keys are in Flink).

Snapshots have the heap backend's record (:class:`KeyedStateSnapshot`, entries in the heap
layout: a list state's value is a ``list``, a map state's a ``dict``), so the Parquet files of
both backends are the same and either restores into the other. They read a RocksDB snapshot
(a consistent point-in-time view), so writes during the iteration do not leak in.

Per-record cost: :meth:`RocksDBKeyedStateBackend.set_current_key` finds the key's prefix (key
group + encoded key) in a bounded cache (a dict look-up on a hit); every state access then is
one RocksDB get or put plus a msgpack encode or decode of the value.

Not built (raising ``NotImplementedError``): state TTL, timers in RocksDB (timers stay in the
task's heap timer service, Flink's ``timer-service.factory: HEAP``), incremental checkpoints.

Threading: a backend belongs to one subtask and is used from its task thread only.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import rocksdict

from rill.state.api import VOID_NAMESPACE
from rill.state.backend import KeyedSnapshotResources, KeyedStateBackend, check_namespace, check_same_kind
from rill.state.checkpoint.object_codec import decode_object, decode_object_stream, new_packer, new_unpacker
from rill.state.checkpoint.operator_subtask_state import KeyedStateSnapshot
from rill.state.descriptors import StateDescriptor, StateType
from rill.state.key_groups import (
    UPPER_BOUND_MAX_PARALLELISM,
    KeyGroupRange,
    UnsupportedKeyError,
    assign_to_key_group,
)
from rill.state.rocksdb_options import PredefinedOptions, RocksDBSettings
from rill.state.rocksdb_states import STATE_CLASSES, AbstractRocksDBState
from rill.state.typed_state import apply_declared_type

__all__ = ["RocksDBKeyedStateBackend", "DEFAULT_KEY_CACHE_SIZE", "KEY_GROUP_PREFIX_BYTES", "new_db_options"]

#: Entries of the key -> RocksDB key prefix cache before it is cleared.
DEFAULT_KEY_CACHE_SIZE = 1 << 18
#: Bytes of the key-group prefix (Flink: 1 for max parallelism <= 128, else 2; Rill always 2).
KEY_GROUP_PREFIX_BYTES = 2

_MB = 1024 * 1024
_NO_KEY_MESSAGE = "No key set. This method should not be called outside of a keyed context."
_ALL_NAMESPACES: Any = object()
#: backends created in this process, to spread them over the local directories round robin
_INSTANCES = itertools.count()


class RocksDBKeyedStateBackend(KeyedStateBackend):
    """Keyed state of one subtask in an embedded RocksDB (Flink's ``RocksDBKeyedStateBackend``).

    :param key_group_range: the key groups this subtask owns; must not be empty.
    :param max_parallelism: the operator's number of key groups, ``1..32768``.
    :param settings: local directory and tuning (default: a temp directory, ``DEFAULT``).
    :param key_cache_size: entries of the key -> prefix cache before it is cleared.
    :raises TypeError: if ``key_group_range`` is not a ``KeyGroupRange``.
    :raises ValueError: for an empty range, a bad ``max_parallelism`` or a range outside it.
    :raises OSError: if the RocksDB directory cannot be created or opened.
    """

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int,
                 settings: Optional[RocksDBSettings] = None,
                 key_cache_size: int = DEFAULT_KEY_CACHE_SIZE) -> None:
        if not isinstance(key_group_range, KeyGroupRange):
            raise TypeError(f"key_group_range must be a KeyGroupRange, got {type(key_group_range).__name__}")
        if type(max_parallelism) is not int or not 0 < max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
            raise ValueError(f"Maximum parallelism must be an int between 1 and {UPPER_BOUND_MAX_PARALLELISM}, "
                             f"got {max_parallelism!r}")
        if key_group_range.get_number_of_key_groups() == 0:
            raise ValueError(f"A keyed state backend needs key groups, got the empty {key_group_range}")
        if key_group_range.end_key_group >= max_parallelism:
            raise ValueError(f"{key_group_range} does not fit into max parallelism {max_parallelism} "
                             f"(key groups 0..{max_parallelism - 1})")
        if key_cache_size < 1:
            raise ValueError(f"key_cache_size must be >= 1, got {key_cache_size}")
        settings = settings or RocksDBSettings((tempfile.gettempdir(),))
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self.settings = settings
        local_dir = settings.local_dirs[next(_INSTANCES) % len(settings.local_dirs)]
        os.makedirs(local_dir, exist_ok=True)
        #: this backend's RocksDB directory (Flink: ``<localdir>/job_..._op_.../db``)
        self.instance_path = tempfile.mkdtemp(prefix="rill-rocksdb-", dir=local_dir)
        self._options = new_db_options(settings.predefined_options)
        self._db = rocksdict.Rdict(os.path.join(self.instance_path, "db"), self._options)
        # Flink's RocksDB backend writes without the write-ahead log: a checkpoint, not the
        # local directory, is what a restart recovers from
        self._write_options = rocksdict.WriteOptions()
        self._write_options.disable_wal = True
        self._db.set_write_options(self._write_options)
        self._packer = new_packer()
        #: one value's msgpack bytes (states encode with it)
        self.pack: Callable[[Any], bytes] = self._packer.pack
        self._current_key: Any = None
        self._key_group: Optional[int] = None
        #: the current key's RocksDB key prefix (key group + key), ``None`` until a key is set
        self._key_bytes: Optional[bytes] = None
        self._key_cache: Dict[Any, Tuple[int, bytes]] = {}
        self._key_cache_size = key_cache_size
        self._void_bytes = self.pack(VOID_NAMESPACE)
        self._descriptors: Dict[str, StateDescriptor] = {}
        self._column_families: Dict[str, Any] = {}
        #: the column families as write batches name them
        self._cf_handles: Dict[str, Any] = {}
        self._states: Dict[str, AbstractRocksDBState] = {}
        self._key_selection_listeners: List[Callable[[Any], None]] = []
        self._disposed = False

    # -- key context ------------------------------------------------------------------------
    def set_current_key(self, key: Any) -> None:
        """Make ``key`` the key every state object reads and writes.

        :raises UnsupportedKeyError: if ``key`` is unhashable; the previous key stays.
        :raises ValueError: if the key's group is not in this backend's range; the previous
            key stays.
        """
        try:
            self._key_group, self._key_bytes = self._key_cache[key]
        except KeyError:
            self._key_group, self._key_bytes = self._prefix_of(key)
        except TypeError:
            raise UnsupportedKeyError(
                f"key of type {type(key).__name__} is unhashable: it cannot key a state table") from None
        self._current_key = key
        for listener in self._key_selection_listeners:
            listener(key)

    def _prefix_of(self, key: Any) -> Tuple[int, bytes]:
        key_group = assign_to_key_group(key, self.max_parallelism)
        if not self.key_group_range.contains(key_group):
            raise ValueError(
                f"Key group {key_group} is not in {self.key_group_range}. Unless you're directly "
                "using low level state access APIs, this is most likely caused by "
                "non-deterministic shuffle key (hashCode and equals implementation).")
        entry = (key_group, key_group.to_bytes(KEY_GROUP_PREFIX_BYTES, "big") + self.pack(key))
        cache = self._key_cache
        if len(cache) >= self._key_cache_size:
            cache.clear()
        cache[key] = entry
        return entry

    def key_prefix(self, key: Any) -> bytes:
        """The RocksDB key prefix of ``key`` (key group + encoded key), for per-batch access.

        :raises UnsupportedKeyError, ValueError: as :meth:`set_current_key`.
        """
        try:
            return (self._key_cache.get(key) or self._prefix_of(key))[1]
        except TypeError:
            raise UnsupportedKeyError(
                f"key of type {type(key).__name__} is unhashable: it cannot key a state table") from None

    def write_values(self, state_name: str, ns_bytes: bytes, values: Dict[Any, Any]) -> None:
        """Write ``{key: value}`` (``None``: delete) of one namespace into the column family of
        ``state_name`` as one RocksDB write batch."""
        batch = rocksdict.WriteBatch(raw_mode=True)
        batch.set_default_column_family(self._cf_handles[state_name])
        pack = self.pack
        prefix_of = self.key_prefix
        for key, value in values.items():
            if value is None:
                batch.delete(prefix_of(key) + ns_bytes)
            else:
                batch.put(prefix_of(key) + ns_bytes, pack(value))
        self._db.write(batch)

    def compute_key_group_offset(self, key: Any) -> int:
        """Index of ``key``'s group in this backend's range (BATCH execution groups its input
        by it).

        :raises UnsupportedKeyError, ValueError: as :meth:`set_current_key`.
        """
        try:
            entry = self._key_cache.get(key) or self._prefix_of(key)
        except TypeError:
            raise UnsupportedKeyError(
                f"key of type {type(key).__name__} is unhashable: it cannot key a state table") from None
        return entry[0] - self.key_group_range.start_key_group

    def remove_key_state(self, key: Any) -> None:
        """Delete every entry of ``key`` in every state and namespace: one prefix scan per state
        (the layout puts a key's entries together). BATCH execution drops a finished key's state
        with it.

        :raises UnsupportedKeyError, ValueError: as :meth:`set_current_key`.
        """
        self.compute_key_group_offset(key)
        prefix = self._key_cache[key][1]
        for cf in self._column_families.values():
            for rest, _ in self.scan_prefix(cf, prefix):
                del cf[prefix + rest]

    def get_current_key(self) -> Any:
        """The current key (``None`` before the first :meth:`set_current_key`)."""
        return self._current_key

    def get_current_key_group_index(self) -> int:
        """The current key's key group.

        :raises RuntimeError: if no key was set.
        """
        if self._key_group is None:
            raise RuntimeError(_NO_KEY_MESSAGE)
        return self._key_group

    def get_key_group_range(self) -> KeyGroupRange:
        """The key groups this backend owns."""
        return self.key_group_range

    def get_number_of_key_groups(self) -> int:
        """The total number of key groups, i.e. the max parallelism."""
        return self.max_parallelism

    def register_key_selection_listener(self, listener: Callable[[Any], None]) -> None:
        """Call ``listener(key)`` after every successful :meth:`set_current_key`.

        :raises TypeError: if ``listener`` is not callable.
        """
        if not callable(listener):
            raise TypeError(f"A key selection listener must be callable, got {listener!r}")
        self._key_selection_listeners.append(listener)

    def namespace_bytes(self, namespace: Any) -> Optional[bytes]:
        """The encoding of ``namespace`` in RocksDB keys, or ``None`` for an unhashable one
        (the state raises on access, as the heap state does)."""
        if namespace is VOID_NAMESPACE:
            return self._void_bytes
        try:
            hash(namespace)
        except TypeError:
            return None
        return self.pack(namespace)

    # -- state registration -----------------------------------------------------------------
    def get_or_create_keyed_state(self, descriptor: StateDescriptor) -> Any:
        """The state of ``descriptor`` (a column family, created on first use), bound to the
        current key and the void namespace.

        :raises TypeError: if ``descriptor`` is not a ``StateDescriptor``.
        :raises ValueError: if the name is registered with another kind of state.
        :raises NotImplementedError: for a descriptor with state TTL enabled.
        :raises RuntimeError: after :meth:`dispose`.
        """
        state = self._get_or_create(descriptor)
        state.set_current_namespace(VOID_NAMESPACE)
        return state

    def get_partitioned_state(self, namespace: Any, descriptor: StateDescriptor) -> Any:
        """As :meth:`get_or_create_keyed_state`, bound to ``namespace``.

        :raises TypeError: if ``namespace`` is unhashable, or as :meth:`get_or_create_keyed_state`.
        :raises ValueError, RuntimeError, NotImplementedError: as :meth:`get_or_create_keyed_state`.
        """
        check_namespace(namespace, descriptor)
        state = self._get_or_create(descriptor)
        state.set_current_namespace(namespace)
        return state

    def _get_or_create(self, descriptor: StateDescriptor) -> Any:
        if self._disposed:
            raise RuntimeError("The keyed state backend has been disposed")
        if not isinstance(descriptor, StateDescriptor):
            raise TypeError(f"Expected a StateDescriptor, got {descriptor!r} of type {type(descriptor).__name__}")
        name = descriptor.name
        state = self._states.get(name)
        if state is not None:
            check_same_kind(self._descriptors[name], descriptor)
            return state
        ttl_config = descriptor.get_ttl_config()
        if ttl_config is not None and ttl_config.is_enabled():
            raise NotImplementedError(f"State '{name}': state TTL is not built for the RocksDB state backend "
                                      f"(EmbeddedRocksDBStateBackend); use the hashmap backend")
        cf = self._db.create_column_family(name, self._options)
        cf.set_write_options(self._write_options)
        state = apply_declared_type(STATE_CLASSES[descriptor.state_type.name](self, cf, descriptor), descriptor)
        self._descriptors[name] = descriptor
        self._column_families[name] = cf
        self._cf_handles[name] = self._db.get_column_family_handle(name)
        self._states[name] = state
        return state

    def get_column_family(self, state_name: str) -> Any:
        """The column family (a raw-mode ``rocksdict.Rdict``) of a registered state, for tools
        and tests that read the stored layout.

        :raises KeyError: if no state of that name is registered.
        """
        try:
            return self._column_families[state_name]
        except KeyError:
            raise KeyError(f"No keyed state named {state_name!r} is registered "
                           f"(registered: {sorted(self._column_families)})") from None

    def get_state_descriptor(self, state_name: str) -> StateDescriptor:
        """The descriptor a state was registered with (queryable state reads it).

        :raises KeyError: if no state of that name is registered.
        """
        self.get_column_family(state_name)  # raises the KeyError
        return self._descriptors[state_name]

    def get_registered_state_names(self) -> List[str]:
        """Names of the registered states, in registration order."""
        return list(self._descriptors)

    # -- scans ------------------------------------------------------------------------------
    @staticmethod
    def scan_prefix(source: Any, prefix: bytes, limit: Optional[int] = None) -> List[Tuple[bytes, bytes]]:
        """The ``(rest of key, value)`` of every entry of ``source`` (a column family or a
        RocksDB snapshot of one) whose key starts with ``prefix``, in key order; at most
        ``limit`` of them."""
        out: List[Tuple[bytes, bytes]] = []
        n = len(prefix)
        it = source.iter()
        it.seek(prefix)
        while it.valid():
            key = it.key()
            if not key.startswith(prefix):
                break
            out.append((key[n:], it.value()))
            if limit is not None and len(out) >= limit:
                break
            it.next()
        return out

    def _iter_entries(self, source: Any, state_type: StateType, key_group: int
                      ) -> Iterator[Tuple[Any, bytes, Any, Any]]:
        """``(key, namespace bytes, namespace, stored value)`` of one key group of ``source``
        (a column family or a RocksDB snapshot of one), in the heap layout: a list state's value
        a ``list``, a map state's entries grouped into one ``dict`` per key and namespace."""
        prefix = key_group.to_bytes(KEY_GROUP_PREFIX_BYTES, "big")
        is_map = state_type is StateType.MAP
        is_list = state_type is StateType.LIST
        current: Optional[Tuple[bytes, Any, bytes, Any]] = None  # map: (key+ns bytes, key, ns bytes, ns)
        mapping: Dict[Any, Any] = {}
        for rest, raw in self.scan_prefix(source, prefix):
            unpacker = new_unpacker()
            unpacker.feed(rest)
            key = next(unpacker)
            ns_start = unpacker.tell()
            namespace = next(unpacker)
            ns_end = unpacker.tell()
            if not is_map:
                yield key, rest[ns_start:ns_end], namespace, (decode_object_stream(raw) if is_list
                                                               else decode_object(raw))
                continue
            head = rest[:ns_end]
            if current is None or current[0] != head:
                if current is not None:
                    yield current[1], current[2], current[3], mapping
                    mapping = {}
                current = (head, key, rest[ns_start:ns_end], namespace)
            mapping[next(unpacker)] = decode_object(raw)
        if current is not None:
            yield current[1], current[2], current[3], mapping

    # -- snapshot, restore ------------------------------------------------------------------
    def sync_prepare_resources(self) -> KeyedSnapshotResources:
        """The synchronous part of a snapshot: every registered state's entries, key group by
        key group, in the heap backend's layout (so the checkpoint files are the heap
        backend's), read from a RocksDB snapshot.

        Cost: a pass over every entry, decoding it, on the task thread (Rill difference: Flink
        iterates the RocksDB snapshot in the asynchronous part; here the backend may be
        disposed while an asynchronous part still runs, so nothing reads the database then).

        :raises RuntimeError: after :meth:`dispose`.
        """
        return _MaterializedSnapshot(self._read_snapshot())

    def _read_snapshot(self) -> KeyedStateSnapshot:
        if self._disposed:
            raise RuntimeError("The keyed state backend has been disposed")
        key_groups: Dict[int, Dict[str, Tuple[Tuple[Any, Any, Any], ...]]] = {}
        for name, cf in self._column_families.items():
            state_type = self._descriptors[name].state_type
            view = cf.snapshot()
            for key_group in self.key_group_range:
                entries = tuple((key, ns, value) for key, _, ns, value in self._iter_entries(view, state_type, key_group))
                if entries:
                    key_groups.setdefault(key_group, {})[name] = entries
            del view
        return KeyedStateSnapshot(max_parallelism=self.max_parallelism, key_group_range=self.key_group_range,
                                  descriptors=dict(self._descriptors), key_groups=key_groups)

    def restore(self, snapshots: Sequence[KeyedStateSnapshot]) -> None:
        """Load the entries of ``snapshots`` whose key groups lie in this backend's range (a
        heap backend's snapshots as well), registering each snapshot's states.

        :raises ValueError: if a snapshot's max parallelism differs from the backend's, or a
            state is registered here with another kind of state; nothing is loaded then.
        :raises NotImplementedError: for a state with TTL (see :meth:`get_or_create_keyed_state`).
        :raises RuntimeError: after :meth:`dispose`.
        """
        if self._disposed:
            raise RuntimeError("The keyed state backend has been disposed")
        for snap in snapshots:
            if snap.max_parallelism != self.max_parallelism:
                raise ValueError(
                    f"Cannot restore keyed state of max parallelism {snap.max_parallelism} into a "
                    f"backend of max parallelism {self.max_parallelism} (the key groups differ)")
            for name, descriptor in snap.descriptors.items():
                registered = self._descriptors.get(name)
                if registered is not None and registered.state_type is not descriptor.state_type:
                    raise ValueError(f"Cannot restore state '{name}' as a {descriptor.state_type.name} state: "
                                     f"it is registered as a {registered.state_type.name} state")
        pack = self.pack
        for snap in snapshots:
            for descriptor in snap.descriptors.values():
                self._get_or_create(descriptor)
            for key_group, states in snap.key_groups.items():
                if not self.key_group_range.contains(key_group):
                    continue
                kg_prefix = key_group.to_bytes(KEY_GROUP_PREFIX_BYTES, "big")
                for name, entries in states.items():
                    cf = self._column_families[name]
                    state_type = self._descriptors[name].state_type
                    for key, namespace, stored in entries:
                        prefix = kg_prefix + pack(key) + pack(namespace)
                        if state_type is StateType.MAP:
                            for user_key, value in stored.items():
                                cf[prefix + pack(user_key)] = pack(value)
                        elif state_type is StateType.LIST:
                            cf[prefix] = b"".join(pack(v) for v in stored)
                        else:
                            cf[prefix] = pack(stored)

    # -- whole-backend access ---------------------------------------------------------------
    def get_keys(self, state_name: str, namespace: Any) -> Iterator[Any]:
        """Every key with an entry of ``state_name`` in ``namespace``, key group by key group;
        empty if no such state is registered. Each key group is read before its keys are
        yielded, so the caller may modify state meanwhile."""
        cf = self._column_families.get(state_name)
        if cf is None:
            return iter(())
        return self._keys_of(cf, self._descriptors[state_name].state_type, self.namespace_bytes(namespace))

    def _keys_of(self, cf: Any, state_type: StateType, ns_bytes: Optional[bytes]) -> Iterator[Any]:
        for key_group in self.key_group_range:
            keys = [key for key, ns, _, _ in self._iter_entries(cf, state_type, key_group) if ns == ns_bytes]
            yield from keys

    def apply_to_all_keys(self, namespace: Any, descriptor: StateDescriptor,
                          function: Callable[[Any, Any], None]) -> None:
        """Call ``function(key, state)`` for every key with an entry of ``descriptor``'s state
        in ``namespace``, with that key current; the previous key and the state's namespace
        are restored afterwards.

        :raises: whatever :meth:`get_partitioned_state` or ``function`` raises.
        """
        previous = self._states.get(getattr(descriptor, "name", None))
        previous_namespace = VOID_NAMESPACE if previous is None else previous.get_current_namespace()
        saved = (self._current_key, self._key_group, self._key_bytes)
        state = self.get_partitioned_state(namespace, descriptor)
        try:
            for key in list(self.get_keys(descriptor.name, namespace)):
                self.set_current_key(key)
                function(key, state)
        finally:
            self._current_key, self._key_group, self._key_bytes = saved
            state.set_current_namespace(previous_namespace)

    def num_key_value_state_entries(self, namespace: Any = _ALL_NAMESPACES) -> int:
        """Number of (key, namespace) entries over all states; with ``namespace``, only that
        namespace's (a full scan: for tests and metrics, not per record)."""
        wanted = None if namespace is _ALL_NAMESPACES else self.namespace_bytes(namespace)
        total = 0
        for name, cf in self._column_families.items():
            state_type = self._descriptors[name].state_type
            for key_group in self.key_group_range:
                total += sum(1 for _, ns, _, _ in self._iter_entries(cf, state_type, key_group)
                             if wanted is None or ns == wanted)
        return total

    def dispose(self) -> None:
        """Close RocksDB and delete its directory; the backend must not be used afterwards.
        Idempotent."""
        if self._disposed:
            return
        self._disposed = True
        self._states.clear()
        self._column_families.clear()
        self._cf_handles.clear()
        self._key_selection_listeners.clear()
        self._key_cache.clear()
        self._current_key = self._key_group = self._key_bytes = None
        self._db.close()
        shutil.rmtree(self.instance_path, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"RocksDBKeyedStateBackend({self.key_group_range}, max_parallelism={self.max_parallelism}, "
                f"path={self.instance_path!r}, states={list(self._descriptors)})")


def new_db_options(predefined: PredefinedOptions) -> rocksdict.Options:
    """Raw-mode (``bytes`` keys and values) RocksDB options tuned by ``predefined`` as Flink's
    ``PredefinedOptions.createDBOptions`` / ``createColumnOptions`` do."""
    options = rocksdict.Options(raw_mode=True)
    options.create_if_missing(True)
    options.create_missing_column_families(True)
    # Flink: a lost local RocksDB directory is rebuilt from the checkpoint, so no fsync
    options.set_use_fsync(False)
    if predefined is not PredefinedOptions.DEFAULT:
        options.set_max_background_jobs(4)
        options.set_max_open_files(-1)
    if predefined in (PredefinedOptions.SPINNING_DISK_OPTIMIZED,
                      PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM):
        options.set_level_compaction_dynamic_level_bytes(True)
    if predefined is PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM:
        table = rocksdict.BlockBasedOptions()
        table.set_block_size(128 * 1024)
        table.set_block_cache(rocksdict.Cache(256 * _MB))
        options.set_block_based_table_factory(table)
        options.set_write_buffer_size(64 * _MB)
        options.set_max_write_buffer_number(4)
    return options


class _MaterializedSnapshot(KeyedSnapshotResources):
    """Snapshot resources that already hold the whole record (read in the synchronous part)."""

    __slots__ = ("_snapshot",)

    def __init__(self, snapshot: KeyedStateSnapshot):
        self._snapshot = snapshot

    def async_snapshot(self) -> KeyedStateSnapshot:
        if self._snapshot is None:
            raise RuntimeError("The snapshot resources have been released")
        return self._snapshot

    def release(self) -> None:
        self._snapshot = None
