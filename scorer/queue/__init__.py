"""The scheduling queue: kube-scheduler's PriorityQueue, without threads.

Pending pods live in exactly one of four pools (kube's names in brackets):

* **active** [activeQ] -- a heap ordered by the queue-sort plugin's ``less``
  (PrioritySort: higher priority first, then earlier ``timestamp``); equal
  pods keep insertion order. ``pop`` takes from here.
* **backoff** [podBackoffQ] -- pods that failed recently and may be retried
  once their backoff expires; a heap ordered by expiry. Expired pods move to
  active when ``flush_backoff_completed`` runs (every second from ``run``) or
  when ``pop`` finds the active pool empty.
* **unschedulable** [unschedulablePods] -- pods that failed and wait for a
  cluster event that one of their rejector plugins registered interest in,
  or for ``max_in_unschedulable`` (5 minutes) to pass.
* **gated** [unschedulablePods with Gated=true] -- pods a PreEnqueue plugin
  rejected (``pre_enqueue`` returned its name), such as pods with
  ``schedulingGates``. PreEnqueue runs on every insertion into active. Gated
  pods ignore cluster events and the 5-minute flush; they leave only through
  ``update`` or ``activate`` once ``pre_enqueue`` admits them.

Popped pods are *in flight* until ``add_unschedulable_if_not_present`` or
``done``. Cluster events seen while a pod is in flight are remembered, so a
pod that fails just after the event that would have helped it is retried
after backoff instead of waiting in the unschedulable pool.

Everything is synchronous and takes the time from the injected ``clock``,
except ``pop_wait`` and ``run``, which need a running asyncio loop.
Facts: reference/kube-scheduler.md §4.

Memory: every per-pod entry leaves with its pod (``delete``, ``done``), the
events remembered for in-flight pods are capped, and ``run`` hands freed
memory back to the system once churn is over (``scorer.queue.quiet``).

The modules:

* ``priority`` -- ``SchedulingQueue`` itself: the pools and the moves between
  them, the flushes of ``run``;
* ``pools`` -- the pool names, the keyed heap under active and backoff, their entries and ranks;
* ``flight`` -- what is remembered of an in-flight pod, and the cluster events
  received during flights;
* ``nominator`` -- the ``Nominator`` of preempting pods;
* ``quiet`` -- the quiet-spell memory hook.
"""

from scorer.queue.flight import MAX_IN_FLIGHT_EVENTS
from scorer.queue.nominator import Nominator
from scorer.queue.pools import ACTIVE, BACKOFF, GATED, IN_FLIGHT, QUEUE_EVENT_POOLS, UNSCHEDULABLE
from scorer.queue.priority import SchedulingQueue
from scorer.queue.quiet import MAX_RELEASES, RELEASE_AFTER_CHANGES

__all__ = [
    "ACTIVE",
    "BACKOFF",
    "GATED",
    "IN_FLIGHT",
    "MAX_IN_FLIGHT_EVENTS",
    "MAX_RELEASES",
    "QUEUE_EVENT_POOLS",
    "RELEASE_AFTER_CHANGES",
    "UNSCHEDULABLE",
    "Nominator",
    "SchedulingQueue",
]
