"""PyFlink's ``pyflink.common.config_options``: ``ConfigOption`` and ``ConfigOptions``, defined
in :mod:`rill.common.configuration`."""

from rill.common.configuration import ConfigOption, ConfigOptions

__all__ = ["ConfigOption", "ConfigOptions"]
