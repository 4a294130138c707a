"""InternalTimerService / InternalTimeServiceManager against a real HeapKeyedStateBackend and
TestProcessingTimeService: ordering, dedup, deletion, key context, physical registrations, key
groups."""

import pytest

from rill.operators.timer_service import InternalTimer, InternalTimeServiceManager, Triggerable
from rill.common.streamrecord import MIN_TIMESTAMP
from rill.operators.processing_time_service import TestProcessingTimeService
from rill.state import (
    VOID_NAMESPACE,
    HeapKeyedStateBackend,
    KeyGroupRange,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)


class Recorder(Triggerable):
    def __init__(self, backend):
        self.backend = backend
        self.fired = []
        self.on_fire = None

    def on_event_time(self, timer):
        self.fired.append(("event", timer.timestamp, timer.key, timer.namespace, self.backend.get_current_key()))
        if self.on_fire:
            self.on_fire(timer)

    def on_processing_time(self, timer):
        self.fired.append(("proc", timer.timestamp, timer.key, timer.namespace, self.backend.get_current_key()))
        if self.on_fire:
            self.on_fire(timer)


@pytest.fixture
def env():
    kgr = KeyGroupRange(0, 127)
    backend = HeapKeyedStateBackend(kgr, 128)
    pts = TestProcessingTimeService()
    manager = InternalTimeServiceManager(kgr, backend, pts)
    rec = Recorder(backend)
    service = manager.get_internal_timer_service("user-timers", rec)
    return backend, pts, manager, service, rec


def reg_event(backend, service, key, ts, ns=VOID_NAMESPACE):
    backend.set_current_key(key)
    service.register_event_time_timer(ns, ts)


def reg_proc(backend, service, key, ts, ns=VOID_NAMESPACE):
    backend.set_current_key(key)
    service.register_processing_time_timer(ns, ts)


def test_event_timers_fire_in_timestamp_order_with_their_key_set(env):
    backend, _, manager, service, rec = env
    for key, ts in [("a", 30), ("b", 10), ("c", 20), ("a", 10), ("b", 10)]:  # (b, 10) twice
        reg_event(backend, service, key, ts)
    assert service.num_event_time_timers() == 4
    assert service.current_watermark() == MIN_TIMESTAMP
    manager.advance_watermark(9)
    assert rec.fired == []
    manager.advance_watermark(20)
    assert rec.fired == [
        ("event", 10, "b", VOID_NAMESPACE, "b"),
        ("event", 10, "a", VOID_NAMESPACE, "a"),
        ("event", 20, "c", VOID_NAMESPACE, "c"),
    ]
    assert service.current_watermark() == 20
    manager.advance_watermark(1000)
    assert rec.fired[-1] == ("event", 30, "a", VOID_NAMESPACE, "a")
    assert service.num_event_time_timers() == 0


def test_namespaces_are_separate_timers(env):
    backend, _, manager, service, rec = env
    reg_event(backend, service, "k", 5, ns="w1")
    reg_event(backend, service, "k", 5, ns="w2")
    reg_event(backend, service, "k", 5, ns="w1")
    assert service.num_event_time_timers() == 2
    manager.advance_watermark(5)
    assert [(f[1], f[3]) for f in rec.fired] == [(5, "w1"), (5, "w2")]


def test_delete_and_reregister_fires_once(env):
    backend, _, manager, service, rec = env
    reg_event(backend, service, "a", 5)
    backend.set_current_key("a")
    service.delete_event_time_timer(VOID_NAMESPACE, 5)
    service.delete_event_time_timer(VOID_NAMESPACE, 6)  # absent
    assert service.num_event_time_timers() == 0
    reg_event(backend, service, "a", 5)
    manager.advance_watermark(10)
    assert [f[:3] for f in rec.fired] == [("event", 5, "a")]


def test_many_deletions_compact_the_heap(env):
    backend, _, manager, service, rec = env
    for i in range(500):
        reg_event(backend, service, f"k{i}", i)
    for i in range(0, 500, 2):
        backend.set_current_key(f"k{i}")
        service.delete_event_time_timer(VOID_NAMESPACE, i)
    assert service.num_event_time_timers() == 250
    manager.advance_watermark(10_000)
    assert [f[1] for f in rec.fired] == list(range(1, 500, 2))


def test_timers_registered_while_firing_fire_in_the_same_advance_if_due(env):
    backend, _, manager, service, rec = env

    def again(timer):
        if timer.timestamp < 3:
            service.register_event_time_timer(VOID_NAMESPACE, timer.timestamp + 1)

    rec.on_fire = again
    reg_event(backend, service, "x", 1)
    manager.advance_watermark(10)
    assert [f[1] for f in rec.fired] == [1, 2, 3]


def test_processing_timers_one_physical_registration(env):
    backend, pts, _, service, rec = env
    reg_proc(backend, service, "a", 100)
    reg_proc(backend, service, "b", 100)
    reg_proc(backend, service, "c", 200)
    assert pts.get_active_timer_timestamps() == [100]
    reg_proc(backend, service, "d", 50)  # earlier: replaces the registration
    assert pts.get_active_timer_timestamps() == [50]
    pts.set_current_time(60)
    assert rec.fired == [("proc", 50, "d", VOID_NAMESPACE, "d")]
    assert pts.get_active_timer_timestamps() == [100]
    pts.set_current_time(250)
    assert [f[1:3] for f in rec.fired[1:]] == [(100, "a"), (100, "b"), (200, "c")]
    assert pts.get_active_timer_timestamps() == []
    assert service.num_processing_time_timers() == 0


