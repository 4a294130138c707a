"""The public surface of rill.network: explicit exports, documented, Flink's layout."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import rill.network as network

MODULES = sorted(
    [m.name for m in pkgutil.walk_packages(network.__path__, "rill.network.")] + ["rill.network"]
)


def test_layout_follows_flinks_packages():
    for name in [
        "rill.network.buffer.buffer",
        "rill.network.buffer.buffer_pool",
        "rill.network.events",
        "rill.network.partition.result_partition",
        "rill.network.partition.pipelined_subpartition",
        "rill.network.partition.result_partition_manager",
        "rill.network.partition.consumer.single_input_gate",
        "rill.network.partition.consumer.local_input_channel",
        "rill.network.api.writer.record_writer",
        "rill.network.partitioner.key_group_stream_partitioner",
    ]:
        assert name in MODULES


def test_every_module_declares_all_and_exports_exist():
    for name in MODULES:
        module = importlib.import_module(name)
        assert module.__doc__, f"{name} has no module docstring"
        assert hasattr(module, "__all__"), f"{name} has no __all__"
        for export in module.__all__:
            assert hasattr(module, export), f"{name}.__all__ names missing {export}"


def test_top_level_reexports_the_public_names():
    assert sorted(network.__all__) == sorted(set(network.__all__))
    for export in network.__all__:
        if not export.isupper():  # constants are plain values
            assert getattr(network, export).__module__.startswith("rill.network"), export
    for expected in [
        "Buffer", "LocalBufferPool", "BufferPoolDestroyedError", "ResultPartition", "ResultPartitionID",
        "ResultPartitionType", "ResultPartitionManager", "ResultSubpartitionView", "InputChannel",
        "LocalInputChannel", "SingleInputGate", "BufferOrEvent", "RecordWriter", "StreamPartitioner",
        "KeyGroupStreamPartitioner", "PartitionNotFoundError", "EndOfPartitionEvent", "CheckpointBarrier",
    ]:
        assert expected in network.__all__


def test_every_public_class_function_and_method_is_documented():
    undocumented = []
    for name in MODULES:
        module = importlib.import_module(name)
        for export in module.__all__:
            obj = getattr(module, export)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            if not getattr(obj, "__module__", "").startswith("rill.network"):
                continue  # re-exported from elsewhere (Watermark)
            if not inspect.getdoc(obj):
                undocumented.append(f"{name}.{export}")
            if inspect.isclass(obj):
                for attr, value in vars(obj).items():
                    if attr.startswith("_") or not (callable(value) or isinstance(value, property)):
                        continue
                    if not inspect.getdoc(getattr(obj, attr)):
                        undocumented.append(f"{name}.{export}.{attr}")
    assert undocumented == []
