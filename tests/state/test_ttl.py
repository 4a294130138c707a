"""State TTL: StateTtlConfig's builder and getters, and the TTL states of the heap backend,
with a manual clock: expiry at exactly ``last_access + ttl``, update types, visibility, per
element (list) and per entry (map) expiry, incremental and full-snapshot cleanup."""

from __future__ import annotations

import datetime

import pytest

from rill.datastream.functions import AggregateFunction
from rill.state import (
    AbstractTtlState,
    AggregatingStateDescriptor,
    HeapKeyedStateBackend,
    HeapListState,
    HeapValueState,
    KeyGroupRange,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateTtlConfig,
    TtlAggregatingState,
    TtlListState,
    TtlMapState,
    TtlReducingState,
    TtlValueState,
    ValueStateDescriptor,
)
from rill.state.ttl import (
    ManualTtlTimeProvider,
    StateVisibility,
    Time,
    TtlTimeCharacteristic,
    UpdateType,
    default_ttl_time_provider,
    expired,
)

MAX_PARALLELISM = 128
TTL_MS = 100
T0 = 1_000


class AverageAggregate(AggregateFunction):
    def create_accumulator(self):
        return (0, 0)

    def add(self, value, accumulator):
        return (accumulator[0] + value, accumulator[1] + 1)

    def get_result(self, accumulator):
        return accumulator[0] / accumulator[1]

    def merge(self, acc_a, acc_b):
        return (acc_a[0] + acc_b[0], acc_a[1] + acc_b[1])


@pytest.fixture
def clock() -> ManualTtlTimeProvider:
    return ManualTtlTimeProvider(T0)


@pytest.fixture
def backend(clock) -> HeapKeyedStateBackend:
    return HeapKeyedStateBackend(KeyGroupRange(0, MAX_PARALLELISM - 1), MAX_PARALLELISM, ttl_time_provider=clock)


def ttl(update=UpdateType.OnCreateAndWrite, visibility=StateVisibility.NeverReturnExpired,
        background=False, **cleanup) -> StateTtlConfig:
    """A config with TTL_MS; no background cleanup unless asked, so tests see reads alone."""
    builder = StateTtlConfig.new_builder(Time.milliseconds(TTL_MS)).set_update_type(update).set_state_visibility(visibility)
    if not background:
        builder.disable_cleanup_in_background()
    if "incremental" in cleanup:
        builder.cleanup_incrementally(*cleanup["incremental"])
    if cleanup.get("full_snapshot"):
        builder.cleanup_full_snapshot()
    return builder.build()


def with_ttl(descriptor, config):
    descriptor.enable_time_to_live(config)
    return descriptor


def entries(backend, name):
    """The table's (key, namespace, stored value) triples, sorted by key."""
    return sorted(backend.get_state_table(name), key=lambda e: repr(e[0]))


def stored_by_key(backend, name):
    """key -> stored value of a state's table (one namespace)."""
    return {key: stored for key, _, stored in backend.get_state_table(name)}


# -- configuration ------------------------------------------------------------------------------

def test_builder_defaults_and_getters():
    config = StateTtlConfig.new_builder(Time.seconds(10)).build()
    assert config.get_ttl() == Time.milliseconds(10_000) and config.get_ttl_ms() == 10_000
    assert config.get_update_type() is UpdateType.OnCreateAndWrite is StateTtlConfig.UpdateType.OnCreateAndWrite
    assert config.get_state_visibility() is StateVisibility.NeverReturnExpired
    assert config.get_ttl_time_characteristic() is TtlTimeCharacteristic.ProcessingTime
    assert config.is_enabled()
    strategies = config.get_cleanup_strategies()
    assert strategies.is_cleanup_in_background() and not strategies.in_full_snapshot()
    default = strategies.get_incremental_cleanup_strategy()
    assert (default.get_cleanup_size(), default.run_cleanup_for_every_record()) == (5, False)


