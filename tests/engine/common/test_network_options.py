"""``NetworkOptions``: the job's network buffer settings, parsed once, and what a task gets."""

from __future__ import annotations

import pickle

import pytest

from rill.common.configuration import Configuration
from rill.common.network_options import NetworkOptions


def test_defaults_are_the_options_defaults():
    assert NetworkOptions.from_configuration(Configuration()) == NetworkOptions(
        buffer_timeout_ms=100, records_per_buffer=1024, buffers_per_channel=2, floating_buffers_per_gate=8)
    assert NetworkOptions() == NetworkOptions.from_configuration(Configuration())


def test_values_from_the_configuration_as_strings_or_ints():
    conf = Configuration().set_string("execution.buffer-timeout", "-1")
    conf.set_string("taskmanager.network.records-per-buffer", "64")
    conf.set_integer("taskmanager.network.memory.buffers-per-channel", 0)
    conf.set_string("taskmanager.network.memory.floating-buffers-per-gate", "3")
    options = NetworkOptions.from_configuration(conf)
    assert options == NetworkOptions(buffer_timeout_ms=-1, records_per_buffer=64, buffers_per_channel=0,
                                     floating_buffers_per_gate=3)
    assert pickle.loads(pickle.dumps(options)) == options  # crosses to cluster tasks in the descriptor
    with pytest.raises(AttributeError):
        options.records_per_buffer = 1  # frozen: one shared object per job


@pytest.mark.parametrize("key,value,message", [
    ("execution.buffer-timeout", "-2", "Invalid value -2 for 'execution.buffer-timeout': must be -1 (flush when "
                                       "full), 0 (after every record) or a positive number of ms"),
    ("taskmanager.network.records-per-buffer", "0",
     "Invalid value 0 for 'taskmanager.network.records-per-buffer': a buffer holds at least one record"),
    ("taskmanager.network.memory.buffers-per-channel", "-1",
     "Invalid value -1 for 'taskmanager.network.memory.buffers-per-channel': must not be negative"),
    ("taskmanager.network.memory.floating-buffers-per-gate", "-3",
     "Invalid value -3 for 'taskmanager.network.memory.floating-buffers-per-gate': must not be negative"),
    ("taskmanager.network.records-per-buffer", "lots",
     "Invalid value 'lots' for 'taskmanager.network.records-per-buffer': expected an integer"),
])
def test_errors_name_key_value_and_rule(key, value, message):
    with pytest.raises(ValueError) as e:
        NetworkOptions.from_configuration(Configuration().set_string(key, value))
    assert str(e.value) == message
