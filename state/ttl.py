"""State time-to-live (TTL): the configuration (PyFlink's ``StateTtlConfig``) and the TTL
state decorators the heap keyed state backend wraps around its states (Flink's
``org.apache.flink.runtime.state.ttl``: ``TtlStateFactory``, ``AbstractTtlState``,
``TtlValueState``, ``TtlListState``, ``TtlMapState``, ``TtlReducingState``,
``TtlAggregatingState``, ``TtlReduceFunction``, ``TtlAggregateFunction``,
``TtlIncrementalCleanup`` and the full-snapshot ``TtlStateSnapshotTransformer``).

Usage, as in PyFlink::

    ttl = (StateTtlConfig.new_builder(Time.seconds(10))
           .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
           .set_state_visibility(StateTtlConfig.StateVisibility.NeverReturnExpired)
           .cleanup_incrementally(10, False)
           .build())
    descriptor = ValueStateDescriptor("last-seen")
    descriptor.enable_time_to_live(ttl)

Semantics (Flink's):

- every stored value carries its *last access timestamp* (ms), set when it is written and,
  with ``UpdateType.OnReadAndWrite``, also when it is read;
- a value is expired when ``last_access + ttl <= now`` (``TtlUtils.expired``), ``now`` being
  processing time from the backend's TTL time provider (a callable returning epoch ms; tests
  inject a manual clock);
- a read that finds an expired value removes it and returns nothing
  (``StateVisibility.NeverReturnExpired``) or returns it this one last time
  (``ReturnExpiredIfNotCleanedUp``);
- list state keeps a timestamp per element, map state per entry: elements and entries expire
  one by one;
- ``UpdateType.Disabled`` switches TTL off: the backend creates a plain heap state.

Stored layout (what :class:`~rill.state.state_table.StateTable` holds for a TTL state, and what
a snapshot writes): a *TTL value* is the plain tuple ``(user_value, last_access_timestamp_ms)``;
a value, reducing or aggregating state stores one TTL value per key and namespace, a list state
a non-empty ``list`` of TTL values, a map state a non-empty ``dict`` of user key to TTL value.

Cleanup of expired state that is never read again:

- *incremental* (``cleanup_incrementally(cleanup_size, run_cleanup_for_every_record)``, and by
  default ``(5, False)`` unless ``disable_cleanup_in_background()``): every access to the state
  first checks the next ``cleanup_size`` entries of a cursor walking the state table, removing
  expired values, list elements and map entries; with ``run_cleanup_for_every_record`` it also
  runs whenever the operator sets the current key (every record);
- *full snapshot* (``cleanup_full_snapshot()``): the snapshot writer filters expired values out
  of what it writes (:meth:`AbstractTtlState.create_snapshot_transformer`, or
  ``HeapKeyedStateBackend.iter_snapshot_entries``); live state is not touched.

Rill differences: only processing time exists (as in Flink); ``cleanup_in_rocksdb_compact_filter``
is recorded and has no effect (there is no RocksDB backend); the full-snapshot transformer reads
the clock once per snapshot instead of once per entry.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from rill.state.api import (
    AggregatingState,
    InternalKvState,
    ListState,
    MapState,
    ReducingState,
    ValueState,
)
from rill.state.descriptors import StateDescriptor, StateType
from rill.state.heap_states import (
    AbstractHeapState,
    HeapAggregatingState,
    HeapListState,
    HeapMapState,
    HeapReducingState,
    HeapValueState,
)
from rill.state.state_table import StateTable

from rill.state.ttl_config import (  # noqa: F401 - re-exported: the TTL API in one place
    ManualTtlTimeProvider,
    StateTtlConfig,
    StateVisibility,
    Time,
    TtlTimeCharacteristic,
    TtlTimeProvider,
    UpdateType,
    default_ttl_time_provider,
    expired,
)

__all__ = [
    "Time",
    "StateTtlConfig",
    "UpdateType",
    "StateVisibility",
    "TtlTimeCharacteristic",
    "TtlTimeProvider",
    "default_ttl_time_provider",
    "ManualTtlTimeProvider",
    "expired",
    "AbstractTtlState",
    "TtlValueState",
    "TtlListState",
    "TtlMapState",
    "TtlReducingState",
    "TtlAggregatingState",
    "TtlReduceFunction",
    "TtlAggregateFunction",
    "TtlIncrementalCleanup",
    "MAX_KEY_GROUPS_PER_CLEANUP",
    "create_ttl_state",
]


class _TtlDecorator:
    """What every TTL decorator knows (Flink's ``AbstractTtlDecorator``)."""

    __slots__ = ("_ttl", "_clock", "_update_on_read", "_return_expired")

    def __init__(self, config: StateTtlConfig, clock: TtlTimeProvider) -> None:
        self._ttl = config.get_ttl_ms()
        self._clock = clock
        self._update_on_read = config.get_update_type() is UpdateType.OnReadAndWrite
        self._return_expired = config.get_state_visibility() is StateVisibility.ReturnExpiredIfNotCleanedUp

    def _get_unexpired(self, ttl_value: Optional[Tuple[Any, int]]) -> Any:
        """The user value of ``ttl_value``, or ``None`` if absent or expired and not returnable."""
        if ttl_value is None:
            return None
        if ttl_value[1] + self._ttl <= self._clock() and not self._return_expired:
            return None
        return ttl_value[0]


class TtlReduceFunction(_TtlDecorator):
    """Wraps a reduce callable to reduce TTL values (Flink's ``TtlReduceFunction``): expired
    inputs (unless returnable) are ignored, the result is stamped with the current time.

    :param reduce: the user's ``reduce(a, b)`` callable.
    :param config: the TTL configuration.
    :param clock: the TTL time provider (epoch ms).
    """

    __slots__ = ("_reduce",)

    def __init__(self, reduce: Callable[[Any, Any], Any], config: StateTtlConfig, clock: TtlTimeProvider) -> None:
        super().__init__(config, clock)
        self._reduce = reduce

    def reduce(self, value1: Optional[Tuple[Any, int]], value2: Optional[Tuple[Any, int]]) -> Optional[Tuple[Any, int]]:
        """Reduce two TTL values into a fresh one; ``None`` if neither is usable."""
        v1 = self._get_unexpired(value1)
        v2 = self._get_unexpired(value2)
        if v1 is not None and v2 is not None:
            result = self._reduce(v1, v2)
            return None if result is None else (result, self._clock())
        if v1 is not None:
            return (v1, self._clock())
        if v2 is not None:
            return (v2, self._clock())
        return None

    __call__ = reduce


class TtlAggregateFunction(_TtlDecorator):
    """Wraps an aggregate function to work on TTL accumulators (Flink's
    ``TtlAggregateFunction``): an expired accumulator (unless returnable) is replaced by a fresh
    one, every result is stamped with the current time.

    :param agg_function: the user's aggregate function.
    :param config: the TTL configuration.
    :param clock: the TTL time provider (epoch ms).
    """

    __slots__ = ("_agg_function",)

    def __init__(self, agg_function: Any, config: StateTtlConfig, clock: TtlTimeProvider) -> None:
        super().__init__(config, clock)
        self._agg_function = agg_function

    def create_accumulator(self) -> Tuple[Any, int]:
        """A fresh user accumulator, stamped now."""
        return (self._agg_function.create_accumulator(), self._clock())

    def add(self, value: Any, accumulator: Optional[Tuple[Any, int]]) -> Optional[Tuple[Any, int]]:
        """Add ``value`` to the (unexpired, else fresh) accumulator; stamped now."""
        user_acc = self._get_unexpired(accumulator)
        if user_acc is None:
            user_acc = self._agg_function.create_accumulator()
        result = self._agg_function.add(value, user_acc)
        return None if result is None else (result, self._clock())

    def get_result(self, accumulator: Optional[Tuple[Any, int]]) -> Any:
        """The user result of the (usable) accumulator, or ``None``."""
        user_acc = self._get_unexpired(accumulator)
        return None if user_acc is None else self._agg_function.get_result(user_acc)

    def merge(self, acc_a: Optional[Tuple[Any, int]], acc_b: Optional[Tuple[Any, int]]) -> Optional[Tuple[Any, int]]:
        """Merge two accumulators, ignoring unusable ones; stamped now."""
        a = self._get_unexpired(acc_a)
        b = self._get_unexpired(acc_b)
        if a is not None and b is not None:
            result = self._agg_function.merge(a, b)
            return None if result is None else (result, self._clock())
        if a is not None:
            return (a, self._clock())
        if b is not None:
            return (b, self._clock())
        return None


# -- incremental cleanup ------------------------------------------------------------------------

#: Key groups a :class:`TtlIncrementalCleanup` call moves through at most, so that an access to
#: a sparse state with many key groups stays cheap.
MAX_KEY_GROUPS_PER_CLEANUP = 256


class TtlIncrementalCleanup:
    """A cursor over one state table that checks ``cleanup_size`` entries per call (Flink's
    ``TtlIncrementalCleanup`` over ``StateIncrementalVisitor``).

    The cursor walks the table key group by key group, wrapping around at the end; on entering
    a key group it copies its namespaces, on entering a namespace its keys, so the table may
    change between calls (entries removed since are skipped, entries added are seen on the next
    pass). A call stops after ``cleanup_size`` existing entries or after moving through
    :data:`MAX_KEY_GROUPS_PER_CLEANUP` key groups. Each visited entry is passed to
    ``transform(stored, now_ms)``: ``None`` removes the entry, another object replaces it (a
    list or map without its expired elements).

    Rill difference: Flink's call also stops at the end of its iterator; Rill wraps around, so
    that a call checks exactly ``cleanup_size`` entries whenever the table holds that many (an
    entry may then be checked twice in one call when the table holds fewer).

    :param table: the state's table.
    :param cleanup_size: entries checked per call, ``> 0``.
    :param transform: the state's ``unexpired_or_none``, or ``None`` (see ``__init__``).
    :param clock: the TTL time provider (epoch ms).
    :param ttl_ms: the time to live, for the inline check.
    """

    __slots__ = ("_maps", "_cleanup_size", "_transform", "_ttl", "_clock", "_next_kg", "_kg", "_by_namespace",
                 "_namespaces", "_ns_index", "_namespace", "_by_key", "_keys", "_pos")

    def __init__(
        self,
        table: StateTable,
        cleanup_size: int,
        transform: Optional[Callable[[Any, int], Any]],
        clock: TtlTimeProvider,
        ttl_ms: int = 0,
    ) -> None:
        """:param transform: ``None`` for states storing one TTL value per entry (value,
        reducing, aggregating), checked inline against ``ttl_ms``."""
        self._maps = table.key_group_maps
        self._cleanup_size = cleanup_size
        self._transform = transform
        self._ttl = ttl_ms
        self._clock = clock
        self._next_kg = 0
        # the cursor: key group (its offset, -1 before the first) and its dict, its namespaces
        # (copied), the current namespace, its key dict (possibly detached since: then empty)
        # and its keys (copied)
        self._kg = -1
        self._by_namespace: Dict[Any, Dict[Any, Any]] = {}
        self._namespaces: List[Any] = []
        self._ns_index = 0
        self._namespace: Any = None
        self._by_key: Dict[Any, Any] = {}
        self._keys: List[Any] = []
        self._pos = 0

    def on_key_selected(self, key: Any) -> None:
        """Key selection listener form of :meth:`state_accessed` (``key`` is ignored)."""
        self.state_accessed()

    def state_accessed(self) -> None:
        """Check the next ``cleanup_size`` entries."""
        budget = self._cleanup_size
        if self._kg >= 0 and self._maps[self._kg] is not self._by_namespace:
            self._reattach()
        pos = self._pos
        keys = self._keys
        now = self._clock()
        if pos + budget <= len(keys):  # fast path: inside the current namespace's keys
            self._pos = pos + budget
            budget = self._check(keys[pos:pos + budget], budget, now)
            if budget == 0:
                return
        self._advance_and_check(budget, now)

    def _reattach(self) -> None:
        """A snapshot pinned the cursor's key group since the last call (see
        :mod:`rill.state.copy_on_write`): move the cursor to the key group's live copy, so that
        the cleanup never deletes from what the snapshot holds."""
        slot = self._maps[self._kg]
        live = slot if type(slot) is dict else slot.live()
        self._by_namespace = live
        by_key = live.get(self._namespace)
        self._by_key = {} if by_key is None else by_key

    def _check(self, chunk: List[Any], budget: int, now: int) -> int:
        """Check the entries of ``chunk`` (keys of the current namespace); returns ``budget``
        minus the entries that existed."""
        by_key = self._by_key
        transform = self._transform
        limit = now - self._ttl  # a TTL value is expired iff its timestamp <= limit
        get = by_key.get
        for key in chunk:
            stored = get(key)
            if stored is None:
                continue
            budget -= 1
            if transform is None:
                if stored[1] > limit:
                    continue
                del by_key[key]
            else:
                clean = transform(stored, now)
                if clean is stored:
                    continue
                if clean is None:
                    del by_key[key]
                else:
                    by_key[key] = clean
        if not by_key:
            by_namespace = self._by_namespace
            if by_namespace.get(self._namespace) is by_key:  # not detached: keep no empty dicts
                del by_namespace[self._namespace]
            self._pos = len(self._keys)
        return budget

    def _advance_and_check(self, budget: int, now: int) -> None:
        """The general path: finish the current namespace, then move on through namespaces
        and key groups until ``budget`` entries were checked or the key group limit is hit."""
        maps = self._maps
        moves = MAX_KEY_GROUPS_PER_CLEANUP
        while budget > 0:
            keys = self._keys
            pos = self._pos
            if pos < len(keys):
                end = pos + budget
                self._pos = min(end, len(keys))
                budget = self._check(keys[pos:end], budget, now)
                continue
            if self._ns_index < len(self._namespaces):  # next namespace of the key group
                namespace = self._namespaces[self._ns_index]
                self._ns_index += 1
                by_key = self._by_namespace.get(namespace)
                self._namespace = namespace
                self._by_key = {} if by_key is None else by_key
                self._keys = list(self._by_key)
                self._pos = 0
                continue
            if moves == 0:
                break
            moves -= 1  # next key group, wrapping around
            if self._next_kg >= len(maps):
                self._next_kg = 0
            by_namespace = maps[self._next_kg]
            if type(by_namespace) is not dict:
                by_namespace = by_namespace.live()
            self._kg = self._next_kg
            self._next_kg += 1
            self._by_namespace = by_namespace
            self._namespaces = list(by_namespace) if by_namespace else []
            self._ns_index = 0


def _no_cleanup() -> None:
    pass


# -- the TTL states -----------------------------------------------------------------------------

class AbstractTtlState(InternalKvState):
    """Base of the TTL decorators (Flink's ``AbstractTtlState``): wraps a heap state whose
    stored values are TTL values (``(user_value, last_access_ms)``), checks expiry on access and
    runs the incremental cleanup before each access.

    :param original: the wrapped heap state (storing TTL values).
    :param config: the TTL configuration (enabled).
    :param clock: the TTL time provider (epoch ms).
    """

    __slots__ = ("_original", "_config", "_ttl", "_clock", "_update_on_read", "_return_expired",
                 "_access", "incremental_cleanup")

    def __init__(self, original: AbstractHeapState, config: StateTtlConfig, clock: TtlTimeProvider) -> None:
        self._original = original
        self._config = config
        self._ttl = config.get_ttl_ms()
        self._clock = clock
        self._update_on_read = config.get_update_type() is UpdateType.OnReadAndWrite
        self._return_expired = config.get_state_visibility() is StateVisibility.ReturnExpiredIfNotCleanedUp
        strategy = config.get_cleanup_strategies().get_incremental_cleanup_strategy()
        #: the incremental cleanup cursor, or ``None`` if incremental cleanup is off
        self.incremental_cleanup: Optional[TtlIncrementalCleanup] = None
        self._access: Callable[[], None] = _no_cleanup
        if strategy is not None:
            scalar = type(self).unexpired_or_none is AbstractTtlState.unexpired_or_none
            self.incremental_cleanup = TtlIncrementalCleanup(
                original.table,
                strategy.get_cleanup_size(),
                None if scalar else self.unexpired_or_none,
                clock,
                self._ttl,
            )
            self._access = self.incremental_cleanup.state_accessed

    # -- InternalKvState and introspection --------------------------------------------------
    def set_current_namespace(self, namespace: Any) -> None:
        """Bind the state to ``namespace`` (hashable; checked on the next access)."""
        self._original.set_current_namespace(namespace)

    def get_current_namespace(self) -> Any:
        """The namespace the state is bound to."""
        return self._original.get_current_namespace()

    @property
    def original(self) -> AbstractHeapState:
        """The wrapped heap state (its values are TTL values)."""
        return self._original

    @property
    def table(self) -> StateTable:
        """The state's :class:`StateTable` (values in the TTL layout of the module docstring)."""
        return self._original.table

    @property
    def descriptor(self) -> StateDescriptor:
        """The descriptor the state was registered with."""
        return self._original.descriptor

    @property
    def ttl_config(self) -> StateTtlConfig:
        """The TTL configuration."""
        return self._config

    def clear(self) -> None:
        """Remove the current key's entry in the current namespace (Flink clears, then runs
        the incremental cleanup)."""
        self._original.clear()
        self._access()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.table.name!r}, ttl_ms={self._ttl})"

    # -- expiry -----------------------------------------------------------------------------
    def unexpired_or_none(self, stored: Any, now_ms: int) -> Any:
        """``stored`` (a stored value in the TTL layout) without what expired at ``now_ms``:
        ``None`` if nothing is left, ``stored`` itself if nothing expired (Flink's
        ``getUnexpiredOrNull``). Used by the incremental cleanup and full-snapshot filtering."""
        return None if stored[1] + self._ttl <= now_ms else stored

    def create_snapshot_transformer(self) -> Callable[[Any], Any]:
        """A function ``stored -> stored or None`` that leaves out what has expired at the
        time of this call (Flink's ``TtlStateSnapshotTransformer``, for ``cleanup_full_snapshot``).
        Live state is not modified; the returned value may share elements with ``stored``."""
        now = self._clock()
        unexpired_or_none = self.unexpired_or_none
        return lambda stored: unexpired_or_none(stored, now)

    def _checked_and_updated(self, stored: Optional[Tuple[Any, int]], update: Callable[[Any], None]) -> Any:
        """Flink's ``getWithTtlCheckAndUpdate`` on a value read already: expired → clear (the
        current entry) and return it only if returnable; unexpired → refresh on read if
        configured. Returns the user value or ``None``."""
        if stored is None:
            return None
        now = self._clock()
        if stored[1] + self._ttl <= now:
            self._original.clear()
            return stored[0] if self._return_expired else None
        if self._update_on_read:
            update((stored[0], now))
        return stored[0]



