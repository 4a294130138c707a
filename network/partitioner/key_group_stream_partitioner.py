"""HASH: records with the same key go to the consumer subtask owning the key's key group
(Flink's ``KeyGroupStreamPartitioner``), the exchange behind ``key_by``."""

from __future__ import annotations

import reprlib
from typing import Any, Callable, Optional

from rill.state.key_groups import (
    UnsupportedKeyError,
    assign_to_key_group,
    check_parallelism_preconditions,
    compute_operator_index_for_key_group,
)

from .stream_partitioner import Split, StreamPartitioner, bucket_by_channel, resolve_key_selector

__all__ = [
    "KeyGroupStreamPartitioner",
    "KeySelectionError",
    "DEFAULT_KEY_CACHE_SIZE",
    "UNCONFIGURED_MAX_PARALLELISM",
]

#: ``max_parallelism`` of a partitioner built by ``key_by`` before the job graph configures it.
UNCONFIGURED_MAX_PARALLELISM = -1
#: Default bound on the key -> channel cache (entries).
DEFAULT_KEY_CACHE_SIZE = 1 << 18

_repr = reprlib.Repr()
_repr.maxstring = 80
_repr.maxother = 80


class KeySelectionError(TypeError):
    """A record's key cannot be assigned to a key group (it has no stable hash: a list, dict,
    set or arbitrary object). The message names the record and the key's type; the task adds
    the operator's name.

    :ivar value: the record. :ivar key: its key.
    """

    def __init__(self, message: str, value: Any, key: Any) -> None:
        super().__init__(message)
        self.value = value
        self.key = key

    def __reduce__(self):
        # BaseException pickles only ``args`` (the message): without this a KeySelectionError
        # raised in a cluster task process could not be loaded by the client, which then got
        # a RemoteTaskException instead of the TypeError the embedded mode raises.
        return type(self), (self.args[0] if self.args else "", self.value, self.key), self.__dict__


