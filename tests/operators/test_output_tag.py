"""OutputTag: PyFlink's constructor checks, equality by id, pickling."""

import cloudpickle
import pytest

from rill.operators.output_tag import OutputTag


def test_equality_and_hash_by_id_only():
    a, b = OutputTag("late", "INT"), OutputTag("late")
    assert a == b and hash(a) == hash(b)
    assert OutputTag("late") != OutputTag("early")
    assert OutputTag("x") != "x"
    assert {a: 1}[b] == 1
    assert a.get_id() == "late" and a.tag_id == "late" and a.type_info == "INT" and a.get_type_info() == "INT"


@pytest.mark.parametrize("bad", ["", None])
def test_empty_id_raises(bad):
    with pytest.raises(ValueError, match="OutputTag tag_id cannot be None or empty string"):
        OutputTag(bad)


def test_non_str_id_raises():
    with pytest.raises(TypeError, match="must be a str"):
        OutputTag(5)


def test_survives_cloudpickle_and_repr():
    tag = OutputTag("side", "STR")
    copy = cloudpickle.loads(cloudpickle.dumps(tag))
    assert copy == tag and copy.type_info == "STR"
    assert repr(OutputTag("s")) == "OutputTag('s')"
