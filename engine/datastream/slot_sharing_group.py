"""PyFlink's ``pyflink.datastream.slot_sharing_group``: ``SlotSharingGroup`` (with its
``ResourceSpec``) and ``MemorySize``, defined in :mod:`rill.common.slot_sharing_group` and
:mod:`rill.common.memory_size`."""

from rill.common.memory_size import MemorySize
from rill.common.slot_sharing_group import ResourceSpec, SlotSharingGroup

__all__ = ["MemorySize", "SlotSharingGroup", "ResourceSpec"]