class KeyGroupStreamPartitioner(StreamPartitioner):
    """Channel of a record = ``compute_operator_index_for_key_group(max_parallelism, n,
    assign_to_key_group(key_selector(record), max_parallelism))``, consistent with
    :mod:`rill.state.key_groups`, so a record reaches the subtask that holds its keyed state.

    :param key_selector: a :class:`~rill.common.functions.KeySelector` or a callable
        ``record -> key``; a selector with a ``get_keys(values) -> keys`` method (such as
        ``rill.operators.field_key_selector.FieldKeySelector``) keys whole batches with it.
    :param max_parallelism: the number of key groups (1..32768), or ``-1`` for "not configured
        yet": the job graph generator then calls :meth:`configure` with the consumer's max
        parallelism (Flink's ``ConfigurableStreamPartitioner``).
    :param key_cache_size: bound on the per-instance cache ``key -> key group`` (entries; cleared
        when exceeded). Hashing a key costs microseconds in Python; the cache makes repeated keys
        one dict lookup. Keys that compare equal share a cache entry. A key group's channel is
        then one list index (a table of ``max_parallelism`` channels built at :meth:`setup`).
    :param key_token: ``None``, or the token of the ``key_by`` this partitioner serves: the
        :class:`~rill.network.api.writer.RecordWriter` then hands the consumer
        :class:`~rill.network.partitioner.keyed_batch.KeyedBatch` es carrying the keys and key
        groups this partitioner computed (see :meth:`split_keyed`), so the keyed operator
        neither calls the key selector nor hashes the key again.
    :raises ValueError: for a bad ``max_parallelism``; at :meth:`setup`, if it is still
        unconfigured or the number of channels exceeds it.

    Cost per record: the key selector call plus one dict lookup (C-level ``map``), at p > 1 one
    list index for the channel and one append to bucket the record (and one each for its key
    and key group when keys travel).
    """

    def __init__(
        self,
        key_selector: Any,
        max_parallelism: int = UNCONFIGURED_MAX_PARALLELISM,
        key_cache_size: int = DEFAULT_KEY_CACHE_SIZE,
        key_token: Any = None,
    ) -> None:
        super().__init__()
        if max_parallelism != UNCONFIGURED_MAX_PARALLELISM:
            check_parallelism_preconditions(1, max_parallelism)
        self.key_selector = key_selector
        self._get_key: Callable[[Any], Any] = resolve_key_selector(key_selector)
        # a selector that keys whole batches (key_by(position) in rill.operators) is used per batch
        get_keys = getattr(key_selector, "get_keys", None)
        self._get_keys: Optional[Callable[[list], list]] = get_keys if callable(get_keys) else None
        self.max_parallelism = max_parallelism
        self.key_cache_size = key_cache_size
        self.key_token = key_token
        self._cache: dict[Any, int] = {}
        self._channel_of_group: list[int] = []

    def configure(self, max_parallelism: int) -> None:
        """Set the number of key groups: the consumer's max parallelism (Flink's
        ``ConfigurableStreamPartitioner.configure``). Clears the cache.

        :raises ValueError: unless ``1 <= max_parallelism <= 32768``.
        """
        check_parallelism_preconditions(1, max_parallelism)
        self.max_parallelism = max_parallelism
        self._cache = {}

    def setup(self, number_of_channels: int) -> None:
        """:raises ValueError: if the max parallelism is not configured or is below
        ``number_of_channels``."""
        if self.max_parallelism == UNCONFIGURED_MAX_PARALLELISM:
            raise ValueError(
                "HASH partitioner has no max parallelism: configure(max_parallelism) must be "
                "called (by the job graph generator) before setup()"
            )
        super().setup(number_of_channels)
        check_parallelism_preconditions(number_of_channels, self.max_parallelism)
        self._cache = {}
        max_parallelism = self.max_parallelism
        self._channel_of_group = [compute_operator_index_for_key_group(max_parallelism, number_of_channels, g)
                                  for g in range(max_parallelism)]

    def _key_group_of_key(self, value: Any, key: Any) -> int:
        """Compute (and cache) the key group of ``key``; converts key errors."""
        try:
            key_group = assign_to_key_group(key, self.max_parallelism)
            self._cache[key] = key_group
        except (UnsupportedKeyError, TypeError) as error:
            raise self._key_error(value, key, error) from error
        return key_group

    @staticmethod
    def _key_error(value: Any, key: Any, error: BaseException) -> KeySelectionError:
        return KeySelectionError(
            f"Cannot partition record {_repr.repr(value)} by key: its key {_repr.repr(key)} of "
            f"type {type(key).__name__} cannot be assigned to a key group ({error})",
            value,
            key,
        )

    def select_channel(self, value: Any) -> int:
        key = self._get_key(value)
        channel = self.select_channel_for_key(value, key)
        if len(self._cache) > self.key_cache_size:
            self._cache.clear()
        return channel

    def split(self, values: list, timestamps: Optional[list] = None) -> list[Split]:
        n = self._check_setup()
        if not values:
            return []
        key_groups = self._route(values)[1]
        if n == 1:
            return [(0, values, timestamps)]
        channels = list(map(self._channel_of_group.__getitem__, key_groups))
        return bucket_by_channel(values, timestamps, channels, n)

    def split_keyed(self, values: list, timestamps: Optional[list] = None) -> list[tuple]:
        """:meth:`split`, with each part's keys and key groups: ``[(channel, values,
        timestamps_or_None, keys, key_groups), ...]``, ``keys[i]`` being
        ``key_selector(values[i])`` as computed to route it and ``key_groups[i]`` its key group
        (``assign_to_key_group(keys[i], max_parallelism)``). Returned lists may be the arguments
        themselves, as with :meth:`split`.

        :raises KeySelectionError: for a key without a stable hash (nothing routed).
        :raises RuntimeError: before :meth:`setup`.
        """
        n = self._check_setup()
        if not values:
            return []
        keys, key_groups = self._route(values)
        if n == 1:
            return [(0, values, timestamps, keys, key_groups)]
        channels = list(map(self._channel_of_group.__getitem__, key_groups))
        return [(c, part_values, part_timestamps, part_keys, part_groups)
                for (c, part_values, part_timestamps), (_, part_keys, _), (_, part_groups, _) in zip(
                    bucket_by_channel(values, timestamps, channels, n),
                    bucket_by_channel(keys, None, channels, n),
                    bucket_by_channel(key_groups, None, channels, n))]

    def _route(self, values: list) -> tuple[list, list]:
        """``(keys, key_groups)`` of a non-empty batch, one per record. At one channel too: the
        key groups travel to the keyed operator, and a key without a stable hash fails here, as
        in Flink."""
        get_keys = self._get_keys
        keys = get_keys(values) if get_keys is not None else list(map(self._get_key, values))
        cache = self._cache
        try:
            key_groups = list(map(cache.get, keys))
        except TypeError:
            key_groups = self._key_groups_slow(values, keys)
        else:
            if None in key_groups:
                # the misses found with C-level index(): with Zipf-like keys nearly every batch
                # has a few new keys, and a Python loop over the whole batch cost more than them
                key_group_of_key = self._key_group_of_key
                index = key_groups.index
                i = index(None)
                while True:
                    key = keys[i]
                    key_group = cache.get(key)  # an earlier miss in this batch may have filled it
                    key_groups[i] = key_group if key_group is not None else key_group_of_key(values[i], key)
                    try:
                        i = index(None, i + 1)
                    except ValueError:
                        break
        if len(cache) > self.key_cache_size:
            cache.clear()
        return keys, key_groups

    def _key_groups_slow(self, values: list, keys: list) -> list[int]:
        """Record-by-record path for a batch holding an unhashable key: raises for the first one
        (records before it are fine, and nothing was emitted yet)."""
        return [self._key_group_for_key(value, key) for value, key in zip(values, keys)]

    def _key_group_for_key(self, value: Any, key: Any) -> int:
        try:
            key_group = self._cache.get(key)
        except TypeError as error:
            raise self._key_error(value, key, error) from error
        return key_group if key_group is not None else self._key_group_of_key(value, key)

    def select_channel_for_key(self, value: Any, key: Any) -> int:
        """The channel of a record whose key is already known (``value`` is for messages).

        :raises KeySelectionError: for a key without a stable hash.
        :raises RuntimeError: before :meth:`setup`.
        """
        self._check_setup()
        return self._channel_of_group[self._key_group_for_key(value, key)]

    def copy(self) -> "KeyGroupStreamPartitioner":
        duplicate = KeyGroupStreamPartitioner(self.key_selector, self.max_parallelism, self.key_cache_size,
                                              self.key_token)
        duplicate.number_of_channels = self.number_of_channels
        duplicate._channel_of_group = self._channel_of_group
        return duplicate

    def __str__(self) -> str:
        return "HASH"
