"""Tests for scorer.queue: pools, backoff, cluster events, gating, the async loop.

Time comes from a FakeClock moved by hand; nothing sleeps except the two
asyncio tests, which use tiny real periods.
"""

from __future__ import annotations

import asyncio
import weakref

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import scorer.queue
import scorer.queue.flight
from scorer.framework.events import (
    BACKOFF_COMPLETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    FORCE_ACTIVATE,
    POD_ADD,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
    ClusterEvent,
    matches,
)
from scorer.framework.types import QueuedPodInfo
from scorer.queue import ACTIVE, BACKOFF, GATED, IN_FLIGHT, UNSCHEDULABLE, SchedulingQueue
from scorer.state.memory import release_memory


@attrs.define
class FakePod:
    """The few Pod attributes the queue and PrioritySort read."""

    name: str
    priority: int = 0
    namespace: str = "default"
    uid: str = attrs.field(default=attrs.Factory(lambda self: f"uid-{self.name}", takes_self=True))
    scheduling_gates: tuple[str, ...] = ()
    resource_version: str = "1"
    scheduler_name: str = "default-scheduler"
    nominated_node_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def priority_sort(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort's Less (reference §2.2)."""
    if a.pod.priority != b.pod.priority:
        return a.pod.priority > b.pod.priority
    return a.timestamp < b.timestamp


def scheduling_gates(pod: FakePod) -> str | None:
    return "SchedulingGates" if pod.scheduling_gates else None


NODE_ADD = ClusterEvent("Node", "Add")
NODE_LABEL = ClusterEvent("Node", "UpdateNodeLabel")
ASSIGNED_POD_DELETE = ClusterEvent("AssignedPod", "Delete")
PVC_ADD = ClusterEvent("PersistentVolumeClaim", "Add")

PLUGIN_EVENTS = {
    "NodeResourcesFit": [NODE_ADD, ClusterEvent("Pod", "Delete")],
    "NodeAffinity": [ClusterEvent("Node", "Update")],
    "VolumeBinding": [PVC_ADD],
    "Deaf": [],
}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def incoming() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def queue(clock: FakeClock, incoming: list[tuple[str, str]]) -> SchedulingQueue:
    return SchedulingQueue(
        priority_sort,
        clock=clock,
        pre_enqueue=scheduling_gates,
        plugin_events=PLUGIN_EVENTS,
        on_incoming=lambda pool, label: incoming.append((pool, label)),
    )


def fail(
    queue: SchedulingQueue, info: QueuedPodInfo, *plugins: str, **kwargs: object
) -> str | None:
    return queue.add_unschedulable_if_not_present(info, unschedulable_plugins=plugins, **kwargs)


def pop(queue: SchedulingQueue) -> QueuedPodInfo:
    info = queue.pop()
    assert info is not None
    return info


def pop_all_keys(queue: SchedulingQueue) -> list[str]:
    keys = []
    while (info := queue.pop()) is not None:
        keys.append(info.pod.name)
        queue.done(info.key)
    return keys


def park(queue: SchedulingQueue, pod: FakePod, *plugins: str) -> QueuedPodInfo:
    """Add, pop and fail ``pod`` so it sits in the unschedulable pool."""
    queue.add(pod)
    info = pop(queue)
    assert fail(queue, info, *plugins) == UNSCHEDULABLE
    return info


# -- events ------------------------------------------------------------------


def test_event_label_is_resource_and_action_or_custom() -> None:
    assert NODE_ADD.label == "NodeAdd"
    assert ASSIGNED_POD_DELETE.label == "AssignedPodDelete"
    assert EVENT_UNSCHEDULABLE_TIMEOUT.label == UNSCHEDULABLE_TIMEOUT == "UnschedulableTimeout"
    assert EVENT_FORCE_ACTIVATE.label == FORCE_ACTIVATE
    assert EVENT_FORCE_ACTIVATE.is_wildcard and not NODE_ADD.is_wildcard


@pytest.mark.parametrize(
    ("registered", "event", "expected"),
    [
        (NODE_ADD, NODE_ADD, True),
        (NODE_ADD, ClusterEvent("Node", "Delete"), False),
        (NODE_ADD, ClusterEvent("Pod", "Add"), False),
        (ClusterEvent("*", "Add"), PVC_ADD, True),
        (ClusterEvent("Node", "All"), NODE_LABEL, True),
        (ClusterEvent("Node", "Update"), NODE_LABEL, True),
        (ClusterEvent("Node", "UpdateNodeTaint"), NODE_LABEL, False),
        (ClusterEvent("Node", "UpdateNodeTaint"), ClusterEvent("Node", "Update"), True),
        (ClusterEvent("Node", "Update"), NODE_ADD, False),
        (ClusterEvent("Pod", "Delete"), ASSIGNED_POD_DELETE, True),
        (ClusterEvent("Pod", "Update"), ClusterEvent("UnschedulablePod", "UpdatePodLabel"), True),
        (ClusterEvent("AssignedPod", "Delete"), ClusterEvent("Pod", "Delete"), False),
    ],
)
def test_matches(registered: ClusterEvent, event: ClusterEvent, expected: bool) -> None:
    assert matches(registered, event) is expected


# -- active pool order -------------------------------------------------------


def test_pop_order_is_priority_then_timestamp(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(FakePod("low-old", priority=1))
    clock.advance(1)
    queue.add(FakePod("high-new", priority=10))
    clock.advance(1)
    queue.add(FakePod("low-new", priority=1))
    queue.add(FakePod("high-old", priority=10))  # same time as low-new
    clock.advance(-5)  # an earlier timestamp wins among equals
    queue.add(FakePod("low-oldest", priority=1))
    assert pop_all_keys(queue) == ["high-new", "high-old", "low-oldest", "low-old", "low-new"]


def test_ties_keep_insertion_order(queue: SchedulingQueue) -> None:
    names = [f"pod-{i}" for i in range(20)]
    for name in names:
        queue.add(FakePod(name))
    assert pop_all_keys(queue) == names


def test_pop_counts_attempts_and_cycles(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(FakePod("a"))
    assert queue.pop() is not None
    assert queue.pop() is None
    queue.add(FakePod("b"))
    clock.advance(3)
    info = pop(queue)
    # Stamped when the pod first entered active (kube's InitialAttemptTimestamp), not at the pop.
    assert (info.attempts, info.initial_attempt_timestamp) == (1, 1000.0)
    assert queue.scheduling_cycle == 2
    assert fail(queue, info, error=True) == BACKOFF
    clock.advance(1)
    info = pop(queue)
    assert (info.attempts, info.initial_attempt_timestamp) == (2, 1000.0)
    assert queue.scheduling_cycle == 3
    assert queue.is_in_flight("default/b") and "default/b" not in queue
    queue.done("default/b")
    assert not queue.is_in_flight("default/b")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "delete", "update"]),
            st.integers(0, 7),  # pod
            st.integers(0, 3),  # priority
            st.integers(0, 2),  # clock step
        ),
        max_size=60,
    )
)
def test_active_heap_matches_sorted_model(ops: list[tuple[str, int, int, int]]) -> None:
    """Adds, deletes and priority updates, then pops: same order as sorting."""
    clock = FakeClock()
    queue = SchedulingQueue(priority_sort, clock=clock)
    model: dict[str, tuple[int, float, int]] = {}  # name -> (priority, timestamp, seq)
    for seq, (op, number, priority, step) in enumerate(ops):
        clock.advance(step)
        pod = FakePod(f"p{number}", priority=priority)
        if op == "delete":
            queue.delete(pod)
            model.pop(pod.name, None)
        elif pod.name in model:  # add of a known pod is an update too
            queue.update(None, pod)
            _, timestamp, first_seq = model[pod.name]
            model[pod.name] = (priority, timestamp, first_seq)
        elif op == "add":
            queue.add(pod)
            model[pod.name] = (priority, clock.now, seq)
    expected = sorted(model, key=lambda name: (-model[name][0], model[name][1], model[name][2]))
    assert len(queue) == len(model)
    assert pop_all_keys(queue) == expected


