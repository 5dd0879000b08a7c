"""Leader election over a ``coordination.k8s.io/v1`` Lease, as client-go's leaderelection does it.

Reference §8.2. Every replica runs a ``LeaderElector`` on the same Lease;
one leads (schedules), the others stand by with warm caches.

* A candidate tries to take the lease every ``retry_period`` (jittered by
  client-go's factor 1.2, and woken just after the lease it watches would
  expire). The lease is free when its ``holderIdentity`` is empty, or
  expired when its record (holder, times, duration, transitions) has not
  changed for the holder's ``leaseDurationSeconds`` *as observed on this
  process's monotonic clock*: the wall-clock ``renewTime`` of another host is
  written for humans and never compared.
* Writes are optimistic: ``PUT`` carries the ``resourceVersion`` last read,
  so of two candidates only one succeeds; the other gets 409 and reads
  again. A missing Lease is created (``POST``; 409 there means another
  candidate created it first).
* Taking the lease writes ``holderIdentity``, ``leaseDurationSeconds``,
  ``acquireTime``, ``renewTime`` (MicroTime, UTC) and ``leaseTransitions``
  plus one (zero when the Lease is created).
* The leader renews every ``retry_period``. When it has not renewed within
  ``renew_deadline`` of its last successful renew (every attempt is bounded by
  what is left of that deadline), or it sees another holder, it stops
  leading at once: ``is_leader`` turns false (it also checks the deadline
  itself, so a stalled event loop cannot keep it true), ``lost`` is set,
  ``on_stopped_leading`` runs and ``run()`` raises ``LeadershipLost``.
  ``renew_deadline < lease_duration`` guarantees that it has stopped before
  any other replica may consider the lease expired.
* ``release()`` (graceful shutdown, client-go's ReleaseOnCancel) stops the
  campaign and, if this process holds the lease, writes an empty holder with
  ``leaseDurationSeconds: 1`` so a standby takes over at its next attempt.
  Cancelling ``run()`` without ``release()`` behaves like a crash: the lease
  stays until it expires.

Metrics: ``scorer_leader_election_is_leader{lease}`` (1 while leading) and
``scorer_leader_election_transitions_total{lease}`` (times this process
became leader), ``lease`` being ``namespace/name``; and client-go's
``leader_election_master_status{name}`` (1 while leading, 0 otherwise; ``name``
the Lease's name, as kube-scheduler's dashboards select it), registered in the
collector registry given (the app's; without one they are kept but exported nowhere).
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs
from prometheus_client import CollectorRegistry, Counter, Gauge

from scorer.config.types import LeaderElection
from scorer.errors import ScorerError
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable

log = logging.getLogger("scorer.kube.leader")

# client-go leaderelection.JitterFactor: candidates wait retry_period * (1 + U[0, 1.2)).
JITTER_FACTOR = 1.2
# kube's NewLeaderHealthzAdaptor(20 * time.Second): how long past the lease a stuck leader stays healthy.
HEALTHZ_TOLERANCE = 20.0
RELEASE_TIMEOUT = 2.0  # seconds for the release PUT on shutdown
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"


class LeadershipLost(ScorerError):
    """This process was leading and stopped: the lease could not be renewed in time, or another took it."""


@attrs.frozen(slots=True)
class LeaseRecord:
    """The spec of a Lease as leader election reads and writes it."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Any) -> LeaseRecord:
        spec = lease.get("spec") if isinstance(lease, dict) else None
        spec = spec if isinstance(spec, dict) else {}
        return cls(holder=str(spec.get("holderIdentity") or ""),
                   lease_duration_seconds=_int(spec.get("leaseDurationSeconds")),
                   acquire_time=spec.get("acquireTime"), renew_time=spec.get("renewTime"),
                   transitions=_int(spec.get("leaseTransitions")))

    def spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.transitions}


