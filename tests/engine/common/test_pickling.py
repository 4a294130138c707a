"""rill.common.pickling: code pickled by value keeps its file name and line numbers (cloudpickle
alone names it ``<dynamic-code>``)."""

from __future__ import annotations

import pickle
import sys
import traceback

import cloudpickle
import pytest

from rill.common.pickling import dumps


def outer(x):
    def inner(y):
        raise ValueError(y)
    return inner(x + 1)


class Parser:
    def parse(self, line):
        return int(line)


@pytest.fixture(autouse=True)
def by_value():
    """This test module is importable, so cloudpickle would ship it by reference: force by value,
    as for a program file that the cluster cannot import."""
    module = sys.modules[__name__]
    cloudpickle.register_pickle_by_value(module)
    yield
    cloudpickle.unregister_pickle_by_value(module)


def test_cloudpickle_alone_loses_the_file_name():
    assert pickle.loads(cloudpickle.dumps(outer)).__code__.co_filename == "<dynamic-code>"


def test_functions_nested_code_and_methods_keep_file_and_lines():
    copy = pickle.loads(dumps(outer))
    assert copy is not outer and copy.__code__.co_filename == __file__
    with pytest.raises(ValueError) as info:
        copy(1)
    frames = traceback.extract_tb(info.value.__traceback__)[-2:]
    assert [(f.filename, f.name, f.lineno, f.line) for f in frames] == [
        (__file__, "outer", outer.__code__.co_firstlineno + 3, "return inner(x + 1)"),
        (__file__, "inner", outer.__code__.co_firstlineno + 2, "raise ValueError(y)"),
    ]
    method = pickle.loads(dumps(Parser)).parse
    assert method.__code__.co_filename == __file__ and method.__code__.co_firstlineno == Parser.parse.__code__.co_firstlineno