def test_builder_setters():
    config = (StateTtlConfig.new_builder(500)
              .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
              .set_state_visibility(StateTtlConfig.StateVisibility.ReturnExpiredIfNotCleanedUp)
              .set_ttl_time_characteristic(StateTtlConfig.TtlTimeCharacteristic.ProcessingTime)
              .cleanup_full_snapshot()
              .cleanup_incrementally(10, True)
              .disable_cleanup_in_background()
              .build())
    assert config.get_ttl_ms() == 500
    assert config.get_update_type() is UpdateType.OnReadAndWrite
    assert config.get_state_visibility() is StateVisibility.ReturnExpiredIfNotCleanedUp
    strategies = config.get_cleanup_strategies()
    assert strategies.in_full_snapshot() and not strategies.is_cleanup_in_background()
    incremental = strategies.get_incremental_cleanup_strategy()  # explicit: kept without background
    assert (incremental.get_cleanup_size(), incremental.run_cleanup_for_every_record()) == (10, True)
    no_background = StateTtlConfig.new_builder(500).disable_cleanup_in_background().build()
    assert no_background.get_cleanup_strategies().get_incremental_cleanup_strategy() is None
    shortcuts = (StateTtlConfig.new_builder(1).update_ttl_on_read_and_write().return_expired_if_not_cleaned_up()
                 .use_processing_time().build())
    assert shortcuts.get_update_type() is UpdateType.OnReadAndWrite
    assert shortcuts.get_state_visibility() is StateVisibility.ReturnExpiredIfNotCleanedUp
    assert not StateTtlConfig.new_builder(1).set_update_type(UpdateType.Disabled).build().is_enabled()


def test_ttl_forms_and_errors():
    assert StateTtlConfig.new_builder(datetime.timedelta(seconds=2)).build().get_ttl_ms() == 2000
    assert StateTtlConfig.new_builder(Time.minutes(1)).set_ttl(Time.hours(1)).build().get_ttl_ms() == 3_600_000

    class DurationLike:
        def to_milliseconds(self):
            return 7

    like = DurationLike()
    config = StateTtlConfig.new_builder(like).build()
    assert config.get_ttl() is like and config.get_ttl_ms() == 7  # kept as given, as PyFlink
    for bad in (0, -1, Time(0)):
        with pytest.raises(ValueError, match="^TTL is expected to be positive"):
            StateTtlConfig.new_builder(bad)
    with pytest.raises(TypeError, match="^TTL must be a Time"):
        StateTtlConfig.new_builder("10s")
    with pytest.raises(TypeError, match=r"^update_type must be a StateTtlConfig.UpdateType, got 'x'$"):
        StateTtlConfig.new_builder(1).set_update_type("x")
    with pytest.raises(ValueError, match="^Number of incrementally cleaned up state entries should be positive"):
        StateTtlConfig.new_builder(1).cleanup_incrementally(0, False)
    with pytest.raises(TypeError, match="^run_cleanup_for_every_record must be a bool"):
        StateTtlConfig.new_builder(1).cleanup_incrementally(1, "yes")


def test_expired_is_inclusive():
    assert not expired(1000, 100, 1099)
    assert expired(1000, 100, 1100)


def test_disabled_ttl_gives_the_plain_heap_state(backend):
    disabled = StateTtlConfig.new_builder(TTL_MS).set_update_type(UpdateType.Disabled).build()
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), disabled))
    assert type(state) is HeapValueState
    plain = backend.get_or_create_keyed_state(ListStateDescriptor("l"))
    assert type(plain) is HeapListState
    assert type(backend) is HeapKeyedStateBackend  # no key selection listener


def test_ttl_config_must_be_a_state_ttl_config(backend):
    descriptor = ValueStateDescriptor("v")
    descriptor.enable_time_to_live({"ttl_ms": 5})
    with pytest.raises(TypeError, match=r"^State 'v': enable_time_to_live\(\) needs a StateTtlConfig, got "
                                        r"\{'ttl_ms': 5\} of type dict$"):
        backend.get_or_create_keyed_state(descriptor)
    assert backend.get_registered_state_names() == []


def test_default_clock_is_wall_clock_ms():
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 0), 1)
    assert backend.get_ttl_time_provider() is default_ttl_time_provider
    with pytest.raises(TypeError, match="^ttl_time_provider must be callable"):
        HeapKeyedStateBackend(KeyGroupRange(0, 0), 1, ttl_time_provider=5)


