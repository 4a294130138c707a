"""``KeyedBatch``: a batch of records that carries the keys its HASH exchange computed, so the
keyed operator behind the exchange does not call the key selector a second time (issue 16).

Flink computes a record's key twice: ``KeyGroupStreamPartitioner.selectChannel`` to route it and
the keyed operator's ``setKeyContextElement`` to scope its state. In Python each computation is
a call per record; here the partitioner's keys travel with the records *inside a process*: the
:class:`~rill.network.api.writer.RecordWriter` of a HASH exchange hands the consumer a
``KeyedBatch`` (a ``list`` of the values, so every consumer that expects a list still works)
whose ``keys`` attribute is the parallel list of keys. Across processes the batch is serialized
as a plain list: the keys are not sent (they would cost bytes and decoding to save one key
selector call per record), and the consumer computes them again.

``key_token`` says which exchange made the keys: ``key_by`` gives its partitioner and the keyed
operators built on that ``KeyedStream`` the same token, and an operator uses ``keys`` only when
the token is its own, so keys are never taken from another key selector's exchange.
"""

from __future__ import annotations

from typing import Any, Hashable, List

__all__ = ["KeyedBatch"]


class KeyedBatch(list):
    """A ``list`` of record values with ``keys`` (one key per value, same order) and the
    ``key_token`` of the exchange that computed them.

    :param values: the records (copied into the batch, as ``list(values)``).
    :param keys: one key per record; the batch keeps this list object.
    :param key_token: the token of the ``key_by`` that computed ``keys`` (hashable, compared
        with ``==``).
    :raises ValueError: if ``keys`` and ``values`` differ in length.

    Slicing returns a plain ``list`` (without keys): use :meth:`slice` to keep them.
    """

    __slots__ = ("keys", "key_token")

    def __init__(self, values: Any = (), keys: List[Any] = None, key_token: Hashable = None) -> None:
        super().__init__(values)
        self.keys = [] if keys is None else keys
        if len(self.keys) != len(self):
            raise ValueError(f"KeyedBatch got {len(self.keys)} keys for {len(self)} values")
        self.key_token = key_token

    def slice(self, start: int, stop: int) -> "KeyedBatch":
        """Records ``[start, stop)`` with their keys."""
        return KeyedBatch(self[start:stop], self.keys[start:stop], self.key_token)

    def __reduce__(self):
        # a list subclass with __slots__ does not pickle its slots by default; the cluster's
        # pickle fallback codec and copies must keep the keys
        return KeyedBatch, (list(self), self.keys, self.key_token)