# -- backoff -----------------------------------------------------------------


def test_backoff_sequence(queue: SchedulingQueue, clock: FakeClock) -> None:
    """1, 2, 4, 8, 10, 10 s; the pod leaves backoff exactly at expiry."""
    queue.add(FakePod("web"))
    for expected in [1, 2, 4, 8, 10, 10]:
        info = pop(queue)
        queue.move_all_to_active_or_backoff(NODE_ADD)  # arrives during flight
        failed_at = clock.now
        assert fail(queue, info, "NodeResourcesFit") == BACKOFF
        assert queue.backoff_duration(info) == expected
        assert queue.next_backoff_expiry() == failed_at + expected

        clock.now = failed_at + expected - 0.25
        assert queue.flush_backoff_completed() == 0
        assert queue.pop() is None
        assert queue.pending_counts()[BACKOFF] == 1

        clock.now = failed_at + expected
        assert queue.flush_backoff_completed() == 1
        assert queue.pending_counts() == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
        assert queue.next_backoff_expiry() is None
        clock.advance(0.5)
    assert info.unschedulable_count == 6


def test_backoff_with_other_settings(clock: FakeClock) -> None:
    queue = SchedulingQueue(priority_sort, clock=clock, initial_backoff=0.5, max_backoff=3.0)
    info = QueuedPodInfo(FakePod("web"), timestamp=0.0)
    assert queue.backoff_duration(info) == 0.0  # never attempted: no penalty
    info.attempts = 1
    durations = []
    for count in range(1, 7):
        info.unschedulable_count = count
        durations.append(queue.backoff_duration(info))
    assert durations == [0.5, 1.0, 2.0, 3.0, 3.0, 3.0]
    info.unschedulable_count = 10_000
    assert queue.backoff_duration(info) == 3.0