# -- value state --------------------------------------------------------------------------------

def test_value_expires_at_exactly_ttl(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl()))
    assert isinstance(state, TtlValueState)
    backend.set_current_key("a")
    state.update(5)
    assert entries(backend, "v")[0][2] == (5, T0)  # the stored TTL value
    clock.set(T0 + TTL_MS - 1)
    assert state.value() == 5  # a read does not refresh (OnCreateAndWrite)
    clock.set(T0 + TTL_MS)
    assert state.value() is None
    assert backend.num_key_value_state_entries() == 0  # removed by the read


def test_value_write_refreshes(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl()))
    backend.set_current_key("a")
    state.update(1)
    clock.set(T0 + 80)
    state.update(2)
    clock.set(T0 + 80 + TTL_MS - 1)
    assert state.value() == 2
    clock.set(T0 + 80 + TTL_MS)
    assert state.value() is None


def test_value_on_read_and_write_refreshes_on_read(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(UpdateType.OnReadAndWrite)))
    backend.set_current_key("a")
    state.update(5)
    clock.set(T0 + 50)
    assert state.value() == 5  # last access now T0 + 50
    assert entries(backend, "v")[0][2] == (5, T0 + 50)
    clock.set(T0 + 50 + TTL_MS - 1)
    assert state.value() == 5  # last access now T0 + 149
    clock.set(T0 + 149 + TTL_MS - 1)
    assert state.value() == 5
    clock.set(T0 + 248 + TTL_MS)
    assert state.value() is None


def test_value_return_expired_if_not_cleaned_up(backend, clock):
    config = ttl(visibility=StateVisibility.ReturnExpiredIfNotCleanedUp)
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), config))
    backend.set_current_key("a")
    state.update(5)
    clock.set(T0 + TTL_MS)
    assert state.value() == 5  # expired, returned this last time, and removed
    assert backend.num_key_value_state_entries() == 0
    assert state.value() is None


def test_value_update_none_and_clear(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl()))
    backend.set_current_key("a")
    state.update(5)
    state.update(None)
    assert backend.num_key_value_state_entries() == 0
    state.update(6)
    state.clear()
    assert state.value() is None and backend.num_key_value_state_entries() == 0


def test_keys_and_namespaces_expire_independently(backend, clock):
    descriptor = with_ttl(ValueStateDescriptor("v"), ttl())
    state = backend.get_partitioned_state("w1", descriptor)
    backend.set_current_key("a")
    state.update("a-w1")
    clock.set(T0 + 50)
    state.set_current_namespace("w2")
    state.update("a-w2")
    backend.set_current_key("b")
    state.update("b-w2")
    clock.set(T0 + TTL_MS)
    assert state.value() == "b-w2"
    backend.set_current_key("a")
    assert state.value() == "a-w2"
    state.set_current_namespace("w1")
    assert state.get_current_namespace() == "w1"
    assert state.value() is None


def test_no_key_error_passes_through(backend):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl()))
    with pytest.raises(RuntimeError, match="^No key set"):
        state.value()


# -- list state ---------------------------------------------------------------------------------

def test_list_elements_expire_one_by_one(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ListStateDescriptor("l"), ttl()))
    assert isinstance(state, TtlListState)
    backend.set_current_key("k")
    state.add("a")
    clock.set(T0 + 50)
    state.add("b")
    clock.set(T0 + 60)
    state.add_all(["c", "d"])
    assert entries(backend, "l")[0][2] == [("a", T0), ("b", T0 + 50), ("c", T0 + 60), ("d", T0 + 60)]
    clock.set(T0 + TTL_MS - 1)
    assert state.get() == ["a", "b", "c", "d"]
    clock.set(T0 + TTL_MS)
    assert state.get() == ["b", "c", "d"]
    # as Flink: an expired element among unexpired ones stays stored until a cleanup
    assert entries(backend, "l")[0][2][0] == ("a", T0)
    clock.set(T0 + 50 + TTL_MS)
    assert state.get() == ["c", "d"]
    clock.set(T0 + 60 + TTL_MS)
    assert state.get() == []
    assert backend.num_key_value_state_entries() == 0  # all expired: the entry goes