class _TtlMergingState(AbstractTtlState):
    """TTL states whose namespaces can be merged (list, reducing, aggregating)."""

    __slots__ = ()

    def merge_namespaces(self, target: Any, sources: Iterable[Any]) -> None:
        """Merge the current key's entries of ``sources`` into ``target`` and remove them
        (list: elements keep their timestamps; reducing/aggregating: through the TTL-aware
        function, which ignores expired values and stamps the result now).

        :raises RuntimeError: if no key is set.
        """
        self._original.merge_namespaces(target, sources)  # type: ignore[attr-defined]


class TtlValueState(AbstractTtlState, ValueState):
    """A :class:`~rill.state.api.ValueState` with TTL (Flink's ``TtlValueState``)."""

    __slots__ = ()

    def value(self) -> Any:
        """The current key's value, or ``None`` if absent or expired (see the visibility).

        :raises RuntimeError: if no key is set.
        """
        self._access()
        original = self._original
        return self._checked_and_updated(original._get_internal(), original._put_internal)

    def update(self, value: Any) -> None:
        """Set the value, stamped now; ``None`` removes the entry.

        :raises RuntimeError: if no key is set.
        """
        self._access()
        if value is None:
            self._original.clear()
        else:
            self._original._put_internal((value, self._clock()))


