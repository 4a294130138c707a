"""File formats for the file connectors (PyFlink's ``pyflink.datastream.formats``)."""