def test_list_on_read_and_write_rewrites_unexpired(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ListStateDescriptor("l"), ttl(UpdateType.OnReadAndWrite)))
    backend.set_current_key("k")
    state.add("a")
    clock.set(T0 + 50)
    state.add("b")
    clock.set(T0 + TTL_MS)
    assert state.get() == ["b"]
    assert entries(backend, "l")[0][2] == [("b", T0 + TTL_MS)]  # expired dropped, rest refreshed
    clock.set(T0 + 2 * TTL_MS - 1)
    assert state.get() == ["b"]


def test_list_return_expired_if_not_cleaned_up(backend, clock):
    config = ttl(visibility=StateVisibility.ReturnExpiredIfNotCleanedUp)
    state = backend.get_or_create_keyed_state(with_ttl(ListStateDescriptor("l"), config))
    backend.set_current_key("k")
    state.add("a")
    clock.set(T0 + 50)
    state.add("b")
    clock.set(T0 + TTL_MS)
    assert state.get() == ["a", "b"]  # "a" expired but not cleaned up
    clock.set(T0 + 50 + TTL_MS)
    assert state.get() == ["a", "b"]  # all expired: returned this last time, and removed
    assert state.get() == []


def test_list_update_and_errors(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ListStateDescriptor("l"), ttl()))
    backend.set_current_key("k")
    state.add("old")
    clock.set(T0 + 10)
    state.update(["x", "y"])
    assert entries(backend, "l")[0][2] == [("x", T0 + 10), ("y", T0 + 10)]
    with pytest.raises(ValueError, match=r"^You cannot add null to a ListState. \(state 'l'\)$"):
        state.add(None)
    with pytest.raises(ValueError, match=r"element 1\)$"):
        state.update(["z", None])
    with pytest.raises(ValueError, match="^List of values to add cannot be null"):
        state.add_all(None)
    assert state.get() == ["x", "y"]
    state.update([])
    assert backend.num_key_value_state_entries() == 0


def test_list_merge_namespaces_keeps_timestamps(backend, clock):
    state = backend.get_partitioned_state("w1", with_ttl(ListStateDescriptor("l"), ttl()))
    backend.set_current_key("k")
    state.add("a")
    clock.set(T0 + 50)
    state.set_current_namespace("w2")
    state.add("b")
    state.merge_namespaces("w3", ["w1", "w2"])
    state.set_current_namespace("w3")
    clock.set(T0 + TTL_MS)
    assert state.get() == ["b"]


# -- map state ----------------------------------------------------------------------------------

def test_map_entries_expire_one_by_one(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(MapStateDescriptor("m"), ttl()))
    assert isinstance(state, TtlMapState)
    backend.set_current_key("k")
    state.put("k1", 1)
    clock.set(T0 + 50)
    state.put_all({"k2": 2, "k3": None})
    assert entries(backend, "m")[0][2] == {"k1": (1, T0), "k2": (2, T0 + 50), "k3": (None, T0 + 50)}
    clock.set(T0 + TTL_MS - 1)
    assert state.items() == [("k1", 1), ("k2", 2), ("k3", None)]
    clock.set(T0 + TTL_MS)
    assert state.get("k1") is None and not state.contains("k1") and "k1" not in state
    assert state.contains("k3") and state.get("k3") is None  # None is a legal value
    assert state.items() == [("k2", 2), ("k3", None)]
    assert entries(backend, "m")[0][2] == {"k2": (2, T0 + 50), "k3": (None, T0 + 50)}
    assert state.keys() == ["k2", "k3"] and state.values() == [2, None] and not state.is_empty()
    clock.set(T0 + 50 + TTL_MS)
    assert state.is_empty()
    assert backend.num_key_value_state_entries() == 0


def test_map_on_read_and_write_refreshes_the_read_entry(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(MapStateDescriptor("m"), ttl(UpdateType.OnReadAndWrite)))
    backend.set_current_key("k")
    state.put_all({"k1": 1, "k2": 2})
    clock.set(T0 + 90)
    assert state.get("k1") == 1
    clock.set(T0 + TTL_MS)
    assert state.items() == [("k1", 1)]
    assert entries(backend, "m")[0][2] == {"k1": (1, T0 + TTL_MS)}


