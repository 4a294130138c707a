"""File and message formats for the file connectors (PyFlink's ``pyflink.datastream.formats``):
``csv``, ``json``, ``avro``, ``orc`` and ``parquet``; each is its own module (``from
rill.datastream.formats.csv import CsvSchema``), imported only when used, as their libraries
are."""
