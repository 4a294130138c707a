"""File and message formats (PyFlink's ``pyflink.datastream.formats``): ``csv``, ``json``,
``avro`` and ``orc``; each is its own module (``from rill.datastream.formats.csv import
CsvSchema``), imported only when used, as their libraries are."""