def test_map_return_expired_if_not_cleaned_up(backend, clock):
    config = ttl(visibility=StateVisibility.ReturnExpiredIfNotCleanedUp)
    state = backend.get_or_create_keyed_state(with_ttl(MapStateDescriptor("m"), config))
    backend.set_current_key("k")
    state.put("k1", 1)
    clock.set(T0 + 50)
    state.put("k2", 2)
    clock.set(T0 + TTL_MS)
    assert state.items() == [("k1", 1), ("k2", 2)]  # k1 returned this last time
    assert state.items() == [("k2", 2)]
    state.remove("k2")
    assert backend.num_key_value_state_entries() == 0


# -- reducing and aggregating state -------------------------------------------------------------

def test_reducing_ignores_expired_value(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ReducingStateDescriptor("r", lambda a, b: a + b), ttl()))
    assert isinstance(state, TtlReducingState)
    backend.set_current_key("k")
    state.add(1)
    clock.set(T0 + 50)
    state.add(2)
    assert state.get() == 3 and entries(backend, "r")[0][2] == (3, T0 + 50)
    clock.set(T0 + 50 + TTL_MS - 1)
    assert state.get() == 3
    clock.set(T0 + 50 + TTL_MS)
    state.add(10)  # the expired 3 is replaced, not reduced with
    assert state.get() == 10
    clock.set(T0 + 50 + 2 * TTL_MS)
    assert state.get() is None and backend.num_key_value_state_entries() == 0


def test_reducing_merge_skips_expired_namespaces(backend, clock):
    state = backend.get_partitioned_state("w1", with_ttl(ReducingStateDescriptor("r", lambda a, b: a + b), ttl()))
    backend.set_current_key("k")
    state.add(1)
    clock.set(T0 + 60)
    state.set_current_namespace("w2")
    state.add(2)
    state.set_current_namespace("w3")
    state.add(3)
    clock.set(T0 + TTL_MS)  # w1 expired
    state.merge_namespaces("w3", ["w1", "w2"])
    assert state.get() == 5
    assert backend.num_key_value_state_entries() == 1


def test_aggregating_starts_fresh_after_expiry(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(AggregatingStateDescriptor("g", AverageAggregate()), ttl()))
    assert isinstance(state, TtlAggregatingState)
    backend.set_current_key("k")
    state.add(10)
    clock.set(T0 + 20)
    state.add(20)
    assert state.get() == 15.0 and state.get_accumulator() == (30, 2)
    assert entries(backend, "g")[0][2] == ((30, 2), T0 + 20)
    clock.set(T0 + 20 + TTL_MS)
    state.add(40)
    assert state.get() == 40.0
    clock.set(T0 + 20 + 2 * TTL_MS)
    assert state.get() is None and backend.num_key_value_state_entries() == 0


def test_aggregating_on_read_and_write(backend, clock):
    config = ttl(UpdateType.OnReadAndWrite)
    state = backend.get_or_create_keyed_state(with_ttl(AggregatingStateDescriptor("g", AverageAggregate()), config))
    backend.set_current_key("k")
    state.add(4)
    clock.set(T0 + 90)
    assert state.get() == 4.0
    clock.set(T0 + 90 + TTL_MS - 1)
    assert state.get() == 4.0


# -- incremental cleanup ------------------------------------------------------------------------

def _write_keys(backend, state, keys, value="x"):
    for key in keys:
        backend.set_current_key(key)
        state.update(value)


def test_incremental_cleanup_visits_cleanup_size_entries_per_access(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(incremental=(2, False))))
    _write_keys(backend, state, ["a", "b", "c", "d", "e"])
    table = backend.get_state_table("v")
    clock.set(T0 + TTL_MS)
    assert table.size() == 5  # writes at T0 visited unexpired entries only
    backend.set_current_key("absent")
    sizes = []
    for _ in range(4):
        state.value()
        sizes.append(table.size())
    assert sizes == [3, 1, 0, 0]