class TtlListState(_TtlMergingState, ListState):
    """A :class:`~rill.state.api.ListState` with TTL, one timestamp per element (Flink's
    ``TtlListState``).

    ``get()`` returns a new list of the unexpired elements (all of them, expired included, with
    ``ReturnExpiredIfNotCleanedUp``); when every element has expired the entry is removed. With
    ``OnReadAndWrite`` a read rewrites the entry with only the unexpired elements, each stamped
    now. Otherwise expired elements among unexpired ones stay stored until a cleanup removes them
    (as in Flink).
    """

    __slots__ = ()

    def get(self) -> List[Any]:
        """The current key's (visible) elements; an empty list if there are none.

        :raises RuntimeError: if no key is set.
        """
        self._access()
        original = self._original
        stored = original._get_internal()
        if stored is None:
            return []
        now = self._clock()
        limit = now - self._ttl  # expired iff ts + ttl <= now iff ts <= limit
        unexpired = [v for v, ts in stored if ts > limit]
        if not unexpired:
            original.clear()
            return [v for v, _ in stored] if self._return_expired else []
        if self._update_on_read:
            original._put_internal([(v, now) for v in unexpired])
        if self._return_expired and len(unexpired) != len(stored):
            return [v for v, _ in stored]
        return unexpired

    def add(self, value: Any) -> None:
        """Append ``value``, stamped now.

        :raises ValueError: if ``value`` is ``None``.
        :raises RuntimeError: if no key is set.
        """
        if value is None:
            self._original.add(None)  # raises the heap state's error
        self._access()
        self._original.add((value, self._clock()))

    def add_all(self, values: Iterable[Any]) -> None:
        """Append every element of ``values``, all stamped now; nothing if one is ``None``.

        :raises ValueError: if ``values`` is ``None`` or contains ``None``.
        :raises RuntimeError: if no key is set.
        """
        copied = self._original._checked_list(values)
        self._access()
        if not copied:
            return
        now = self._clock()
        wrapped = [(v, now) for v in copied]
        original = self._original
        stored = original._get_internal()
        if stored is None:
            original._put_internal(wrapped)
        else:
            stored.extend(wrapped)

    def update(self, values: Iterable[Any]) -> None:
        """Replace the elements by ``values``, all stamped now; empty removes the entry.

        :raises ValueError: if ``values`` is ``None`` or contains ``None`` (state unchanged).
        :raises RuntimeError: if no key is set.
        """
        copied = self._original._checked_list(values)
        self._access()
        if copied:
            now = self._clock()
            self._original._put_internal([(v, now) for v in copied])
        else:
            self._original.clear()

    def unexpired_or_none(self, stored: List[Tuple[Any, int]], now_ms: int) -> Optional[List[Tuple[Any, int]]]:
        """The unexpired elements of a stored list (``stored`` itself if none expired, ``None``
        if all did)."""
        limit = now_ms - self._ttl
        kept = [e for e in stored if e[1] > limit]
        if len(kept) == len(stored):
            return stored
        return kept or None