def default_identity() -> str:
    """``<hostname>_<uuid4>``, kube-scheduler's identity: unique even for two processes on one host."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


class LeaderElector:
    """One candidate for the Lease ``namespace/name``; see the module docstring.

    ``run()`` campaigns until this process leads, then renews until cancelled
    (returns by raising ``CancelledError``) or lost (raises ``LeadershipLost``);
    it may be called again to campaign anew. Callbacks are plain callables run
    on the event loop: ``on_started_leading()``, ``on_stopped_leading()`` (only
    after leading), ``on_new_leader(identity)`` (a different holder observed,
    this process included).
    """

    def __init__(self, client: ApiClient, *, namespace: str, name: str, identity: str | None = None,
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 collector_registry: CollectorRegistry | None = None,
                 on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 rng: random.Random | None = None) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError(f"leaseDuration ({lease_duration}s) must be greater than renewDeadline "
                             f"({renew_deadline}s)")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"renewDeadline ({renew_deadline}s) must be greater than retryPeriod*JitterFactor "
                             f"({retry_period}s * {JITTER_FACTOR})")
        if retry_period <= 0:
            raise ValueError(f"retryPeriod must be greater than zero, got {retry_period}")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity or default_identity()
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.lost = asyncio.Event()  # set when leadership was lost (not on cancel or release)
        self._clock = clock
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._lease: dict[str, Any] | None = None  # the object last read or written (its resourceVersion)
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0  # monotonic time the observed record last changed
        self._renewed_at = 0.0  # monotonic start of the last successful acquire or renew
        self._leading = False
        self._led = asyncio.Event()
        self._reported_leader: str | None = None
        self._last_error: str | None = None
        self._task: asyncio.Task[None] | None = None
        lease = f"{namespace}/{name}"
        self._is_leader_gauge = Gauge("scorer_leader_election_is_leader",
                                      "1 while this process holds the leader-election lease, else 0.",
                                      ["lease"], registry=collector_registry).labels(lease)
        self._transitions = Counter("scorer_leader_election_transitions",
                                    "Times this process became leader of the lease.",
                                    ["lease"], registry=collector_registry).labels(lease)
        self._master_status = Gauge("leader_election_master_status",
                                    "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
                                    "backup, 1 indicates master. 'name' is the string used to identify the lease. "
                                    "Please make sure to group by name.",
                                    ["name"], registry=collector_registry).labels(name)
        self._is_leader_gauge.set(0)

    @classmethod
    def from_config(cls, client: ApiClient, config: LeaderElection, *, identity: str | None = None,
                    collector_registry: CollectorRegistry | None = None, **kwargs: Any) -> LeaderElector:
        """An elector for the ``leaderElection`` block of the scheduler configuration."""
        return cls(client, namespace=config.resource_namespace, name=config.resource_name, identity=identity,
                   lease_duration=config.lease_duration.total_seconds(),
                   renew_deadline=config.renew_deadline.total_seconds(),
                   retry_period=config.retry_period.total_seconds(), collector_registry=collector_registry, **kwargs)

    # --- state -------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """True while leading and within ``renew_deadline`` of the last successful renew."""
        return self._leading and self._clock() - self._renewed_at < self.renew_deadline

    @property
    def holder(self) -> str:
        """The holder identity last observed ("" when free or not read yet)."""
        return self._observed.holder if self._observed is not None else ""

    async def wait_until_leader(self) -> None:
        """Return once this process leads (at once if it does)."""
        await self._led.wait()

    def healthy(self) -> bool:
        """For the watchdog: false only when this process believes it leads but its renewals stopped
        for longer than the lease plus 20 s (kube's leader healthz adaptor)."""
        return not (self._leading and self._clock() - self._renewed_at > self.lease_duration + HEALTHZ_TOLERANCE)

    def state(self) -> str:
        """``leader``, ``lost``, ``standby (holder: X)`` or ``standby`` (for /healthz?verbose)."""
        if self._leading:  # past the renew deadline while the renew loop has not run: no longer leading
            return "leader" if self.is_leader else "lost"
        if self.lost.is_set():
            return "lost"
        holder = self.holder
        return f"standby (holder: {holder})" if holder and holder != self.identity else "standby"

    # --- the campaign ------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, then lead until cancelled or lost (``LeadershipLost``)."""
        self._task = asyncio.current_task()
        try:
            await self._acquire()
            self._start_leading()
            await self._renew()
        finally:
            if self._leading:
                self._stop_leading()

    async def _acquire(self) -> None:
        while True:
            if await self._attempt(self.renew_deadline):
                return
            await self._sleep(self._candidate_delay())

    def _candidate_delay(self) -> float:
        delay = self.retry_period * (1.0 + self._rng.random() * JITTER_FACTOR)
        if self._observed is not None and self._observed.holder and self._observed.holder != self.identity:
            # Wake just after the watched lease would expire rather than up to a jittered period later.
            until_expiry = self._expires_at() - self._clock()
            if until_expiry > 0:
                delay = min(delay, until_expiry + self._rng.random() * 0.1 * self.retry_period)
        return delay

    async def _renew(self) -> None:
        while True:
            remaining = self._renewed_at + self.renew_deadline - self._clock()
            await self._sleep(max(0.0, min(self.retry_period, remaining)))
            remaining = self._renewed_at + self.renew_deadline - self._clock()
            if remaining <= 0:
                self._lose(f"not renewed within renewDeadline ({self.renew_deadline:g}s)"
                           + (f"; last error: {self._last_error}" if self._last_error else ""))
            if await self._attempt(remaining):
                continue
            if self.holder != self.identity:
                self._lose(f"the lease is now held by {self.holder or 'nobody'}")

    async def _attempt(self, timeout: float) -> bool:
        """One ``try_acquire_or_renew`` bounded by ``timeout``; failures are logged once per kind."""
        try:
            async with asyncio.timeout(timeout):
                return await self.try_acquire_or_renew()
        except TimeoutError:
            self._error("no answer in time")
        except ApiUnavailable as error:
            self._error(str(error))
        return False

    async def try_acquire_or_renew(self) -> bool:
        """Take or renew the lease once (client-go's tryAcquireOrRenew); True when this process holds it."""
        now = self._clock()
        stamp = _micro_time()
        if self._holds() and self._lease is not None and now < self._expires_at():
            # Fast path: renew the object last written; a 409 means someone else wrote it: read it.
            mine = self._observed
            assert mine is not None
            record = attrs.evolve(mine, lease_duration_seconds=self._lease_seconds(), renew_time=stamp)
            response = await self.client.request("PUT", f"{self._path}/{self.name}",
                                                 body=self._lease_body(record))
            if response.status == 200:
                self._succeeded(record, response, now)
                return True
            if response.status != 409:
                self._error(f"renewing: HTTP {response.status}: {response.reason()}")
        response = await self.client.request("GET", f"{self._path}/{self.name}")
        if response.status == 404:
            record = LeaseRecord(self.identity, self._lease_seconds(), stamp, stamp, 0)
            response = await self.client.request("POST", self._path, body={
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.spec()})
            if response.status == 201:
                self._succeeded(record, response, now)
                return True
            if response.status != 409:  # 409: another candidate created it first
                self._error(f"creating: HTTP {response.status}: {response.reason()}")
            return False
        if response.status != 200:
            self._error(f"reading: HTTP {response.status}: {response.reason()}")
            return False
        self._lease = response.json()
        self._observe(LeaseRecord.from_lease(self._lease), now)
        if self.holder and not self._holds() and now < self._expires_at():
            return False  # held by another and not expired
        observed = self._observed
        assert observed is not None
        if self._holds():
            record = LeaseRecord(self.identity, self._lease_seconds(), observed.acquire_time, stamp,
                                 observed.transitions)
        else:
            record = LeaseRecord(self.identity, self._lease_seconds(), stamp, stamp, observed.transitions + 1)
        response = await self.client.request("PUT", f"{self._path}/{self.name}", body=self._lease_body(record))
        if response.status == 200:
            self._succeeded(record, response, now)
            return True
        if response.status != 409:  # 409: another candidate wrote it since we read it
            self._error(f"updating: HTTP {response.status}: {response.reason()}")
        return False

    async def release(self) -> bool:
        """Stop campaigning and, if this process holds the lease, hand it over at once (empty holder,
        ``leaseDurationSeconds: 1``). Errors are logged; returns whether the lease was released."""
        task = self._task
        if task is not None and task is not asyncio.current_task() and not task.done():
            task.cancel()
            await asyncio.wait([task])
        if self._leading:
            self._stop_leading()
        if not self._holds() or self._lease is None:
            return False
        observed = self._observed
        assert observed is not None
        stamp = _micro_time()
        record = LeaseRecord("", 1, stamp, stamp, observed.transitions)
        try:
            async with asyncio.timeout(min(RELEASE_TIMEOUT, self.renew_deadline)):
                response = await self.client.request("PUT", f"{self._path}/{self.name}",
                                                     body=self._lease_body(record))
                if response.status == 409:  # written since: a renew cut short by the cancel, or another holder
                    current = await self.client.request("GET", f"{self._path}/{self.name}")
                    if current.status == 200:
                        self._lease = current.json()
                        self._observe(LeaseRecord.from_lease(self._lease), self._clock())
                        if not self._holds():
                            log.info("lease %s/%s is held by %s: nothing to release", self.namespace,
                                     self.name, self.holder or "nobody")
                            return False
                        response = await self.client.request("PUT", f"{self._path}/{self.name}",
                                                             body=self._lease_body(record))
        except (TimeoutError, ApiUnavailable) as error:
            log.warning("releasing lease %s/%s failed: %s", self.namespace, self.name,
                        str(error) or "timed out")
            return False
        if response.status != 200:
            log.warning("releasing lease %s/%s failed: HTTP %d: %s", self.namespace, self.name, response.status,
                        response.reason())
            return False
        self._lease = response.json()
        self._observe(record, self._clock())
        log.info("released lease %s/%s", self.namespace, self.name)
        return True

    # --- helpers -----------------------------------------------------------------------------------

    def _lease_seconds(self) -> int:
        return max(1, round(self.lease_duration))

    def _holds(self) -> bool:
        return self._observed is not None and self._observed.holder == self.identity

    def _expires_at(self) -> float:
        observed = self._observed
        seconds = observed.lease_duration_seconds if observed and observed.lease_duration_seconds > 0 else None
        return self._observed_at + (seconds if seconds is not None else self.lease_duration)

    def _lease_body(self, record: LeaseRecord) -> dict[str, Any]:
        lease = dict(self._lease or {})
        lease.update(apiVersion="coordination.k8s.io/v1", kind="Lease")
        lease["spec"] = {**(lease.get("spec") or {}), **record.spec()}
        return lease

    def _observe(self, record: LeaseRecord, now: float) -> None:
        if record != self._observed:
            self._observed = record
            self._observed_at = now
        if record.holder and record.holder != self._reported_leader:
            self._reported_leader = record.holder
            if record.holder != self.identity:
                log.info("lease %s/%s: new leader observed: %s", self.namespace, self.name, record.holder)
            if self.on_new_leader is not None:
                _call(self.on_new_leader, record.holder)

    def _succeeded(self, record: LeaseRecord, response: ApiResponse, now: float) -> None:
        self._lease = response.json()
        self._observe(record, now)
        self._renewed_at = now
        self._last_error = None

    def _error(self, message: str) -> None:
        if message != self._last_error:
            log.warning("lease %s/%s: %s (retrying)", self.namespace, self.name, message)
        self._last_error = message

    def _start_leading(self) -> None:
        self._leading = True
        self.lost.clear()
        self._led.set()
        self._is_leader_gauge.set(1)
        self._master_status.set(1)
        self._transitions.inc()
        log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
        if self.on_started_leading is not None:
            _call(self.on_started_leading)

    def _stop_leading(self) -> None:
        self._leading = False
        self._led.clear()
        self._is_leader_gauge.set(0)
        self._master_status.set(0)
        if self.on_stopped_leading is not None:
            _call(self.on_stopped_leading)

    def _lose(self, why: str) -> None:
        self.lost.set()
        log.error("lost lease %s/%s: %s", self.namespace, self.name, why)
        self._stop_leading()
        raise LeadershipLost(f"leader election lost (lease {self.namespace}/{self.name}): {why}")


def _micro_time() -> str:
    return datetime.datetime.now(datetime.UTC).strftime(MICRO_TIME)


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _call(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception:
        log.exception("leader election callback %s failed", getattr(callback, "__qualname__", callback))