def test_errors_back_off_by_attempts(queue: SchedulingQueue, clock: FakeClock) -> None:
    """No rejector plugins (an error): backoff, counted by attempts; the count stays."""
    queue.add(FakePod("web"))
    for expected in [1, 2, 4]:
        info = pop(queue)
        assert fail(queue, info, error=True) == BACKOFF
        assert queue.next_backoff_expiry() == clock.now + expected
        clock.advance(expected)
    assert info.unschedulable_count == 0


def test_pop_flushes_completed_backoff_when_active_is_empty(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(FakePod("web"))
    fail(queue, pop(queue), error=True)
    clock.advance(0.5)
    assert queue.pop() is None
    clock.advance(0.5)
    assert pop(queue).pod.name == "web"


def test_pop_prefers_active_over_completed_backoff(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(FakePod("retry", priority=100))
    fail(queue, pop(queue), error=True)
    clock.advance(5)
    queue.add(FakePod("fresh", priority=0))
    assert pop(queue).pod.name == "fresh"
    assert pop(queue).pod.name == "retry"


# -- unschedulable pool and cluster events ----------------------------------


def test_unschedulable_pod_waits_for_a_registered_event(
    queue: SchedulingQueue, clock: FakeClock, incoming: list[tuple[str, str]]
) -> None:
    park(queue, FakePod("web"), "NodeResourcesFit")
    clock.advance(30)  # backoff long over
    assert queue.move_all_to_active_or_backoff(PVC_ADD) == 0  # nobody of its rejectors
    assert queue.move_all_to_active_or_backoff(NODE_LABEL) == 0
    assert queue.pending_counts()[UNSCHEDULABLE] == 1
    assert queue.move_all_to_active_or_backoff(NODE_ADD) == 1
    assert queue.pending_counts()[ACTIVE] == 1
    assert incoming == [
        (ACTIVE, POD_ADD),
        (UNSCHEDULABLE, SCHEDULE_ATTEMPT_FAILURE),
        (ACTIVE, "NodeAdd"),
    ]


def test_event_moves_to_backoff_while_still_backing_off(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    info = park(queue, FakePod("web"), "NodeAffinity")
    clock.advance(0.5)
    queue.move_all_to_active_or_backoff(NODE_LABEL)  # matches a registered Node/Update
    assert queue.pending_counts()[BACKOFF] == 1
    assert queue.next_backoff_expiry() == info.timestamp + 1
    assert queue.pop() is None


def test_any_rejector_plugin_may_release_the_pod(queue: SchedulingQueue, clock: FakeClock) -> None:
    park(queue, FakePod("web"), "VolumeBinding", "NodeAffinity")
    clock.advance(5)
    assert queue.move_all_to_active_or_backoff(PVC_ADD) == 1


def test_plugin_without_registered_events_hears_every_event(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    """Like kube's plugins without EnqueueExtensions; an empty list means none."""
    park(queue, FakePod("unregistered"), "SomeContribPlugin")
    park(queue, FakePod("deaf"), "Deaf")
    clock.advance(5)
    assert queue.move_all_to_active_or_backoff(PVC_ADD) == 1
    assert pop(queue).pod.name == "unregistered"
    assert queue.pending_counts()[UNSCHEDULABLE] == 1


def test_wildcard_event_moves_every_unschedulable_pod(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    park(queue, FakePod("a"), "Deaf")
    park(queue, FakePod("b"), "NodeResourcesFit")
    queue.add(FakePod("gated", scheduling_gates=("wait",)))
    clock.advance(5)
    assert queue.move_all_to_active_or_backoff(ClusterEvent("*", "All", "Custom")) == 2
    assert queue.pending_counts() == {ACTIVE: 2, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}


def test_pending_plugin_event_skips_backoff(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    assert (
        queue.add_unschedulable_if_not_present(
            info, unschedulable_plugins=(), pending_plugins=("VolumeBinding",)
        )
        == UNSCHEDULABLE
    )
    queue.move_all_to_active_or_backoff(PVC_ADD)  # backoff (1 s) not over, still active
    assert queue.pending_counts()[ACTIVE] == 1


def test_leftover_flush_after_five_minutes(
    queue: SchedulingQueue, clock: FakeClock, incoming: list[tuple[str, str]]
) -> None:
    info = park(queue, FakePod("web"), "Deaf")
    parked_at = info.timestamp
    clock.now = parked_at + 299
    assert queue.flush_unschedulable_leftover() == 0
    clock.now = parked_at + 300
    assert queue.flush_unschedulable_leftover() == 0  # strictly longer, as in kube
    clock.now = parked_at + 300.5
    assert queue.flush_unschedulable_leftover() == 1
    assert queue.pending_counts()[ACTIVE] == 1
    assert incoming[-1] == (ACTIVE, UNSCHEDULABLE_TIMEOUT)


def test_leftover_flush_goes_to_backoff_when_backoff_is_longer(clock: FakeClock) -> None:
    queue = SchedulingQueue(
        priority_sort, clock=clock, max_in_unschedulable=2.0, plugin_events={"P": []}
    )
    queue.add(FakePod("web"))
    info = pop(queue)
    info.unschedulable_count = 3  # the next failure makes it 4: 8 s
    fail(queue, info, "P")
    clock.advance(3)
    assert queue.flush_unschedulable_leftover() == 1
    assert queue.pending_counts()[BACKOFF] == 1
    assert queue.next_backoff_expiry() == info.timestamp + 8


# -- in-flight events ----------------------------------------------------------


def test_event_during_flight_sends_failure_to_backoff(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    queue.move_all_to_active_or_backoff(NODE_ADD)
    assert fail(queue, info, "NodeResourcesFit") == BACKOFF


def test_irrelevant_event_during_flight_parks_the_pod(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    queue.move_all_to_active_or_backoff(PVC_ADD)
    assert fail(queue, info, "NodeResourcesFit") == UNSCHEDULABLE


def test_events_before_pop_or_after_flight_do_not_count(queue: SchedulingQueue) -> None:
    queue.add(FakePod("a"))
    queue.add(FakePod("b"))
    a = pop(queue)
    queue.move_all_to_active_or_backoff(NODE_ADD)  # seen by a only
    queue.done(a.key)
    b = pop(queue)
    assert fail(queue, b, "NodeResourcesFit") == UNSCHEDULABLE


def test_events_are_kept_for_the_oldest_in_flight_pod(queue: SchedulingQueue) -> None:
    queue.add(FakePod("a"))
    queue.add(FakePod("b"))
    a = pop(queue)
    queue.move_all_to_active_or_backoff(NODE_ADD)
    b = pop(queue)
    queue.move_all_to_active_or_backoff(PVC_ADD)
    assert fail(queue, b, "NodeResourcesFit") == UNSCHEDULABLE
    assert fail(queue, a, "NodeResourcesFit") == BACKOFF


def test_wildcard_event_during_flight_counts(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    queue.move_all_to_active_or_backoff(ClusterEvent("*", "All", "Custom"))
    assert fail(queue, info, "Deaf") == BACKOFF


def test_activate_during_flight_sends_failure_to_backoff(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    assert queue.activate(["default/web"]) == 0
    assert fail(queue, info, "Deaf") == BACKOFF


def test_lost_in_flight_events_count_as_relevant(
    queue: SchedulingQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scorer.queue.flight, "MAX_IN_FLIGHT_EVENTS", 3)
    queue.add(FakePod("kept"))
    queue.add(FakePod("lost"))
    kept = pop(queue)
    for _ in range(3):
        queue.move_all_to_active_or_backoff(PVC_ADD)
    assert fail(queue, kept, "NodeAffinity") == UNSCHEDULABLE
    lost = pop(queue)
    for _ in range(4):
        queue.move_all_to_active_or_backoff(PVC_ADD)
    assert fail(queue, lost, "NodeAffinity") == BACKOFF


def test_failure_of_a_queued_pod_is_ignored(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    assert queue.add(FakePod("web")) == IN_FLIGHT  # an update, not a second copy
    assert len(queue) == 0
    assert fail(queue, info, "SomeContribPlugin") == BACKOFF  # the update counts as an event
    assert fail(queue, info, "NodeResourcesFit") is None
    assert len(queue) == 1


# -- gated pods ----------------------------------------------------------------


def test_gated_pod_waits_for_an_update_that_admits_it(
    queue: SchedulingQueue, clock: FakeClock, incoming: list[tuple[str, str]]
) -> None:
    gated = FakePod("job", scheduling_gates=("example.com/quota",))
    assert queue.add(gated) == GATED
    assert queue.pop() is None
    info = queue.pending_pods()[0]
    assert (info.gated, info.gating_plugin) == (True, "SchedulingGates")

    clock.advance(1000)
    assert queue.move_all_to_active_or_backoff(NODE_ADD) == 0
    assert queue.move_all_to_active_or_backoff(EVENT_UNSCHEDULABLE_TIMEOUT) == 0
    assert queue.flush_unschedulable_leftover() == 0
    assert queue.update(gated, attrs.evolve(gated, resource_version="2")) == GATED

    ungated = attrs.evolve(gated, scheduling_gates=(), resource_version="3")
    assert queue.update(gated, ungated) == ACTIVE
    info = pop(queue)
    assert info.pod is ungated
    assert (info.gated, info.gating_plugin) == (False, None)
    assert incoming == [(GATED, POD_ADD), (ACTIVE, "UnschedulablePodUpdate")]


def test_activate_admits_a_gated_pod_only_if_pre_enqueue_does(clock: FakeClock) -> None:
    admit = {"job": False}
    queue = SchedulingQueue(
        priority_sort,
        clock=clock,
        pre_enqueue=lambda pod: None if admit[pod.name] else "Quota",
    )
    queue.add(FakePod("job"))
    assert queue.activate(["default/job"]) == 0
    admit["job"] = True
    assert queue.activate(["default/job"]) == 1
    assert pop(queue).pod.name == "job"


def test_pre_enqueue_runs_again_when_backoff_completes(clock: FakeClock) -> None:
    admit = {"job": True}
    queue = SchedulingQueue(
        priority_sort,
        clock=clock,
        pre_enqueue=lambda pod: None if admit[pod.name] else "Quota",
    )
    queue.add(FakePod("job"))
    fail(queue, pop(queue), error=True)
    admit["job"] = False
    clock.advance(1)
    queue.flush_backoff_completed()
    assert queue.pending_counts()[GATED] == 1


# -- update, delete, activate ------------------------------------------------


def test_update_in_active_resorts(queue: SchedulingQueue) -> None:
    queue.add(FakePod("a", priority=5))
    queue.add(FakePod("b", priority=1))
    assert queue.update(None, FakePod("b", priority=9)) == ACTIVE
    assert pop_all_keys(queue) == ["b", "a"]


def test_update_in_backoff_keeps_expiry_and_counters(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    fail(queue, info, error=True)
    expiry = queue.next_backoff_expiry()
    new_pod = FakePod("web", resource_version="2")
    assert queue.add(new_pod) == BACKOFF
    assert queue.next_backoff_expiry() == expiry
    assert queue.pending_pods()[0] is info and info.pod is new_pod and info.attempts == 1


def test_update_of_unschedulable_pod_moves_it_if_relevant(
    queue: SchedulingQueue, clock: FakeClock, incoming: list[tuple[str, str]]
) -> None:
    park(queue, FakePod("web"), "NodeResourcesFit")  # registered Pod/Delete, no update
    park(queue, FakePod("db"), "Deaf")
    park(queue, FakePod("api"), "SomeContribPlugin")  # hears everything
    park(queue, FakePod("cache"), "SomeContribPlugin")
    clock.advance(0.5)
    assert queue.update(None, FakePod("db", resource_version="2")) == UNSCHEDULABLE
    assert queue.update(None, FakePod("web", resource_version="2")) == UNSCHEDULABLE
    assert queue.update(None, FakePod("api", resource_version="2")) == BACKOFF
    assert incoming[-1] == (BACKOFF, "UnschedulablePodUpdate")

    label_change = ClusterEvent("UnschedulablePod", "UpdatePodLabel")
    assert queue.update(None, FakePod("cache", resource_version="2"), event=label_change) == BACKOFF
    assert incoming[-1] == (BACKOFF, "UnschedulablePodUpdatePodLabel")
    clock.advance(5)
    assert (
        queue.update(None, FakePod("web", resource_version="3"), event=label_change)
        == UNSCHEDULABLE
    )


def test_update_of_in_flight_pod_is_used_on_failure(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web"))
    info = pop(queue)
    newer = FakePod("web", priority=3, resource_version="2")
    assert queue.update(None, newer) == IN_FLIGHT
    assert len(queue) == 0
    fail(queue, info, "SomeContribPlugin")
    assert info.pod is newer


def test_update_of_unknown_pod_adds_it(queue: SchedulingQueue) -> None:
    assert queue.update(None, FakePod("web")) == ACTIVE
    assert "default/web" in queue


def test_delete_removes_from_every_pool(queue: SchedulingQueue, clock: FakeClock) -> None:
    queue.add(FakePod("backoff", priority=3))
    queue.add(FakePod("parked", priority=2))
    queue.add(FakePod("flying", priority=1))
    assert fail(queue, pop(queue), error=True) == BACKOFF
    assert fail(queue, pop(queue), "Deaf") == UNSCHEDULABLE
    flying = pop(queue)
    queue.add(FakePod("active"))
    queue.add(FakePod("gated", scheduling_gates=("x",)))
    assert queue.pending_counts() == {ACTIVE: 1, BACKOFF: 1, UNSCHEDULABLE: 1, GATED: 1}

    for name in ["active", "backoff", "parked", "gated", "flying"]:
        queue.delete(FakePod(name))
    assert len(queue) == 0 and queue.pending_pods() == []
    assert queue.next_backoff_expiry() is None
    assert fail(queue, flying, "NodeResourcesFit") is None  # deleted in flight: dropped
    assert not queue.is_in_flight("default/flying")
    assert len(queue) == 0
    clock.advance(1000)
    queue.flush_backoff_completed()
    queue.flush_unschedulable_leftover()
    assert queue.pop() is None


def test_recreated_pod_is_not_dropped_by_the_old_cycle(queue: SchedulingQueue) -> None:
    queue.add(FakePod("web", uid="old"))
    old = pop(queue)
    queue.delete(old.pod)
    queue.add(FakePod("web", uid="new"))
    new = pop(queue)
    assert fail(queue, old, "Deaf") is None
    assert fail(queue, new, "Deaf") == UNSCHEDULABLE


def test_a_recreated_pod_popped_again_does_not_hide_what_an_older_flight_still_needs(queue: SchedulingQueue) -> None:
    # The flights stay in pop order (the log is pruned up to the oldest's position): the new "web" flight
    # is the newest, although "web" was first in flight under its old UID.
    queue.add(FakePod("web", uid="old"))
    queue.add(FakePod("x"))
    queue.add(FakePod("y"))
    old = pop(queue)
    queue.move_all_to_active_or_backoff(NODE_ADD)
    x = pop(queue)
    queue.delete(old.pod)
    queue.add(FakePod("web", uid="new"))
    queue.move_all_to_active_or_backoff(PVC_ADD)  # seen by x: not a NodeResourcesFit event
    y = pop(queue)
    assert pop(queue).pod.uid == "new"
    queue.done(y.key)  # prunes the log: x still needs what came after its pop
    assert fail(queue, x, "NodeResourcesFit") == UNSCHEDULABLE  # (a lost log would count as relevant: backoff)


def test_activate_forces_to_active(queue: SchedulingQueue, incoming: list[tuple[str, str]]) -> None:
    park(queue, FakePod("parked"), "Deaf")
    queue.add(FakePod("backoff"))
    fail(queue, pop(queue), error=True)
    assert queue.activate(["default/parked", "default/backoff", "default/unknown"]) == 2
    assert queue.pending_counts()[ACTIVE] == 2
    assert incoming[-2:] == [(ACTIVE, FORCE_ACTIVATE), (ACTIVE, FORCE_ACTIVATE)]


def test_counts_and_membership(queue: SchedulingQueue) -> None:
    park(queue, FakePod("parked"), "Deaf")
    queue.add(FakePod("a"))
    queue.add(FakePod("b", scheduling_gates=("x",)))
    assert len(queue) == 3
    assert "default/a" in queue and "default/b" in queue and "default/parked" in queue
    assert "default/c" not in queue and 42 not in queue
    assert sorted(info.pod.name for info in queue.pending_pods()) == ["a", "b", "parked"]


def test_backoff_complete_label(
    queue: SchedulingQueue, clock: FakeClock, incoming: list[tuple[str, str]]
) -> None:
    queue.add(FakePod("web"))
    fail(queue, pop(queue), error=True)
    clock.advance(1)
    queue.flush_backoff_completed()
    assert incoming == [
        (ACTIVE, POD_ADD),
        (BACKOFF, SCHEDULE_ATTEMPT_FAILURE),
        (ACTIVE, BACKOFF_COMPLETE),
    ]


def test_initial_attempt_timestamp_starts_when_a_gated_pod_is_admitted(
    queue: SchedulingQueue, clock: FakeClock
) -> None:
    gated = FakePod("job", scheduling_gates=("x",))
    queue.add(gated)
    clock.advance(60)  # time spent gated is not scheduling latency (kube's SLI)
    queue.update(gated, attrs.evolve(gated, scheduling_gates=(), resource_version="2"))
    clock.advance(1)
    assert pop(queue).initial_attempt_timestamp == 1060.0


class UnschedulableGauge:
    """What ``on_unschedulable`` reports, summed per (profile, plugin)."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], int] = {}

    def __call__(self, profile: str, plugins: frozenset[str], delta: int) -> None:
        for plugin in plugins:
            self.values[profile, plugin] = self.values.get((profile, plugin), 0) + delta

    def nonzero(self) -> dict[tuple[str, str], int]:
        return {key: value for key, value in self.values.items() if value}


def test_unschedulable_gauge_follows_the_pool_whichever_way_pods_leave(clock: FakeClock) -> None:
    gauge = UnschedulableGauge()
    queue = SchedulingQueue(priority_sort, clock=clock, plugin_events=PLUGIN_EVENTS, on_unschedulable=gauge)
    for name in ("moved", "deleted", "activated", "updated", "stale"):
        park(queue, FakePod(name), "Deaf" if name != "moved" else "NodeResourcesFit")
    other = FakePod("other", scheduler_name="second")
    queue.add(other)
    fail(queue, pop(queue), "VolumeBinding", pending_plugins=("Deaf",))
    assert gauge.nonzero() == {("default-scheduler", "Deaf"): 4, ("default-scheduler", "NodeResourcesFit"): 1,
                               ("second", "VolumeBinding"): 1, ("second", "Deaf"): 1}
    queue.add(FakePod("errored"))
    fail(queue, pop(queue), error=True)  # to backoff: not counted
    assert sum(gauge.values.values()) == 7

    assert queue.move_all_to_active_or_backoff(NODE_ADD) == 1  # "moved"
    queue.delete(FakePod("deleted"))
    assert queue.activate(["default/activated"]) == 1
    queue.update(None, FakePod("updated", resource_version="2"))  # Deaf hears nothing: stays
    queue.update(None, other, event=PVC_ADD)  # VolumeBinding's event: leaves
    assert gauge.nonzero() == {("default-scheduler", "Deaf"): 2}
    clock.advance(301)
    assert queue.flush_unschedulable_leftover() == 2
    assert gauge.nonzero() == {} and queue.pending_counts()[UNSCHEDULABLE] == 0


@pytest.mark.parametrize(
    "kwargs",
    [
        {"initial_backoff": -1.0},
        {"initial_backoff": 5.0, "max_backoff": 1.0},
        {"backoff_flush_period": 0.0},
        {"unschedulable_flush_period": -1.0},
        {"quiet_period": 0.0},
    ],
)
def test_bad_settings_are_rejected(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be"):
        SchedulingQueue(priority_sort, **kwargs)


# -- asyncio ---------------------------------------------------------------------


async def test_pop_wait_wakes_on_add(queue: SchedulingQueue) -> None:
    waiter = asyncio.create_task(queue.pop_wait())
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.add(FakePod("gated", scheduling_gates=("x",)))  # not an active insertion
    await asyncio.sleep(0)
    assert not waiter.done()
    queue.add(FakePod("web"))
    info = await asyncio.wait_for(waiter, 1.0)
    assert info is not None and info.pod.name == "web"


async def test_pop_wait_times_out(queue: SchedulingQueue) -> None:
    assert await queue.pop_wait(timeout=0.01) is None
    queue.add(FakePod("web"))
    info = await queue.pop_wait(timeout=0)
    assert info is not None


async def test_run_flushes_and_cancels_cleanly(clock: FakeClock) -> None:
    queue = SchedulingQueue(
        priority_sort,
        clock=clock,
        plugin_events={"Deaf": []},
        backoff_flush_period=0.001,
        unschedulable_flush_period=0.001,
    )
    queue.add(FakePod("backoff"))
    fail(queue, pop(queue), error=True)
    park(queue, FakePod("parked"), "Deaf")
    runner = asyncio.create_task(queue.run(), name="queue")
    clock.advance(301)
    first = await asyncio.wait_for(queue.pop_wait(), 1.0)
    second = await asyncio.wait_for(queue.pop_wait(), 1.0)
    assert first is not None and second is not None
    assert {first.pod.name, second.pod.name} == {"backoff", "parked"}

    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner
    assert runner.cancelled()
    assert not [task for task in asyncio.all_tasks() if task.get_name().startswith("queue-")]


# -- memory after churn ------------------------------------------------------------


def test_memory_is_released_once_after_churn_when_nothing_changed_for_a_period(clock: FakeClock) -> None:
    released: list[int] = []
    queue = SchedulingQueue(priority_sort, clock=clock, release_memory=lambda: released.append(1))
    for i in range(scorer.queue.RELEASE_AFTER_CHANGES // 2):
        pod = FakePod(f"p{i}")
        queue.add(pod)
        queue.delete(pod)
    assert queue.release_memory_if_quiet() is False  # changes since the last check: not quiet yet
    assert queue.release_memory_if_quiet() is True and released == [1]  # a whole period without a change
    assert queue.release_memory_if_quiet() is False and released == [1]  # nothing freed since
    # A trickle of pods (and of cluster events) is not churn: no collection for it.
    queue.add(FakePod("one"))
    queue.move_all_to_active_or_backoff(NODE_ADD)
    queue.release_memory_if_quiet()
    assert queue.release_memory_if_quiet() is False and released == [1]
    # After churn, the release goes on every quiet period while it still returns memory (the recorder
    # frees what it drains after the queue went quiet), MAX_RELEASES times at most.
    results = iter([True, True, False, True])
    calls: list[int] = []
    draining = SchedulingQueue(priority_sort, clock=clock,
                               release_memory=lambda: calls.append(1) or next(results))
    for _ in range(scorer.queue.RELEASE_AFTER_CHANGES):
        draining.move_all_to_active_or_backoff(NODE_ADD)
    assert [draining.release_memory_if_quiet() for _ in range(6)] == [False, True, True, True, False, False]
    assert len(calls) == 3
    endless = SchedulingQueue(priority_sort, clock=clock, release_memory=lambda: True)
    for _ in range(scorer.queue.RELEASE_AFTER_CHANGES):
        endless.move_all_to_active_or_backoff(NODE_ADD)
    assert sum(endless.release_memory_if_quiet() for _ in range(20)) == scorer.queue.MAX_RELEASES
    # Neither is a queue told to never release.
    quiet = SchedulingQueue(priority_sort, clock=clock, release_memory=None)
    for _ in range(scorer.queue.RELEASE_AFTER_CHANGES):
        quiet.move_all_to_active_or_backoff(NODE_ADD)
    assert not quiet.release_memory_if_quiet() and not quiet.release_memory_if_quiet()


async def test_run_releases_memory_after_a_quiet_period(clock: FakeClock) -> None:
    released = asyncio.Event()
    queue = SchedulingQueue(priority_sort, clock=clock, quiet_period=0.001, release_memory=released.set)
    for _ in range(scorer.queue.RELEASE_AFTER_CHANGES):
        queue.move_all_to_active_or_backoff(NODE_ADD)  # cluster events count as churn too
    runner = asyncio.create_task(queue.run(), name="queue")
    await asyncio.wait_for(released.wait(), 5.0)
    runner.cancel()
    with pytest.raises(asyncio.CancelledError):
        await runner


def test_release_memory_collects_cyclic_garbage() -> None:
    class Node:
        pass

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only a collection frees it
    gone = weakref.ref(a)
    del a, b
    release_memory()
    assert gone() is None
