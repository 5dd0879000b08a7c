"""The binding cycle: WaitOnPermit, PreBind, Bind, PostBind for a pod already assumed.

kube-scheduler's ``bindingCycle`` and ``handleBindingCycleError``
(reference/kube-scheduler.md §8.1). It runs as its own asyncio task
(``Scheduler`` starts one per assumed pod), so a pod held at Permit or a slow
API does not hold up the scheduling of others.

On success: the ``Scheduled`` Event, the attempt counted (with the pod's
scheduling SLI and attempt count), PostBind. The cache learns of the binding
from the cluster source (the bound pod confirms the assumed one). On failure
(``SchedulingCycle.end_flight`` ends the pod's flight): Unreserve, forget the
assumed pod, an ``AssignedPodDelete`` event for the pods its resources may now
fit, and:

* a binding the cluster refused for good (a Bind plugin's
  ``BindConflictStatus``: the API's 404 or 409, the pod gone, re-created,
  being deleted or bound already) ends the pod's flight without requeueing
  it: the cluster source will show it bound, re-created or deleted. Counted
  in ``scorer_bind_results_total{result="conflict"}`` and logged at DEBUG
  only (under churn, pods deleted while being bound conflict by the
  thousand, and each is the cluster's ordinary answer, not a fault); no
  Event (the pod is not ours to report on any more); the attempt counts as
  an error;
* anything else goes through the scheduling failure handling (requeue,
  FailedScheduling Event, PodScheduled condition): a Permit rejection or
  timeout is a FitError over that one node, any other failure (5xx, 429, a
  timeout, a plugin error) an error with ``binding rejected: <message>``,
  requeued with backoff.

The Bind step's outcome is counted in ``scorer_bind_results_total{result}``
(bound, conflict, error).
"""

from __future__ import annotations

import asyncio
import collections
import logging

from scorer.cycle import NO_NODE_AVAILABLE_MSG, SCHEDULED, Attempt, CycleReport, SchedulingCycle
from scorer.framework.status import Code, Status
from scorer.metrics import BIND_BOUND, BIND_CONFLICT, BIND_ERROR
from scorer.plugins.defaultbinder import is_bind_conflict

log = logging.getLogger("scorer.binding")


