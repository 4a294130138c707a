"""``NetworkOptions``: a job's network buffer settings, parsed and checked once from its
``Configuration`` and carried by reference in every task's deployment descriptor (where they
used to be copied field by field and read again).

The keys are those of :class:`~rill.common.configuration.ConfigOptions`
(``execution.buffer-timeout``, ``taskmanager.network.records-per-buffer``,
``taskmanager.network.memory.buffers-per-channel``,
``taskmanager.network.memory.floating-buffers-per-gate``); Flink reads the same settings into
its ``NettyShuffleEnvironmentConfiguration``.
"""

from __future__ import annotations

from dataclasses import dataclass

from rill.common.configuration import ConfigOption, ConfigOptions, Configuration
from rill.common.option_parsing import get_int

__all__ = ["NetworkOptions"]


def _at_least(option: ConfigOption, value: int, minimum: int, rule: str) -> int:
    if value < minimum:
        raise ValueError(f"Invalid value {value!r} for '{option.key}': {rule}")
    return value


@dataclass(frozen=True)
class NetworkOptions:
    """A job's network buffer settings (frozen; build with :meth:`from_configuration`).

    :ivar buffer_timeout_ms: the job's default output flush interval in ms (0: after every
        record, -1: only when full); an operator's own ``set_buffer_timeout`` wins over it, so
        a task reads its resolved value from ``TaskDeploymentDescriptor.buffer_timeout_ms``.
    :ivar records_per_buffer: records per local network buffer (a batch), at least 1.
    :ivar buffers_per_channel: exclusive buffers (credits) per remote input channel, at least 0.
    :ivar floating_buffers_per_gate: floating buffers per input gate, at least 0.
    """

    buffer_timeout_ms: int = ConfigOptions.BUFFER_TIMEOUT.default
    records_per_buffer: int = ConfigOptions.RECORDS_PER_BUFFER.default
    buffers_per_channel: int = ConfigOptions.BUFFERS_PER_CHANNEL.default
    floating_buffers_per_gate: int = ConfigOptions.FLOATING_BUFFERS_PER_GATE.default

    @staticmethod
    def from_configuration(conf: Configuration) -> "NetworkOptions":
        """:raises ValueError: naming the key and the value, for a value that is not an integer
        or breaks its rule (buffer timeout below -1, records per buffer below 1, buffers per
        channel or floating buffers per gate below 0)."""
        o = ConfigOptions
        return NetworkOptions(
            buffer_timeout_ms=_at_least(o.BUFFER_TIMEOUT, get_int(conf, o.BUFFER_TIMEOUT), -1,
                                        "must be -1 (flush when full), 0 (after every record) or a positive "
                                        "number of ms"),
            records_per_buffer=_at_least(o.RECORDS_PER_BUFFER, get_int(conf, o.RECORDS_PER_BUFFER), 1,
                                         "a buffer holds at least one record"),
            buffers_per_channel=_at_least(o.BUFFERS_PER_CHANNEL, get_int(conf, o.BUFFERS_PER_CHANNEL), 0,
                                          "must not be negative"),
            floating_buffers_per_gate=_at_least(o.FLOATING_BUFFERS_PER_GATE,
                                                get_int(conf, o.FLOATING_BUFFERS_PER_GATE), 0,
                                                "must not be negative"),
        )