def test_processing_timer_deletion_leaves_registration_that_then_does_nothing(env):
    backend, pts, _, service, rec = env
    reg_proc(backend, service, "a", 10)
    backend.set_current_key("a")
    service.delete_processing_time_timer(VOID_NAMESPACE, 10)
    assert pts.get_active_timer_timestamps() == [10]
    pts.set_current_time(20)
    assert rec.fired == []


def test_processing_timer_already_due_fires_at_registration_with_test_service(env):
    backend, pts, _, service, rec = env
    pts.set_current_time(100)
    reg_proc(backend, service, "late", 50)
    assert rec.fired == [("proc", 50, "late", VOID_NAMESPACE, "late")]
    reg_proc(backend, service, "next", 150)
    assert pts.get_active_timer_timestamps() == [150]
    pts.set_current_time(150)
    assert rec.fired[-1][1:3] == (150, "next")


def test_processing_timer_registered_from_callback(env):
    backend, pts, _, service, rec = env

    def again(timer):
        if timer.timestamp < 30:
            service.register_processing_time_timer(VOID_NAMESPACE, timer.timestamp + 10)

    rec.on_fire = again
    reg_proc(backend, service, "x", 10)
    pts.set_current_time(100)
    assert [f[1] for f in rec.fired] == [10, 20, 30]


def test_registration_needs_a_current_key():
    kgr = KeyGroupRange(0, 127)
    backend = HeapKeyedStateBackend(kgr, 128)
    service = InternalTimeServiceManager(kgr, backend, TestProcessingTimeService()).get_internal_timer_service(
        "t", Recorder(backend))
    with pytest.raises(RuntimeError, match="No key set"):
        service.register_event_time_timer(VOID_NAMESPACE, 1)


def test_timers_are_organized_by_key_group_and_restorable():
    kgr = compute_key_group_range_for_operator_index(128, 2, 1)
    backend = HeapKeyedStateBackend(kgr, 128)
    pts = TestProcessingTimeService()
    rec = Recorder(backend)
    service = InternalTimeServiceManager(kgr, backend, pts).get_internal_timer_service("t", rec)
    keys = [k for k in map(str, range(200)) if kgr.contains(assign_to_key_group(k, 128))][:5]
    for i, k in enumerate(keys):
        reg_event(backend, service, k, 10 + i)
        reg_proc(backend, service, k, 100 + i)
    snapshot = {kg: service.get_timers_for_key_group(kg) for kg in kgr}
    for kg, (event, proc) in snapshot.items():
        for t in event + proc:
            assert assign_to_key_group(t.key, 128) == kg
    assert sum(len(e) for e, _ in snapshot.values()) == 5
    with pytest.raises(ValueError):
        service.get_timers_for_key_group(0)

    backend2 = HeapKeyedStateBackend(kgr, 128)
    pts2 = TestProcessingTimeService()
    rec2 = Recorder(backend2)
    manager2 = InternalTimeServiceManager(kgr, backend2, pts2)
    restored = manager2.get_internal_timer_service("t", rec2)
    for kg, (event, proc) in snapshot.items():
        restored.restore_timers_for_key_group(kg, event, proc)
    assert pts2.get_active_timer_timestamps() == [100]
    manager2.advance_watermark(100)
    pts2.set_current_time(1000)
    assert [(f[0], f[1], f[2]) for f in rec2.fired] == (
        [("event", 10 + i, k) for i, k in enumerate(keys)] + [("proc", 100 + i, k) for i, k in enumerate(keys)]
    )


def test_manager_services_by_name_and_counts(env):
    backend, pts, manager, service, rec = env
    other_rec = Recorder(backend)
    other = manager.get_internal_timer_service("window-timers", other_rec)
    assert manager.get_internal_timer_service("user-timers", rec) is service
    reg_event(backend, service, "a", 1)
    reg_event(backend, other, "a", 2)
    reg_proc(backend, other, "a", 2)
    assert manager.num_event_time_timers() == 2
    assert manager.num_processing_time_timers() == 1
    assert list(manager.get_timer_services()) == ["user-timers", "window-timers"]
    manager.advance_watermark(5)
    assert [f[1] for f in rec.fired] == [1] and [f[1] for f in other_rec.fired] == [2]
    manager.close()
    assert pts.get_active_timer_timestamps() == []


def test_for_each_timer_of_the_current_key(env):
    backend, _, _, service, _ = env
    reg_event(backend, service, "a", 3, ns="n1")
    reg_event(backend, service, "a", 1, ns="n2")
    reg_event(backend, service, "b", 2)
    backend.set_current_key("a")
    seen = []
    service.for_each_event_time_timer(lambda ns, ts: seen.append((ns, ts)))
    assert seen == [("n1", 3), ("n2", 1)]


def test_internal_timer_accessors():
    t = InternalTimer(5, "k", VOID_NAMESPACE)
    assert (t.get_timestamp(), t.get_key(), t.get_namespace()) == (5, "k", VOID_NAMESPACE)
