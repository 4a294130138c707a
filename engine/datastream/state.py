"""State descriptors and state interfaces (PyFlink's ``pyflink.datastream.state``)."""

from rill.state import *  # noqa: F401,F403
from rill.state import __all__  # noqa: F401