class BindingSlots:
    """At most ``limit`` bindings past Permit at once; the others wait for a slot in turn.

    An asyncio.Semaphore would do, but costs three coroutines per binding; a
    free slot here is taken with two attribute updates (``try_acquire``).
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"the binding limit must be >= 1, got {limit}")
        self.limit = limit
        self.in_use = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_acquire(self) -> bool:
        if self.in_use < self.limit and not self._waiters:
            self.in_use += 1
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # release() hands its slot over
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot this binding will not use
            elif waiter in self._waiters:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.in_use -= 1


class BindingCycle:
    """Binds the Attempts of one scheduler; shares its queue, recorder and metrics (its cycle's)."""

    def __init__(self, cycle: SchedulingCycle) -> None:
        self.cycle = cycle
        self.queue = cycle.queue
        self.recorder = cycle.recorder
        self.metrics = cycle.metrics

    async def run(self, attempt: Attempt, slots: BindingSlots | None = None) -> bool:
        """Bind ``attempt``; True if the pod was bound. ``slots`` bounds the bindings past
        Permit (PreBind, Bind, PostBind: the API calls); waiting at Permit takes no slot."""
        fwk, state, pod, node = attempt.framework, attempt.state, attempt.pod, attempt.node
        if attempt.permit_wait > 0:
            waiting = fwk.handle.waiting_pods.get(pod.key)
            try:
                status = await waiting.wait(attempt.permit_wait) if waiting is not None else Status()
            finally:
                fwk.handle.waiting_pods.pop(pod.key, None)
            if not status.is_success():
                return self._failed(attempt, status)
        if slots is not None and not slots.try_acquire():
            await slots.acquire()
        try:
            status = await fwk.run_pre_bind(state, pod, node)
            pre_bind_failed = not status.is_success()
            if status.is_success():
                status = await fwk.run_bind(state, pod, node)
                if status.is_skip():
                    status = Status.error("no bind plugin bound the pod")
                if self.metrics is not None:
                    self.metrics.observe_bind(BIND_BOUND if status.is_success() else
                                              BIND_CONFLICT if is_bind_conflict(status) else BIND_ERROR)
            if not status.is_success():
                return self._failed(attempt, status, bind=not pre_bind_failed)
            attempt.bound = True
            self.queue.done(pod.key)
            self.recorder.record(pod, "Normal", "Scheduled", "Binding",
                                 f"Successfully assigned {pod.key} to {node}")
            self.cycle.observe(SCHEDULED, fwk, attempt.started)
            qpi = attempt.qpi
            if self.metrics is not None and qpi.initial_attempt_timestamp is not None:
                self.metrics.observe_scheduled(qpi.attempts, self.queue.clock() - qpi.initial_attempt_timestamp)
            await fwk.run_post_bind(state, pod, node)
        finally:
            if slots is not None:
                slots.release()
        if self.cycle.on_report is not None:
            self.cycle.report(CycleReport(pod, fwk.profile_name, attempt.result, node, SCHEDULED))
        return True

    def _failed(self, attempt: Attempt, status: Status, *, bind: bool = False, waiting: bool = False) -> bool:
        """End the pod's flight after a failure of its binding cycle (the module docstring says how);
        ``bind``: the failure is the Bind step's (kube's message then starts ``binding rejected: ``; a
        PreBind error keeps the ``running PreBind plugin`` message); ``waiting``: the pod may still wait
        at Permit."""
        result, conflict = attempt.result, is_bind_conflict(status)
        if conflict:
            ended = Status(Code.ERROR, (f"binding rejected: {status.message()}",), status.plugin)
        elif status.is_rejected():
            # A Permit rejection or timeout: kube reports it as a FitError over that one node.
            message = f"{NO_NODE_AVAILABLE_MSG.format(1)}: {status.message()}."
            result.unschedulable_plugins = frozenset({status.plugin} - {""})
            result.message = message
            ended = Status(Code.UNSCHEDULABLE, (message,), status.plugin)
        else:
            message = status.message() or "binding failed"
            ended = Status(Code.ERROR, (f"binding rejected: {message}" if bind else message,), status.plugin)
        # The forgotten pod freed its node's resources: other pods may fit there now (frees_node).
        self.cycle.end_flight(attempt.qpi, attempt.framework, result, ended, attempt.started, waiting=waiting,
                              state=attempt.state, forget=True, requeue=not conflict, frees_node=True,
                              record=not conflict)
        if conflict:
            log.debug("binding of pod %s to node %s refused (%s); not retried: the cluster shows what became of "
                      "the pod", attempt.pod.key, attempt.node, status.message())
        return False

    def crashed(self, attempt: Attempt, exc: BaseException) -> None:
        """The binding task raised (a scheduler bug, not a plugin error): undo and requeue as an error."""
        if attempt.bound:
            self.queue.done(attempt.pod.key)  # the pod is bound; the cluster source confirms it
            return
        self._failed(attempt, Status.error(f"{type(exc).__name__}: {exc}"), bind=True, waiting=True)

    def abandon(self, attempt: Attempt) -> None:
        """The binding task was cancelled (the scheduler is stopping): undo and requeue.

        No Event is recorded and no report made: the pod did not fail, the scheduler stopped.
        """
        if attempt.bound:
            self.queue.done(attempt.pod.key)
            return
        self.cycle.end_flight(attempt.qpi, attempt.framework, attempt.result, Status.error("binding cancelled"),
                              attempt.started, waiting=True, state=attempt.state, forget=True, record=False,
                              report=False)
        log.info("binding of pod %s to node %s cancelled; the pod is requeued", attempt.pod.key, attempt.node)