def test_incremental_cleanup_keeps_unexpired_and_trims_lists(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ListStateDescriptor("l"), ttl(incremental=(10, False))))
    backend.set_current_key("old")
    state.add("o")
    backend.set_current_key("mixed")
    state.add("m1")
    clock.set(T0 + 80)
    state.add("m2")
    backend.set_current_key("new")
    state.add("n")
    clock.set(T0 + TTL_MS)
    backend.set_current_key("absent")
    state.get()
    assert stored_by_key(backend, "l") == {"mixed": [("m2", T0 + 80)], "new": [("n", T0 + 80)]}


def test_incremental_cleanup_of_map_entries(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(MapStateDescriptor("m"), ttl(incremental=(5, False))))
    backend.set_current_key("k")
    state.put("old", 1)
    clock.set(T0 + 80)
    state.put("new", 2)
    clock.set(T0 + TTL_MS)
    backend.set_current_key("other")
    assert state.is_empty()
    assert entries(backend, "m")[0][2] == {"new": (2, T0 + 80)}


def test_default_background_cleanup_is_incremental_5(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(background=True)))
    _write_keys(backend, state, [f"k{i}" for i in range(7)])
    clock.set(T0 + TTL_MS)
    backend.set_current_key("absent")
    state.value()
    assert backend.get_state_table("v").size() == 2


def test_no_incremental_cleanup_without_background(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl()))
    _write_keys(backend, state, ["a", "b"])
    clock.set(T0 + TTL_MS)
    backend.set_current_key("absent")
    state.value()
    assert backend.get_state_table("v").size() == 2
    assert state.incremental_cleanup is None


def test_incremental_cleanup_sees_entries_added_later(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(incremental=(1, False))))
    backend.set_current_key("a")
    state.update(1)  # the access before the write finds nothing to visit
    clock.set(T0 + TTL_MS)
    backend.set_current_key("b")
    state.update(2)  # the access (before the write) visits "a", expired, and removes it
    assert stored_by_key(backend, "v") == {"b": (2, T0 + TTL_MS)}
    clock.set(T0 + 2 * TTL_MS)
    backend.set_current_key("absent")
    state.value()  # a new pass: "b" is visited and removed
    assert backend.get_state_table("v").size() == 0


def test_run_cleanup_for_every_record(backend, clock):
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(incremental=(1, True))))
    assert type(backend) is not HeapKeyedStateBackend  # listening variant
    _write_keys(backend, state, ["a", "b", "c"])
    clock.set(T0 + TTL_MS)
    table = backend.get_state_table("v")
    sizes = []
    for key in ("x", "y", "z"):
        backend.set_current_key(key)  # no state access: the record alone cleans up
        sizes.append(table.size())
    assert sizes == [2, 1, 0]
    assert backend.get_current_key() == "z"


# -- full snapshot cleanup ----------------------------------------------------------------------

def test_full_snapshot_filters_expired_values_lists_and_maps(backend, clock):
    config = ttl(full_snapshot=True)
    value = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), config))
    lst = backend.get_or_create_keyed_state(with_ttl(ListStateDescriptor("l"), config))
    mp = backend.get_or_create_keyed_state(with_ttl(MapStateDescriptor("m"), config))
    backend.set_current_key("old")
    value.update(1)
    lst.add("o")
    mp.put("o", 1)
    clock.set(T0 + 80)
    backend.set_current_key("new")
    value.update(2)
    lst.add("n")
    mp.put("n", 2)
    backend.set_current_key("old")
    lst.add("o2")
    mp.put("o2", 3)
    clock.set(T0 + TTL_MS)

    def snapshot(name):
        out = {}
        for kg in backend.get_key_group_range():
            for key, _, stored in backend.iter_snapshot_entries(name, kg):
                out[key] = stored
        return out

    assert snapshot("v") == {"new": (2, T0 + 80)}
    assert snapshot("l") == {"old": [("o2", T0 + 80)], "new": [("n", T0 + 80)]}
    assert snapshot("m") == {"old": {"o2": (3, T0 + 80)}, "new": {"n": (2, T0 + 80)}}
    assert backend.get_state_table("v").size() == 2  # live state untouched
    assert stored_by_key(backend, "l")["old"] == [("o", T0), ("o2", T0 + 80)]