class TtlMapState(AbstractTtlState, MapState):
    """A :class:`~rill.state.api.MapState` with TTL, one timestamp per entry (Flink's
    ``TtlMapState``). Every read of an entry (``get``, ``contains``, the iteration methods)
    checks it: an expired entry is removed (and returned this last time with
    ``ReturnExpiredIfNotCleanedUp``), an unexpired one is refreshed with ``OnReadAndWrite``."""

    __slots__ = ()

    def _wrapped(self, key: Any) -> Optional[Tuple[Any, int]]:
        """The usable TTL value of user key ``key`` (after expiry check and update), or ``None``."""
        self._access()
        original = self._original
        stored = original._get_internal()
        if stored is None:
            return None
        entry = stored.get(key)
        if entry is None:
            return None
        now = self._clock()
        if entry[1] + self._ttl <= now:
            del stored[key]
            if not stored:
                original.clear()
            return entry if self._return_expired else None
        if self._update_on_read:
            stored[key] = (entry[0], now)
        return entry

    def get(self, key: Any) -> Any:
        """The value of user key ``key``, or ``None`` if absent or expired.

        :raises RuntimeError: if no key is set.
        """
        entry = self._wrapped(key)
        return None if entry is None else entry[0]

    def contains(self, key: Any) -> bool:
        """Whether ``key`` has a usable mapping (an expired one is removed)."""
        return self._wrapped(key) is not None

    def put(self, key: Any, value: Any) -> None:
        """Map user key ``key`` to ``value`` (``None`` is legal), stamped now.

        :raises RuntimeError: if no key is set.
        """
        self._access()
        self._original.put(key, (value, self._clock()))

    def put_all(self, dict_value: Dict[Any, Any]) -> None:
        """Add every mapping of ``dict_value``, all stamped now.

        :raises ValueError: if ``dict_value`` is ``None``.
        :raises RuntimeError: if no key is set.
        """
        if dict_value is None:
            self._original.put_all(None)  # raises the heap state's error
        additions = dict(dict_value)
        self._access()
        now = self._clock()
        self._original.put_all({k: (v, now) for k, v in additions.items()})

    def remove(self, key: Any) -> None:
        """Remove the mapping of ``key``.

        :raises RuntimeError: if no key is set.
        """
        self._access()
        self._original.remove(key)

    def _visible_items(self, first_only: bool = False) -> List[Tuple[Any, Any]]:
        """Check every entry (or up to the first usable one): remove expired ones, refresh
        unexpired ones on read; return the usable ``(key, value)`` pairs."""
        self._access()
        original = self._original
        stored = original._get_internal()
        if stored is None:
            return []
        now = self._clock()
        limit = now - self._ttl
        update_on_read = self._update_on_read
        return_expired = self._return_expired
        result: List[Tuple[Any, Any]] = []
        for key, (value, ts) in list(stored.items()):
            if ts <= limit:
                del stored[key]
                if not return_expired:
                    continue
            elif update_on_read:
                stored[key] = (value, now)
            result.append((key, value))
            if first_only:
                break
        if not stored:
            original.clear()
        return result

    def items(self) -> List[Tuple[Any, Any]]:
        """The usable ``(key, value)`` mappings (expired ones are removed)."""
        return self._visible_items()

    def keys(self) -> List[Any]:
        """The usable keys (expired mappings are removed)."""
        return [k for k, _ in self._visible_items()]

    def values(self) -> List[Any]:
        """The usable values (expired mappings are removed)."""
        return [v for _, v in self._visible_items()]

    def is_empty(self) -> bool:
        """Whether there is no usable mapping (checks entries up to the first usable one)."""
        return not self._visible_items(first_only=True)

    def unexpired_or_none(self, stored: Dict[Any, Tuple[Any, int]], now_ms: int) -> Optional[Dict[Any, Tuple[Any, int]]]:
        """The unexpired entries of a stored map (``stored`` itself if none expired, ``None``
        if all did)."""
        limit = now_ms - self._ttl
        kept = {k: e for k, e in stored.items() if e[1] > limit}
        if len(kept) == len(stored):
            return stored
        return kept or None


