"""Deterministic operator hashes: the ids that tie state to operators across job versions.

Follows Flink's ``StreamGraphHasherV2`` byte for byte (the tests check it against hashes that
real Flink 2.3 produced) and ``StreamGraphUserHashHasher``.

Hash function: Guava's ``Hashing.murmur3_128(0)``. ``mmh3.hash_bytes(data, 0, x64arch=True)``
returns the same 16 bytes in the same order as Guava's ``HashCode.asBytes()``;
``Hasher.putInt(i)`` feeds the 4 little-endian bytes of ``i``; ``putString(s, UTF_8)`` feeds
the UTF-8 bytes of ``s``. A Guava ``Hasher`` hashes the concatenation of everything put into
it, so a hasher here is simply a ``bytearray``.

Algorithm (per node, breadth-first from the sources sorted by id; a node whose inputs are not
all hashed yet is dropped from ``visited`` and re-queued when reached again):

* with a ``uid``: ``murmur3_128(utf8(uid))``; a hash equal to one already assigned raises;
* otherwise: ``murmur3_128(putInt(n) + putInt(n) per chainable out edge)`` with ``n`` the
  number of hashes assigned so far, then for each input edge in order
  ``hash[j] = (byte)(hash[j] * 37 ^ input_hash[j])``.

The traversal order, ``n`` and the chainable-edge count are the only things that matter, so a
hash changes when the topology or chaining around a node changes, never with node ids or
names.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Dict, Optional

import mmh3

from rill.graph.stream_graph import StreamGraph, StreamNode, is_chainable

__all__ = [
    "murmur3_128",
    "StreamGraphHasherV2",
    "StreamGraphUserHashHasher",
    "generate_node_hashes",
]

_INT = struct.Struct("<i")


def murmur3_128(data: bytes) -> bytes:
    """Guava ``Hashing.murmur3_128(0).hashBytes(data).asBytes()``."""
    return mmh3.hash_bytes(bytes(data), 0, x64arch=True)


def _combine(hash_bytes: bytearray, other: bytes) -> None:
    """Flink's ``hash[j] = (byte) (hash[j] * 37 ^ otherHash[j])`` on signed Java bytes; the low
    8 bits of the product do not depend on signedness, so unsigned arithmetic gives the same
    bytes."""
    for j in range(len(hash_bytes)):
        hash_bytes[j] = ((hash_bytes[j] * 37) ^ other[j]) & 0xFF


class StreamGraphHasherV2:
    """Flink's ``StreamGraphHasherV2``."""

    def traverse_stream_graph_and_generate_hashes(self, graph: StreamGraph) -> Dict[int, bytes]:
        """Hash every node reachable from the sources.

        :returns: node id → 16-byte hash.
        :raises ValueError: on a duplicate ``uid`` (Flink's ``IllegalArgumentException``:
            ``Hash collision on user-specified ID "x". …``).
        """
        hashes: Dict[int, bytes] = {}
        visited = set()
        remaining: deque[StreamNode] = deque()
        for source_id in graph.get_source_ids():
            remaining.append(graph.get_stream_node(source_id))
            visited.add(source_id)
        while remaining:
            node = remaining.popleft()
            if self._generate_node_hash(node, hashes, graph):
                for out_edge in node.out_edges:
                    child = graph.get_target_vertex(out_edge)
                    if child.id not in visited:
                        remaining.append(child)
                        visited.add(child.id)
            else:
                visited.discard(node.id)  # revisited when another input reaches it
        return hashes

    def _generate_node_hash(self, node: StreamNode, hashes: Dict[int, bytes], graph: StreamGraph) -> bool:
        uid = node.transformation_uid
        if uid is None:
            if any(e.source_id not in hashes for e in node.in_edges):
                return False
            digest = self._generate_deterministic_hash(node, hashes, graph)
        else:
            digest = murmur3_128(uid.encode("utf-8"))
            if digest in hashes.values():
                raise ValueError(
                    f'Hash collision on user-specified ID "{uid}". Most likely cause is a '
                    "non-unique ID. Please check that all IDs specified via `uid(String)` are "
                    "unique."
                )
        if node.id in hashes:
            raise RuntimeError(
                "Unexpected state. Tried to add node hash twice. This is probably a bug in the "
                "JobGraph generator."
            )
        hashes[node.id] = digest
        return True

    @staticmethod
    def _generate_deterministic_hash(node: StreamNode, hashes: Dict[int, bytes], graph: StreamGraph) -> bytes:
        hasher = bytearray(_INT.pack(len(hashes)))
        for out_edge in node.out_edges:
            if graph.chaining_enabled and is_chainable(out_edge, graph):
                hasher += _INT.pack(len(hashes))
        digest = bytearray(murmur3_128(hasher))
        for in_edge in node.in_edges:
            other = hashes.get(in_edge.source_id)
            if other is None:  # pragma: no cover - guarded by _generate_node_hash
                raise RuntimeError(f"Missing hash for input node {in_edge.source_id}. Cannot generate hash for {node}.")
            _combine(digest, other)
        return bytes(digest)


class StreamGraphUserHashHasher:
    """Flink's ``StreamGraphUserHashHasher``: the legacy hasher that yields the hashes users
    pin with ``set_uid_hash`` (32 hex characters, taken as the 16 bytes they spell)."""

    def traverse_stream_graph_and_generate_hashes(self, graph: StreamGraph) -> Dict[int, Optional[bytes]]:
        """:returns: node id → user hash bytes, for the nodes that have one.
        :raises ValueError: when a user hash is not 32 hex characters."""
        out: Dict[int, Optional[bytes]] = {}
        for node in graph.get_stream_nodes():
            if node.user_hash is not None:
                try:
                    raw = bytes.fromhex(node.user_hash)
                except ValueError:
                    raw = b""
                if len(raw) != 16:
                    raise ValueError(
                        f"The user hash of operator '{node.operator_name}' must be 32 hexadecimal "
                        f"characters, got {node.user_hash!r}"
                    )
                out[node.id] = raw
        return out


def generate_node_hashes(graph: StreamGraph) -> Dict[int, bytes]:
    """Shortcut for ``StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes``."""
    return StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes(graph)
