"""Connector interfaces below every layer that calls them (Flink's flink-core
``org.apache.flink.api.connector``)."""
