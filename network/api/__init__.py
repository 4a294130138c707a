"""The network API used by tasks (Flink's ``org.apache.flink.runtime.io.network.api``)."""

__all__: list[str] = []