class TtlReducingState(_TtlMergingState, ReducingState):
    """A :class:`~rill.state.api.ReducingState` with TTL (Flink's ``TtlReducingState``): the
    wrapped heap state reduces with a :class:`TtlReduceFunction`, so an expired value is
    replaced rather than reduced with."""

    __slots__ = ()

    def get(self) -> Any:
        """The reduced value, or ``None`` if absent or expired.

        :raises RuntimeError: if no key is set.
        """
        self._access()
        original = self._original
        return self._checked_and_updated(original._get_internal(), original._put_internal)

    def add(self, value: Any) -> None:
        """Reduce ``value`` into the current key's value (``None`` clears the entry).

        :raises RuntimeError: if no key is set.
        """
        self._access()
        self._original.add(None if value is None else (value, self._clock()))


class TtlAggregatingState(_TtlMergingState, AggregatingState):
    """An :class:`~rill.state.api.AggregatingState` with TTL (Flink's ``TtlAggregatingState``):
    the wrapped heap state aggregates with a :class:`TtlAggregateFunction`, so an expired
    accumulator is replaced by a fresh one."""

    __slots__ = ("_ttl_function",)

    def __init__(
        self,
        original: HeapAggregatingState,
        config: StateTtlConfig,
        clock: TtlTimeProvider,
        ttl_function: TtlAggregateFunction,
    ) -> None:
        super().__init__(original, config, clock)
        self._ttl_function = ttl_function

    def get(self) -> Any:
        """``get_result(accumulator)``, or ``None`` if absent or expired.

        :raises RuntimeError: if no key is set.
        """
        self._access()
        original = self._original
        user_acc = self._checked_and_updated(original._get_internal(), original._put_internal)
        return None if user_acc is None else self._ttl_function._agg_function.get_result(user_acc)

    def add(self, value: Any) -> None:
        """Add ``value`` to the current key's (unexpired, else fresh) accumulator (``None``
        clears the entry).

        :raises RuntimeError: if no key is set.
        """
        self._access()
        self._original.add(value)

    def get_accumulator(self) -> Any:
        """The stored user accumulator, expired or not, or ``None`` (no check, no update)."""
        stored = self._original._get_internal()
        return None if stored is None else stored[0]


