"""Tests for the active heap's two orders (scorer.queue.pools): the built-in PrioritySort's key tuples,
compared in C, against the predicate path every other QueueSort plugin takes; and the keyed heap itself.

The two queues of each example get the same operations and must agree on every answer, every pop
and the heap's layout (``pending_pods`` lists active in heap order).
"""

from __future__ import annotations

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from scorer.framework.events import ClusterEvent
from scorer.framework.types import QueuedPodInfo
from scorer.plugins.queuesort import PrioritySort, sort_key
from scorer.queue import SchedulingQueue
from scorer.queue.pools import ActiveEntry, KeyedHeap, active_rank
from scorer.testing import make_pod

PODS = 8
PRIORITIES = (-5, 0, 0, 7)  # two equal on purpose: more ties for the timestamp and insertion order
POD = {(number, priority): make_pod(f"p{number}", priority=priority)
       for number in range(PODS) for priority in PRIORITIES}
NODE_ADD = ClusterEvent("Node", "Add")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def predicate_less(a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
    """PrioritySort's ``less`` as a plain function: the queue cannot tell it from a custom plugin's."""
    return PrioritySort().less(a, b)


class LaterFirst(PrioritySort):
    """A subclass with its own ``less``: not the built-in order, so it must not get the built-in key."""

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        return a.timestamp > b.timestamp


def entry(priority: int, timestamp: float, seq: int) -> ActiveEntry:
    info = QueuedPodInfo(make_pod("p", priority=priority), timestamp=timestamp)
    return ActiveEntry(info.key, info, seq)


def test_the_builtin_prioritysort_ranks_by_key_tuples_and_other_plugins_by_their_less() -> None:
    assert active_rank(PrioritySort().less)(entry(3, 1.5, 9)) == (-3, 1.5, 9)
    assert not isinstance(active_rank(predicate_less)(entry(3, 1.5, 9)), tuple)
    later_first = active_rank(LaterFirst().less)
    assert not isinstance(later_first(entry(3, 1.5, 9)), tuple)
    assert later_first(entry(0, 2.0, 1)) < later_first(entry(9, 1.0, 0))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, PODS - 1), st.integers(0, len(PRIORITIES) - 1)),
                min_size=2, max_size=2),
       st.floats(0, 2), st.floats(0, 2), st.integers(0, 1))
def test_sort_key_orders_as_less(pods: list[tuple[int, int]], first_time: float, second_time: float,
                                 equal_time: int) -> None:
    a, b = (QueuedPodInfo(POD[number, PRIORITIES[p]], timestamp=t)
            for (number, p), t in zip(pods, (first_time, first_time if equal_time else second_time), strict=True))
    less = PrioritySort().less
    assert less(a, b) == (sort_key(a) < sort_key(b))
    assert (not less(a, b) and not less(b, a)) == (sort_key(a) == sort_key(b))


OPS = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "delete", "pop", "fail", "error", "event", "flush"]),
        st.integers(0, PODS - 1),  # pod
        st.integers(0, len(PRIORITIES) - 1),  # priority
        st.sampled_from([0.0, 0.0, 0.5, 3.0]),  # clock step: 0 gives equal timestamps
    ),
    max_size=80,
)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_key_path_and_predicate_path_agree(ops: list[tuple[str, int, int, float]]) -> None:
    """Adds, priority updates, deletes, pops that end bound, unschedulable or in error (backoff),
    cluster events and backoff flushes: the same answers, pops and layout on both paths."""
    clock = Clock()
    queues = [SchedulingQueue(less, clock=clock, plugin_events={"Fit": [NODE_ADD]})
              for less in (PrioritySort().less, predicate_less)]
    popped: list[list[QueuedPodInfo]] = [[], []]
    priorities: dict[int, int] = {}  # a pod's priority: its first one (spec.priority cannot change)
    for op, number, priority, step in ops:
        clock.now += step
        pod = POD[number, priorities.setdefault(number, PRIORITIES[priority])]
        answers: list[object] = []
        for queue, infos in zip(queues, popped, strict=True):
            if op == "add":
                answers.append(queue.add(pod))
            elif op == "update":
                answers.append(queue.update(None, pod))
            elif op == "delete":
                queue.delete(pod)
            elif op == "pop":
                info = queue.pop()
                answers.append(None if info is None else info.key)
                if info is not None:
                    infos.append(info)
            elif op in ("fail", "error") and infos:
                info = infos.pop(0)
                answers.append(queue.add_unschedulable_if_not_present(
                    info, unschedulable_plugins=() if op == "error" else ("Fit",), error=op == "error"))
                queue.done(info.key)
            elif op == "event":
                answers.append(queue.move_all_to_active_or_backoff(NODE_ADD))
            elif op == "flush":
                answers.append(queue.flush_backoff_completed())
            answers.append([(info.key, info.timestamp) for info in queue.pending_pods()])
        assert answers[:len(answers) // 2] == answers[len(answers) // 2:]
    clock.now += 3600.0  # every backoff over: the pods waiting in backoff or unschedulable go active
    for queue in queues:
        queue.move_all_to_active_or_backoff(NODE_ADD)
        queue.flush_backoff_completed()
    key_order, predicate_order = ([(info.key, info.pod.priority, info.timestamp) for info in iter(queue.pop, None)]
                                  for queue in queues)
    assert key_order == predicate_order
    assert key_order == sorted(key_order, key=lambda item: (-item[1], item[2]))


@attrs.define
class Item:
    key: str
    value: int


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["push", "remove", "fix", "pop"]), st.integers(0, 9), st.integers(0, 4)),
                max_size=80))
def test_keyed_heap_pops_in_rank_order_through_removes_and_fixes(ops: list[tuple[str, int, int]]) -> None:
    heap: KeyedHeap[Item] = KeyedHeap(lambda item: (item.value, item.key))
    model: dict[str, int] = {}
    for op, number, value in ops:
        key = f"i{number}"
        if op == "push" and key not in heap:
            heap.push(Item(key, value))
            model[key] = value
        elif op == "remove":
            removed = heap.remove(key)
            assert (removed is None) == (model.pop(key, None) is None)
        elif op == "fix" and (item := heap.get(key)) is not None:
            item.value = model[key] = value
            heap.fix(key)
        elif op == "pop" and model:
            first = min(model, key=lambda k: (model[k], k))
            assert heap.pop().key == first
            del model[first]
        assert len(heap) == len(model) and all(key in heap for key in model)
        assert all((item := heap.get(key)) is not None and item.value == value for key, value in model.items())
    assert [heap.pop().key for _ in range(len(heap))] == sorted(model, key=lambda k: (model[k], k))
