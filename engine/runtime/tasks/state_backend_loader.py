"""Which keyed state backend a task builds (Flink's ``StateBackendLoader``): the job's
``state.backend.type`` picks the heap backend ('hashmap') or the RocksDB backend ('rocksdb',
:class:`~rill.state.rocksdb.RocksDBKeyedStateBackend`, configured by the job's
``state.backend.rocksdb.*`` keys).

The RocksDB backend needs the optional ``rocksdict`` package; without it, a job that chooses
'rocksdb' fails when its first keyed task starts, naming the package and the extra.
"""

from __future__ import annotations

from typing import Mapping, Optional

from rill.common.configuration import Configuration
from rill.common.state_backend_options import validate_state_backend
from rill.operators.state_initializer import KeyedStateBackendFactory
from rill.state.heap import HeapKeyedStateBackend
from rill.state.key_groups import KeyGroupRange
from rill.state.rocksdb_options import RocksDBSettings

try:  # an optional dependency: only jobs choosing 'rocksdb' need it
    from rill.state.rocksdb import RocksDBKeyedStateBackend
    _ROCKSDB_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as _error:  # pragma: no cover - the test extra installs rocksdict
    _ROCKSDB_IMPORT_ERROR = _error

__all__ = ["load_keyed_state_backend_factory"]


def load_keyed_state_backend_factory(settings: Mapping[str, str]) -> KeyedStateBackendFactory:
    """The ``(key_group_range, max_parallelism) -> KeyedStateBackend`` factory of the job's
    ``state.backend.*`` keys ``settings``.

    :raises NotImplementedError/ValueError: as
        :func:`~rill.common.state_backend_options.validate_state_backend`, and for bad
        ``state.backend.rocksdb.*`` values (:meth:`RocksDBSettings.from_dict`).
    :raises ImportError: for 'rocksdb' without the ``rocksdict`` package.
    """
    if validate_state_backend(Configuration.from_dict(dict(settings))) != "rocksdb":
        return HeapKeyedStateBackend
    rocksdb_settings = RocksDBSettings.from_dict(settings)
    if _ROCKSDB_IMPORT_ERROR is not None:
        raise ImportError("'state.backend.type: rocksdb' needs the rocksdict package "
                          "(pip install 'rill[rocksdb]')") from _ROCKSDB_IMPORT_ERROR

    def factory(key_group_range: KeyGroupRange, max_parallelism: int) -> RocksDBKeyedStateBackend:
        return RocksDBKeyedStateBackend(key_group_range, max_parallelism, rocksdb_settings)
    return factory