# -- factory ------------------------------------------------------------------------------------

def create_ttl_state(backend: Any, table: StateTable, config: StateTtlConfig, clock: TtlTimeProvider) -> AbstractTtlState:
    """The TTL state of ``table.descriptor`` around a new heap state on ``table`` (Flink's
    ``TtlStateFactory.createStateAndWrapWithTtlIfEnabled``; the caller checked that ``config``
    is enabled). Registers the incremental cleanup as a key selection listener of ``backend``
    when ``run_cleanup_for_every_record`` is set.

    :raises TypeError: if ``config`` is not a :class:`StateTtlConfig`.
    """
    if not isinstance(config, StateTtlConfig):
        raise TypeError(
            f"State '{table.name}': enable_time_to_live() needs a StateTtlConfig, got {config!r} "
            f"of type {type(config).__name__}"
        )
    descriptor = table.descriptor
    kind = descriptor.state_type
    state: AbstractTtlState
    if kind is StateType.VALUE:
        state = TtlValueState(HeapValueState(backend, table), config, clock)
    elif kind is StateType.LIST:
        state = TtlListState(HeapListState(backend, table), config, clock)
    elif kind is StateType.MAP:
        state = TtlMapState(HeapMapState(backend, table), config, clock)
    elif kind is StateType.REDUCING:
        reduce = TtlReduceFunction(descriptor.reduce_callable, config, clock)  # type: ignore[attr-defined]
        state = TtlReducingState(HeapReducingState(backend, table, reduce.reduce), config, clock)
    elif kind is StateType.AGGREGATING:
        function = TtlAggregateFunction(descriptor.get_agg_function(), config, clock)  # type: ignore[attr-defined]
        state = TtlAggregatingState(HeapAggregatingState(backend, table, function), config, clock, function)
    else:  # pragma: no cover - every StateType is handled
        raise ValueError(f"Unknown state type {kind}")
    strategy = config.get_cleanup_strategies().get_incremental_cleanup_strategy()
    if strategy is not None and strategy.run_cleanup_for_every_record() and state.incremental_cleanup is not None:
        backend.register_key_selection_listener(state.incremental_cleanup.on_key_selected)
    return state