def test_snapshot_transformer_only_with_full_snapshot_cleanup(backend, clock):
    backend.get_or_create_keyed_state(ValueStateDescriptor("plain"))
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("ttl"), ttl()))
    assert backend.get_snapshot_transformer("plain") is None
    assert backend.get_snapshot_transformer("ttl") is None
    backend.set_current_key("a")
    state.update(1)
    clock.set(T0 + TTL_MS)
    kept = [e for kg in backend.get_key_group_range() for e in backend.iter_snapshot_entries("ttl", kg)]
    assert [e[2] for e in kept] == [(1, T0)]  # written as stored
    with pytest.raises(KeyError):
        backend.get_snapshot_transformer("nope")


def test_ttl_states_are_documented():
    import inspect

    for cls in (AbstractTtlState, TtlValueState, TtlListState, TtlMapState, TtlReducingState,
                TtlAggregatingState, StateTtlConfig, StateTtlConfig.Builder, StateTtlConfig.CleanupStrategies):
        assert inspect.getdoc(cls), cls
        for attr in dir(cls):
            member = inspect.getattr_static(cls, attr)
            if not attr.startswith("_") and (callable(member) or isinstance(member, property)):
                if isinstance(member, type):
                    continue
                assert inspect.getdoc(getattr(cls, attr) if callable(member) else member), f"{cls.__name__}.{attr}"


def test_incremental_cleanup_moves_through_a_bounded_number_of_key_groups(clock):
    from rill.state import assign_to_key_group
    from rill.state.ttl import MAX_KEY_GROUPS_PER_CLEANUP

    assert MAX_KEY_GROUPS_PER_CLEANUP == 256
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 1023), 1024, ttl_time_provider=clock)
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(incremental=(1, False))))
    key = next(k for k in range(10_000) if 512 <= assign_to_key_group(k, 1024) < 768)
    backend.set_current_key(key)
    state.update(1)  # its access moved the cursor through key groups 0..255
    clock.set(T0 + TTL_MS)
    backend.set_current_key("absent-key")
    state.value()  # key groups 256..511: nothing to check
    assert backend.get_state_table("v").size() == 1
    state.value()  # key groups 512..767: the expired entry goes
    assert backend.get_state_table("v").size() == 0


@pytest.mark.parametrize("full_snapshot", [True, False])
def test_the_backend_snapshot_leaves_out_expired_values_only_with_cleanup_full_snapshot(backend, clock, full_snapshot):
    descriptor = with_ttl(ValueStateDescriptor("v"), ttl(full_snapshot=full_snapshot))
    state = backend.get_or_create_keyed_state(descriptor)
    backend.set_current_key("old")
    state.update(1)
    clock.set(T0 + TTL_MS)
    backend.set_current_key("new")
    state.update(2)
    snapshot = backend.snapshot()
    keys = sorted(key for states in snapshot.key_groups.values() for key, _, _ in states["v"])
    assert keys == (["new"] if full_snapshot else ["new", "old"])
    restored = HeapKeyedStateBackend(KeyGroupRange(0, MAX_PARALLELISM - 1), MAX_PARALLELISM, ttl_time_provider=clock)
    restored.restore([snapshot])
    restored.set_current_key("new")
    assert restored.get_or_create_keyed_state(descriptor).value() == 2


def test_incremental_cleanup_never_deletes_from_a_snapshot_taken_mid_key_group(clock):
    # one key group: the cleanup cursor sits inside the key group that the snapshot pins
    backend = HeapKeyedStateBackend(KeyGroupRange(0, 0), 1, ttl_time_provider=clock)
    state = backend.get_or_create_keyed_state(with_ttl(ValueStateDescriptor("v"), ttl(incremental=(1, False))))
    _write_keys(backend, state, ["a", "b", "c", "d", "e"])
    backend.set_current_key("absent")
    state.value()  # the cursor entered the key group
    resources = backend.sync_prepare_resources()
    clock.set(T0 + TTL_MS)
    for _ in range(10):
        state.value()
    assert backend.get_state_table("v").size() == 0  # the live state was cleaned up
    snapshot = resources.async_snapshot()
    assert sorted(key for key, _, _ in snapshot.entries("v", 0)) == ["a", "b", "c", "d", "e"]
