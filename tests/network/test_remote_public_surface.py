"""The public surface of the remote data plane: Flink's layout, re-exported names, and the
InputChannel interface implemented (so a SingleInputGate needs nothing else)."""

from __future__ import annotations

import importlib
import inspect

import rill.network as network
from rill.network import InputChannel, RemoteInputChannel


def test_modules_follow_flinks_layout():
    for name in [
        "rill.network.api.serialization.record_serializer",
        "rill.network.api.serialization.event_serializer",
        "rill.network.api.serialization.value_codec",
        "rill.network.api.serialization.compression",
        "rill.network.credit",
        "rill.network.partition.consumer.remote_input_channel",
        "rill.network.partition.consumer.buffer_manager",
        "rill.network.netty.connection_manager",
        "rill.network.netty.client",
        "rill.network.netty.server",
        "rill.network.netty.view_reader",
        "rill.network.netty.messages",
        "rill.network.netty.io_thread",
    ]:
        module = importlib.import_module(name)
        assert module.__doc__ and module.__all__, name


def test_the_remote_names_are_re_exported():
    for expected in [
        "RemoteInputChannel", "FloatingBufferPool", "NettyConnectionManager", "NettyConfig", "CreditLedger",
        "SpanningRecordSerializer", "AdaptiveSpanningRecordDeserializer", "EventSerializer",
        "RemoteTransportError", "ConnectionStatistics", "SubpartitionReaderStatistics",
        "RemoteInputChannelStatistics", "FloatingBufferPoolStatistics", "PayloadTooLargeError",
    ]:
        assert expected in network.__all__ and getattr(network, expected).__module__.startswith("rill.network")


def test_remote_input_channel_implements_every_abstract_method_of_input_channel():
    abstract = {name for name, value in vars(InputChannel).items() if getattr(value, "__isabstractmethod__", False)}
    assert abstract == {"request_subpartition", "get_next_buffer", "release", "is_released"}
    assert not inspect.isabstract(RemoteInputChannel)
    assert issubclass(RemoteInputChannel, InputChannel)


def test_the_secret_is_never_printed():
    config = network.NettyConfig(secret=b"s" * 32)
    assert "sss" not in repr(config)
