"""StreamGraphHasherV2 / StreamGraphUserHashHasher (rill.graph.hashing)."""

from __future__ import annotations

import struct

import mmh3
import pytest

from _builders import Builder
from rill.graph.hashing import StreamGraphHasherV2, StreamGraphUserHashHasher, generate_node_hashes, murmur3_128


def test_murmur3_128_matches_guava_known_values():
    # Guava Murmur3Hash128Test.testKnownValues: assertHash(0, 0x629942693e10f867L,
    # 0x92db0b82baeb5347L, "hell"); asBytes() = h1 then h2, each little-endian.
    expected = struct.pack("<QQ", 0x629942693E10F867, 0x92DB0B82BAEB5347)
    assert murmur3_128(b"hell") == expected
    # Hashing.murmur3_128(0).newHasher().putInt(0).hash() as Flink's hasher computes it for a
    # lone source (also the id real Flink gave such a source in flink_golden.json)
    assert murmur3_128(struct.pack("<i", 0)).hex() == "bc764cd8ddf7a0cff126f51c16239658"


def test_two_node_chain_hash_computed_step_by_step():
    b = Builder()
    src = b.source(parallelism=1)
    m = b.sink(src, parallelism=1)
    hashes = generate_node_hashes(b.stream_graph())

    # source: first node (0 hashes so far) with one chainable out edge -> putInt(0) twice
    h_src = mmh3.hash_bytes(struct.pack("<i", 0) + struct.pack("<i", 0), 0, x64arch=True)
    # sink: 1 hash so far, no chainable out edge -> putInt(1); then combine with its input
    local = mmh3.hash_bytes(struct.pack("<i", 1), 0, x64arch=True)
    h_sink = bytes(((local[j] * 37) ^ h_src[j]) & 0xFF for j in range(16))
    # the same with Java's signed bytes: (byte)(hash[j] * 37 ^ otherHash[j])
    def java_byte(x):
        return (x + 128) % 256 - 128
    signed = [java_byte(java_byte(local[j]) * 37 ^ java_byte(h_src[j])) for j in range(16)]
    assert bytes(x & 0xFF for x in signed) == h_sink

    assert hashes[src.id] == h_src
    assert hashes[m.id] == h_sink


def test_hashes_do_not_depend_on_ids_or_names_but_on_topology():
    def build(offset, names):
        b = Builder()
        b.skip_id(offset)
        b.sink(b.one(names[1], b.source(names[0])), names[2])
        sg = b.stream_graph()
        return [generate_node_hashes(sg)[n.id] for n in sg.get_stream_nodes()]

    assert build(0, ["A", "B", "C"]) == build(100, ["X", "Y", "Z"])


def test_uid_changes_only_that_node_and_downstream():
    def build(uid=None):
        b = Builder()
        src = b.source()
        m = b.one("Map", src)
        if uid:
            m.set_uid(uid)
        f = b.one("Filter", m)
        s = b.sink(f)
        other = b.sink(src, name="Other")  # a branch not downstream of the map
        sg = b.stream_graph()
        h = generate_node_hashes(sg)
        return {k: h[t.id] for k, t in dict(src=src, map=m, filter=f, sink=s, other=other).items()}

    plain, with_uid = build(), build("my-map")
    assert with_uid["map"] == murmur3_128("my-map".encode("utf-8"))
    assert with_uid["src"] == plain["src"]
    assert with_uid["other"] == plain["other"]
    for downstream in ("map", "filter", "sink"):
        assert with_uid[downstream] != plain[downstream]


def test_uid_is_hashed_as_utf8():
    b = Builder()
    m = b.one("Map", b.source())
    m.set_uid("ključ-映射")
    b.sink(m)
    assert generate_node_hashes(b.stream_graph())[m.id] == mmh3.hash_bytes("ključ-映射".encode("utf-8"), 0, x64arch=True)


def test_duplicate_uid_raises_flinks_error():
    b = Builder()
    src = b.source()
    m1 = b.one("Map", src)
    m2 = b.one("Map", src)
    m1.set_uid("same")
    m2.set_uid("same")
    b.sink(m1)
    b.sink(m2)
    with pytest.raises(ValueError) as e:
        generate_node_hashes(b.stream_graph())
    assert str(e.value) == (
        'Hash collision on user-specified ID "same". Most likely cause is a non-unique ID. '
        "Please check that all IDs specified via `uid(String)` are unique."
    )


def test_node_with_two_inputs_is_requeued_until_both_are_hashed():
    # s1 -> a -> b -> union-target, s2 -> union-target: the target is reached from s2 first
    b = Builder()
    s1, s2 = b.source("s1"), b.source("s2")
    chain = b.one("B", b.one("A", s1))
    target = b.one("T", b.union(chain, s2))
    b.sink(target)
    sg = b.stream_graph()
    h = generate_node_hashes(sg)
    assert len(h) == len(sg.nodes)
    # T's node-local hash uses the count at the time it was finally hashed: s1, s2, A, B done
    local = murmur3_128(struct.pack("<ii", 4, 4))  # one chainable out edge (to the sink)
    expected = bytearray(local)
    for inp in (chain.id, s2.id):  # in-edge order
        expected = bytearray(((expected[j] * 37) ^ h[inp][j]) & 0xFF for j in range(16))
    assert h[target.id] == bytes(expected)


def test_chaining_disabled_changes_hashes_of_nodes_with_chainable_outputs():
    def hashes(chaining):
        b = Builder()
        src = b.source()
        m = b.one("Map", src)
        b.sink(m)
        sg = b.stream_graph(chaining=chaining)
        return generate_node_hashes(sg)[src.id], generate_node_hashes(sg)[m.id]

    assert hashes(True)[0] == murmur3_128(struct.pack("<ii", 0, 0))
    assert hashes(False)[0] == murmur3_128(struct.pack("<i", 0))


def test_user_hash_hasher_reads_set_uid_hash():
    b = Builder()
    m = b.one("Map", b.source())
    m.set_uid_hash("00112233445566778899AABBCCDDEEFF")
    b.sink(m)
    sg = b.stream_graph()
    assert StreamGraphUserHashHasher().traverse_stream_graph_and_generate_hashes(sg) == {
        m.id: bytes.fromhex("00112233445566778899aabbccddeeff")
    }
    # the generated hash is unaffected by a user hash
    assert StreamGraphHasherV2().traverse_stream_graph_and_generate_hashes(sg)[m.id] == \
        generate_node_hashes(_same_without_user_hash())[2]


def _same_without_user_hash():
    b = Builder()
    b.sink(b.one("Map", b.source()))
    return b.stream_graph()


def test_user_hash_hasher_rejects_a_bad_hash_set_on_the_node():
    b = Builder()
    m = b.one("Map", b.source())
    b.sink(m)
    sg = b.stream_graph()
    sg.get_stream_node(m.id).user_hash = "xyz"
    with pytest.raises(ValueError, match="Map.*32 hexadecimal"):
        StreamGraphUserHashHasher().traverse_stream_graph_and_generate_hashes(sg)
