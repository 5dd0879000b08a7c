"""The Scheduler and its loop: pop a pod, run its scheduling cycle, bind it in a task.

``Scheduler.run`` is kube-scheduler's ``ScheduleOne`` loop on asyncio: it
pops pods with the queue's ``pop_wait``, runs the synchronous scheduling
cycle (``scorer.cycle``) for each, and starts the binding cycle
(``scorer.binding``) of each assumed pod as a named task ``bind:<ns>/<name>``.
Bindings run concurrently with each other and with the loop, so a pod held
at Permit or a slow API does not hold up the others. The loop yields to them
(and to I/O) once per ``yield_interval`` of scheduling (5 ms), not after every
cycle: an event-loop turn per pod would cost more than the in-memory bind.
``schedule_one`` is one turn of the loop, for drivers that keep their own
time (simulate, the bench, tests); ``maybe_yield`` is the loop's yield.

Background work started and stopped by ``run``, on a ``scorer.tasks.Supervisor``
(not restarted): the queue's flushes (``SchedulingQueue.run``, the task
``queue-flush``: expired backoff every second, leftover unschedulable pods every
30 s) and the event recorder's drain (``event-recorder``). A crash of one of
them, or its return before ``stop``, is logged with the task's name, named by
``failure`` and makes ``healthy`` false.
The driver runs the rest: the cluster source feeding the event handlers
(``ClusterSource.run(assembly.handlers)``, synced before ``run``) and the
metric sources (``assembly.sources``).

Fencing: ``fence`` (the service sets the leader elector's ``is_leader`` when
leader election is on) is asked before each scheduling cycle; while it
answers False no cycle starts and a pod popped meanwhile goes back to the
queue untouched (its writes would be refused anyway: the API client asks the
same fence before each write). A replica whose lease ran out while it was
paused thus schedules nothing on its stale cache before its elector notices
and the service stops it.

Stopping (``await stop()``): the loop ends after its current turn, binding
tasks get ``stop_grace`` seconds to finish, the rest are cancelled (a
cancelled binding forgets its assumed pod and requeues it), then the
background tasks are cancelled and the recorder is flushed. Nothing popped
is lost: every pod ends bound, requeued, or dropped because it was deleted.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from scorer.binding import BindingCycle, BindingSlots
from scorer.cache import ClusterCache
from scorer.cluster.interface import EventRecorder
from scorer.cycle import SKIPPED, Attempt, CycleReport, ScheduleAlgorithm, ScheduleResult, SchedulingCycle
from scorer.framework.cycle_state import CycleState
from scorer.framework.runtime import Framework
from scorer.framework.status import Status
from scorer.framework.types import QueuedPodInfo
from scorer.metrics import SchedulerMetrics
from scorer.model import Pod
from scorer.queue import SchedulingQueue
from scorer.tasks import Supervisor

log = logging.getLogger("scorer.scheduler")

# Bindings past Permit at once (PreBind, Bind, PostBind: the API calls). Pods waiting at
# Permit take no slot, so a gang larger than this still gathers. kube has no limit
# (a goroutine each); this keeps a slow API from collecting thousands of open requests.
# The end-to-end bench, 1,000 nodes: 16 slots bound 508-582 pods/s with attempts waiting ~300 ms for a
# slot; 64 bound 713-834 pods/s with attempts of ~25 ms.
DEFAULT_MAX_CONCURRENT_BINDINGS = 64
# The loop wakes at least this often when the queue is empty, to beat its heartbeat.
DEFAULT_POP_TIMEOUT = 1.0
# How long ``stop`` lets binding tasks finish before cancelling them.
DEFAULT_STOP_GRACE = 10.0
# Seconds of scheduling between two yields of the loop to binding tasks and I/O.
DEFAULT_YIELD_INTERVAL = 0.005
# While fenced (the lease ran out), the loop looks again this often (until the service stops it).
FENCED_POLL = 0.05

BINDING = "binding"  # ScheduleOneResult.outcome: assumed, its binding task started


@attrs.frozen(slots=True)
class ScheduleOneResult:
    """What one turn of the loop did with the pod it popped.

    ``outcome``: ``binding`` (assumed on ``node``; ``binding`` is the task of
    its binding cycle, whose result says whether the pod was bound),
    ``unschedulable`` or ``error`` (requeued; ``message`` says why), or
    ``skipped`` (being deleted, or already assumed or bound). ``seconds`` is
    the duration of the synchronous scheduling cycle (the pop and the start
    of the binding task excluded).
    """

    pod: Pod
    profile: str
    outcome: str
    node: str | None = None
    message: str = ""
    binding: asyncio.Task[bool] | None = None
    attempt: Attempt | None = None
    seconds: float = 0.0


class Scheduler:
    """Owns the scheduling loop. Built by ``scorer.assembly.assemble``.

    ``metrics`` gets one ``observe_attempt`` per attempt (and the algorithm,
    bind and SLI observations of the cycles), and reads the queue's pending
    counts, the cache's sizes and the bindings in flight when scraped
    (``SchedulerMetrics.watch``); ``on_report`` gets one CycleReport per
    attempt. Time in the queue (backoff, the SLI) follows the queue's clock.
    """

    def __init__(
        self,
        cache: ClusterCache,
        frameworks: Mapping[str, Framework],
        queue: SchedulingQueue,
        recorder: EventRecorder,
        *,
        percentage_of_nodes_to_score: int = 0,
        rng: random.Random | None = None,
        on_report: Callable[[CycleReport], None] | None = None,
        metrics: SchedulerMetrics | None = None,
        max_concurrent_bindings: int = DEFAULT_MAX_CONCURRENT_BINDINGS,
        pop_timeout: float = DEFAULT_POP_TIMEOUT,
        stop_grace: float = DEFAULT_STOP_GRACE,
        yield_interval: float = DEFAULT_YIELD_INTERVAL,
    ) -> None:
        if max_concurrent_bindings < 1:
            raise ValueError(f"max_concurrent_bindings must be >= 1, got {max_concurrent_bindings}")
        if pop_timeout <= 0:
            raise ValueError(f"pop_timeout must be > 0 seconds, got {pop_timeout}")
        if yield_interval < 0:
            raise ValueError(f"yield_interval must be >= 0 seconds, got {yield_interval}")
        self.cache = cache
        self.frameworks = dict(frameworks)
        self.queue = queue
        self.recorder = recorder
        self.metrics = metrics
        self.algorithm = ScheduleAlgorithm(cache, percentage_of_nodes_to_score=percentage_of_nodes_to_score, rng=rng)
        self.cycle = SchedulingCycle(cache, queue, recorder, self.algorithm, metrics=metrics, on_report=on_report)
        self.binding = BindingCycle(self.cycle)
        for fwk in self.frameworks.values():  # what preemption and the nominated-pods pass use
            fwk.handle.nominator = queue.nominator
            fwk.handle.recorder = recorder
            fwk.handle.rng = self.algorithm.rng
        self.pop_timeout = pop_timeout
        self.stop_grace = stop_grace
        self.yield_interval = yield_interval
        self._last_yield = 0.0
        self.fence: Callable[[], bool] | None = None  # asked before each cycle: False, no cycle starts
        self._fenced = False  # the fence said False (logged once)
        self.heartbeat = 0.0  # time.monotonic() of the loop's last turn
        self._background = Supervisor(log=log)  # the queue's flushes, the recorder's drain
        self._binding_slots = BindingSlots(max_concurrent_bindings)
        self._bindings: set[asyncio.Task[bool]] = set()  # done ones are pruned now and then
        self._prune_at = 64
        self._running = False
        self._stopping = False
        self._idle = False  # the loop waits in pop_wait
        self._stop_cancel = False  # stop() cancelled the idle loop to wake it
        self._grace = stop_grace
        self._loop_task: asyncio.Task[Any] | None = None
        self._stopped: asyncio.Event | None = None
        if metrics is not None:  # the state gauges, read when /metrics is scraped
            metrics.watch(pending=queue.pending_counts, cache_sizes=cache.sizes,
                          bindings=lambda: len(self.binding_tasks))

    def bindings_under_way(self) -> bool:
        """Whether a binding is past Permit and not done (the recorder's Events yield to them)."""
        return self._binding_slots.in_use > 0

    # -- the algorithm, for explain and tests ---------------------------------------
    def schedule_pod(self, fwk: Framework, state: CycleState, pod: Pod, *, evaluate_all: bool = False,
                     score_all: bool = False) -> ScheduleResult:
        """One run of the scheduling algorithm (``ScheduleAlgorithm.schedule_pod``), nothing assumed."""
        return self.algorithm.schedule_pod(fwk, state, pod, evaluate_all=evaluate_all, score_all=score_all)

    @property
    def next_start_node_index(self) -> int:
        return self.algorithm.next_start_node_index

    # -- one turn -------------------------------------------------------------------
    def schedule_one(self) -> ScheduleOneResult | None:
        """Pop one pod if any is active, run its scheduling cycle, and start its binding
        cycle as a task. None if no pod was active. Needs a running event loop."""
        qpi = self.queue.pop()
        return None if qpi is None else self._schedule(qpi)

    def _schedule(self, qpi: QueuedPodInfo) -> ScheduleOneResult:
        pod = qpi.pod
        fwk = self.frameworks.get(pod.scheduler_name)
        if fwk is None:  # the event handlers queue only pods of our profiles
            self.queue.done(pod.key)
            return ScheduleOneResult(pod, "", SKIPPED, message=f"no profile {pod.scheduler_name!r}")
        started = time.perf_counter()
        try:
            outcome = self.cycle.run(qpi, fwk)
        except Exception as exc:  # plugin errors are statuses; this is a scheduler bug
            log.exception("scheduling cycle of pod %s crashed", pod.key)
            outcome = self._cycle_crashed(qpi, fwk, exc)
        seconds = time.perf_counter() - started
        if isinstance(outcome, CycleReport):
            return ScheduleOneResult(pod, fwk.profile_name, outcome.outcome, message=outcome.message, seconds=seconds)
        task = self._start_binding(outcome)
        return ScheduleOneResult(pod, fwk.profile_name, BINDING, outcome.node, binding=task, attempt=outcome,
                                 seconds=seconds)

    def _cycle_crashed(self, qpi: QueuedPodInfo, fwk: Framework, exc: Exception) -> CycleReport:
        """End the flight of a pod whose scheduling cycle raised, wherever it stopped (no Unreserve:
        whether Reserve ran is not known)."""
        result = ScheduleResult(pod=qpi.pod, profile=fwk.profile_name, num_all_nodes=len(self.cache.table),
                                status=Status())
        return self.cycle.end_flight(qpi, fwk, result, Status.error(f"{type(exc).__name__}: {exc}"),
                                     self.cycle.timer(), waiting=True, forget=True)

    # -- binding tasks --------------------------------------------------------------
    @property
    def binding_tasks(self) -> frozenset[asyncio.Task[bool]]:
        """The binding cycles in flight."""
        return frozenset(task for task in self._bindings if not task.done())

    def _start_binding(self, attempt: Attempt) -> asyncio.Task[bool]:
        name = f"bind:{attempt.pod.key}"
        task = asyncio.get_running_loop().create_task(self._bind(attempt, name), name=name)
        if len(self._bindings) >= self._prune_at:  # cheaper than a done callback per task
            self._bindings = set(self.binding_tasks)
            self._prune_at = max(64, 2 * len(self._bindings))
        self._bindings.add(task)
        return task

    async def _bind(self, attempt: Attempt, name: str) -> bool:
        """A binding task: never ends with an exception other than its cancellation."""
        try:
            return await self.binding.run(attempt, self._binding_slots)
        except asyncio.CancelledError:
            self._guarded(name, self.binding.abandon, attempt)
            raise
        except Exception as exc:
            log.exception("binding task %s crashed; the pod is requeued", name)
            self._guarded(name, self.binding.crashed, attempt, exc)
            return False

    def _guarded(self, name: str, handler: Callable[..., None], attempt: Attempt, *args: Any) -> None:
        """Run a binding task's clean-up; if that fails too, still end the pod's flight: forgotten and
        requeued, nothing else (what failed may be anything the clean-up does)."""
        try:
            handler(attempt, *args)
        except Exception as exc:
            log.exception("cleaning up binding task %s failed", name)
            self.cycle.end_flight(attempt.qpi, attempt.framework, attempt.result,
                                  Status.error(f"{type(exc).__name__}: {exc}"), attempt.started, forget=True,
                                  record=False, observe=False, report=False)

    async def wait_for_bindings(self) -> None:
        """Wait until every binding task started so far has ended."""
        while pending := self.binding_tasks:
            await asyncio.wait(pending)

    async def maybe_yield(self) -> None:
        """Yield to the event loop (binding tasks, I/O) if ``yield_interval`` seconds
        passed since the last yield; the loop calls it after every turn."""
        now = time.monotonic()
        if now - self._last_yield >= self.yield_interval:
            self._last_yield = now
            await asyncio.sleep(0)

    # -- the loop -------------------------------------------------------------------
    async def run(self) -> None:
        """Schedule pods until ``stop`` (or cancellation; then bindings are cancelled at once).

        A Scheduler runs once: after ``stop`` (even one called before ``run``
        started), ``run`` returns at once.
        """
        if self._running:
            raise RuntimeError("Scheduler.run is already running")
        if self._stopping:
            return
        self._running = True
        self._stopped = asyncio.Event()
        self._loop_task = asyncio.current_task()
        self._background.start("queue-flush", self.queue.run, restart=False, until_stop=True)
        self._background.start("event-recorder", self.recorder.run, restart=False, until_stop=True)
        try:
            while not self._stopping:
                self.heartbeat = time.monotonic()
                if not self._may_schedule():
                    await asyncio.sleep(FENCED_POLL)
                    continue
                qpi = self.queue.pop()
                if qpi is None:
                    qpi = await self._wait_for_pod()
                if qpi is not None:
                    if self._may_schedule():
                        self._schedule(qpi)
                    else:  # fenced while waiting for it: back to the queue, untouched
                        self.queue.add_unschedulable_if_not_present(qpi, unschedulable_plugins=(), error=True)
                        self.queue.done(qpi.pod.key)
                await self.maybe_yield()
            await self._drain(self._grace)
        finally:
            await self._cancel_bindings()
            await self._background.stop()
            try:
                async with asyncio.timeout(self.stop_grace):
                    await self.recorder.flush()
            except TimeoutError:
                log.warning("the event recorder did not drain within %.1fs; %s", self.stop_grace,
                            "unwritten events are dropped")
            self._running = False
            self._loop_task = None
            self._stopped.set()

    def _may_schedule(self) -> bool:
        if self.fence is None or self.fence():
            return True
        if not self._fenced:
            self._fenced = True
            log.warning("this process does not hold the leader lease (its renew deadline passed): no scheduling "
                        "cycle starts")
        return False

    async def _wait_for_pod(self) -> QueuedPodInfo | None:
        task = asyncio.current_task()
        self._idle = True
        try:
            return await self.queue.pop_wait(self.pop_timeout)
        except asyncio.CancelledError:
            if not (self._stop_cancel and task is not None):
                raise
            self._stop_cancel = False
            if task.uncancel() > 0:  # cancelled from outside as well
                raise
            return None
        finally:
            self._idle = False
            # wait_for (Python 3.11) can swallow a cancellation that races its wake-up.
            if self._stop_cancel and task is not None and task.cancelling():
                self._stop_cancel = False
                task.uncancel()

    async def stop(self, grace: float | None = None) -> None:
        """End the loop; let binding tasks finish for ``grace`` seconds (default
        ``stop_grace``), then cancel them. Without a running loop, only drains the
        bindings that ``schedule_one`` started and flushes the recorder."""
        grace = self.stop_grace if grace is None else grace
        self._stopping = True
        if not self._running or self._stopped is None:
            await self._drain(grace)
            await self._cancel_bindings()
            await self.recorder.flush()
            return
        self._grace = grace
        if self._idle and self._loop_task is not None and not self._stop_cancel:
            self._stop_cancel = True
            self._loop_task.cancel()
        await self._stopped.wait()

    async def _drain(self, grace: float) -> None:
        if pending := self.binding_tasks:
            await asyncio.wait(pending, timeout=grace)

    async def _cancel_bindings(self) -> None:
        while pending := self.binding_tasks:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        self._bindings.clear()

    # -- liveness -------------------------------------------------------------------
    def healthy(self, max_silence: float) -> bool:
        """For ``/livez``: the loop runs, turned at most ``max_silence`` seconds ago
        (it turns at least every ``pop_timeout`` when idle), and no background task died."""
        return self._running and self.failure is None and time.monotonic() - self.heartbeat <= max_silence

    @property
    def failure(self) -> str | None:
        """The background task that died first (``NAME: ExceptionType: message``, or ``NAME: ended``
        for one that returned), or None."""
        return self._background.failure

