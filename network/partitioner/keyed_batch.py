"""``KeyedBatch``: a batch of records that carries the keys its HASH exchange computed, and their
key groups, so the keyed operator behind the exchange neither calls the key selector nor hashes
the key a second time (issue 16).

Flink computes a record's key twice: ``KeyGroupStreamPartitioner.selectChannel`` to route it and
the keyed operator's ``setKeyContextElement`` to scope its state. In Python each computation is
a call per record; here the partitioner's keys travel with the records *inside a process*: the
:class:`~rill.network.api.writer.RecordWriter` of a HASH exchange hands the consumer a
``KeyedBatch`` (a ``list`` of the values, so every consumer that expects a list still works)
whose ``keys`` attribute is the parallel list of keys and ``key_groups`` that of their key groups
(``KeyGroupRangeAssignment.assignToKeyGroup``, the same the state backend would compute). Across
processes the batch is serialized as a plain list: keys and key groups are not sent (they would
cost bytes and decoding to save one key selector call per record), and the consumer computes
them again.

``key_token`` says which exchange made the keys: ``key_by`` gives its partitioner and the keyed
operators built on that ``KeyedStream`` the same token, and an operator uses ``keys`` only when
the token is its own, so keys are never taken from another key selector's exchange.
"""

from __future__ import annotations

from typing import Any, Hashable, List

__all__ = ["KeyedBatch"]


class KeyedBatch(list):
    """A ``list`` of record values with ``keys`` (one key per value, same order), their
    ``key_groups`` (one ``int`` in ``[0, max_parallelism)`` per value, or ``None`` when they were
    not computed) and the ``key_token`` of the exchange that computed them.

    :param values: the records (copied into the batch, as ``list(values)``).
    :param keys: one key per record; the batch keeps this list object.
    :param key_token: the token of the ``key_by`` that computed ``keys`` (hashable, compared
        with ``==``).
    :param key_groups: ``None`` (the consumer computes them), or one key group per record (the
        batch keeps this list object).
    :raises ValueError: if ``keys`` or ``key_groups`` and ``values`` differ in length.

    Slicing returns a plain ``list`` (without keys): use :meth:`slice` to keep them.
    """

    __slots__ = ("keys", "key_token", "key_groups")

    def __init__(self, values: Any = (), keys: List[Any] = None, key_token: Hashable = None,
                 key_groups: List[int] = None) -> None:
        super().__init__(values)
        self.keys = [] if keys is None else keys
        self.key_groups = key_groups
        if len(self.keys) != len(self):
            raise ValueError(f"KeyedBatch got {len(self.keys)} keys for {len(self)} values")
        if key_groups is not None and len(key_groups) != len(self):
            raise ValueError(f"KeyedBatch got {len(key_groups)} key groups for {len(self)} values")
        self.key_token = key_token

    def slice(self, start: int, stop: int) -> "KeyedBatch":
        """Records ``[start, stop)`` with their keys and key groups."""
        groups = self.key_groups
        return KeyedBatch(self[start:stop], self.keys[start:stop], self.key_token,
                          None if groups is None else groups[start:stop])

    def __reduce__(self):
        # a list subclass with __slots__ does not pickle its slots by default; the cluster's
        # pickle fallback codec and copies must keep the keys
        return KeyedBatch, (list(self), self.keys, self.key_token, self.key_groups)
