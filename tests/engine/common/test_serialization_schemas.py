"""``rill.common.serialization``: the simple schemas, RowFieldExtractorSchema and the encoder
(Flink's ``api.common.serialization``); all of them survive being shipped (cloudpickle)."""

import cloudpickle
import pytest

from rill.common import ByteArraySchema, DeserializationSchema, Row, SerializationSchema, SimpleStringSchema, Types
from rill.common.serialization import RowFieldExtractorSchema


def test_simple_string_schema_round_trips_in_its_charset():
    s = SimpleStringSchema()
    assert s.serialize("héllo") == "héllo".encode("utf-8")
    assert s.deserialize(b"h\xc3\xa9llo") == "héllo"
    latin = SimpleStringSchema("ISO-8859-1")
    assert latin.serialize("é") == b"\xe9"
    assert latin.deserialize_batch([b"\xe9", b"a"]) == ["é", "a"]
    assert s.get_produced_type() == Types.STRING()
    assert not s.is_end_of_stream("x")
    with pytest.raises(LookupError):
        SimpleStringSchema("no-such-charset")


def test_byte_array_schema_passes_bytes_through():
    s = ByteArraySchema()
    assert isinstance(s, SerializationSchema) and isinstance(s, DeserializationSchema)
    assert s.serialize(bytearray(b"\x00\x01")) == b"\x00\x01"
    assert s.deserialize(b"ab") == b"ab"
    assert s.serialize_batch([b"a", b"b"]) == [b"a", b"b"]
    with pytest.raises(TypeError, match="ByteArraySchema: can only serialize bytes, got str 'x'"):
        s.serialize("x")


def test_row_field_extractor_schema_follows_flink():
    s = RowFieldExtractorSchema(1)
    assert s.serialize(Row(b"k", b"v")) == b"v"
    assert s.serialize(None) == b""
    assert s.serialize(Row(b"k", None)) == b""
    with pytest.raises(ValueError, match="cannot access field 1 in Row with arity 1"):
        s.serialize(Row(b"k"))
    with pytest.raises(TypeError, match="field at index 1 must be of type bytes, but was str"):
        s.serialize(Row(b"k", "v"))
    with pytest.raises(ValueError, match="field index must be non-negative, got: -1"):
        RowFieldExtractorSchema(-1)
    assert RowFieldExtractorSchema(1) == s and hash(s) == 1


def test_schemas_survive_shipping():
    for schema in [SimpleStringSchema("UTF-16"), ByteArraySchema(), RowFieldExtractorSchema(0)]:
        copy = cloudpickle.loads(cloudpickle.dumps(schema))
        assert type(copy) is type(schema) and copy.__dict__ == schema.__dict__
