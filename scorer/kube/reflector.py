"""A reflector: one resource of the API server listed, then watched, into ``ObjectHandlers``.

``Reflector`` keeps one resource of ``scorer.kube.apiresources``
(``RESOURCES``: its path, kind and decoder) in step with the API server, as
client-go's reflector and informer do (reference ``kubernetes-api-client.md``
§4):

* **List.** A paginated LIST (``limit``, ``continue``; a continue token that
  expired is answered with one full LIST, as client-go's pager does), with
  the cyclic GC paused (a cache of many small objects costs seconds of
  collections otherwise; ``gc.freeze()`` after the first list keeps them out
  of later collections). The list is then delivered against the reflector's
  own store: an add for a new object, an update when the resourceVersion
  changed, a delete for an object that is gone. The first list is all adds.

  The first list asks for ``resourceVersion=0``, as client-go's reflector
  does: the API server answers from its watch cache, at once and in one page
  (it ignores ``limit`` there), where a list from etcd takes a round trip and
  a quorum read per page; re-lists read etcd, paginated (``list_from_cache``
  False makes the first one do so too). Each page is decoded item by item as
  it arrives (``scorer.kube.listing``), so decoding overlaps the transfer;
  each item's JSON is dropped as soon as it is decoded, so a list
  is not held twice. Items are delivered in key order, as etcd lists them
  (the watch cache answers in no order).

  The first list of a resource with ``deferrable`` (the pods) delivers the
  objects it names (pods that only wait to be scheduled) after the sync,
  decoded and delivered ``DEFERRED_CHUNK`` at a time in its order (the
  highest priorities first) with the event loop free between chunks: the
  scheduler, which starts at the sync, places the first pods while the rest
  of a backlog is still being decoded, instead of after all of it (about
  50 us of decoding per pod). Everything that decides where a pod fits
  (nodes, bound pods, nominated pods) is delivered before the sync, as
  before; a waiting pod delivered a little later is what a pod created a
  little later would be. The watch starts once every deferred object is
  delivered.
* **Watch** from the list's resourceVersion (``allowWatchBookmarks``,
  ``timeoutSeconds`` with a ±10 % jitter), tracking the resourceVersion of
  every event and bookmark. A watch that ends at its timeout is renewed at
  once from the last resourceVersion. Events are read in batches while they
  keep coming (``watch_coalesce``, 5 ms: once an event is read, the socket is
  not read again for that long): an event after a quiet spell is read at
  once, one in a stream at most 5 ms late, and a burst costs one wake-up of
  the event loop and one TLS read instead of one per event (kube-scheduler
  as its extender's caller binds a pod every few ms, each a watch event:
  reading them one by one cost scorer about a tenth of its CPU per pod).
  A service that only answers as kube-scheduler's extender (``--no-scheduling``)
  holds for 20 ms (``EXTENDER_WATCH_COALESCE``): nothing waits on its watch
  but the plugins' view of the pods kube-scheduler binds, which reaches it
  only after kube-scheduler's own binding round trip anyway, and its CPU per
  pod falls by about a fifth more (``bench/README.md``).
* **Faults**, each with its own wait (``RetryDelays``), as client-go's
  reflector does:

  - *The API server unreachable* (refused, reset, timed out: ``ApiUnavailable``;
    a 5xx; a watch that closed before it delivered anything): tried again
    after the *connection backoff*, 0.2 s doubling to a small cap of 2 s
    (jittered), keeping the resourceVersion: a watch resumes where it was, a
    list is tried again. After an outage of any length every reflector is
    back within about 2 s of the server (client-go sleeps 1 s between watches
    on "connection refused").
  - *410 Gone* (HTTP, or an in-stream ``ERROR`` with code 410): the
    resourceVersion was compacted (after an API server restart it always
    is): re-list at once, after a random wait of at most 0.5 s so that the
    reflectors do not all list in the same millisecond, and diff, which
    delivers the deletes of the gap. A second 410 before the watch worked
    again waits the relist backoff instead: never a hot loop of lists.
  - *Any other status or in-stream error* (a 403, an undecodable body, a
    watch ``ERROR``; a bug): re-list after the *relist backoff*, 0.8 s
    doubling to 30 s (client-go's ListAndWatch backoff).
  - *429*: wait its ``Retry-After`` (at most 30 s), else the relist backoff,
    then go on (resume the watch, or list).

  A watch that worked (delivered an event or bookmark, or stayed open 1 s)
  and then ended before its timeout, cleanly or cut, is resumed at once and
  is not a failure. The connection backoff resets whenever the server
  answers (a list, discovery, a watch's event, a watch open 1 s); the relist
  backoff, and the 410 allowance, once the reflector is *back in step*: a
  list delivered and the watch after it working. Nothing but
  ``CancelledError`` leaves ``run``.
* **Logs.** Failures go through a ``RepeatLog`` per reflector, one kind per
  sort of failure (``"pods reflector: API server unavailable"``, or the
  status): the first at once, its repeats within 2 minutes as one counted
  line. Back in step after failures, the reflector says so in one INFO line
  (how long, how many attempts, whether it re-listed); a 410 met on the way
  back from an outage is told there, not on its own line (elsewhere it is one
  INFO line). A 60 s outage is three lines per reflector. A watch resumed at
  once is a DEBUG line.
* **State** (``state()``, ``/readyz?verbose``): what the reflector is doing,
  then when it last listed (UTC, and how long ago), when its watch was opened
  and when it last had an event or bookmark, e.g. ``watching (listed
  2026-11-27T10:00:01Z, 35s ago; watch opened 12s ago, last event 0.2s
  ago)``; while backing off, the failure, the next try and for how long it
  has been failing. Readiness is kube-scheduler's: ready once the first
  list was delivered in full (``has_delivered``: the waiting pods delivered
  after the sync too), whatever happens after.
* **Malformed objects** (the decoder's ``ModelError``: a bad quantity, an
  unknown enum value) are logged once per object and resourceVersion, counted
  and passed to ``on_invalid``: a new one is not delivered, an invalid update
  keeps the last valid version; a delete of a known object is always
  delivered (the stored object: a delete only needs the key).
* **Handlers** are synchronous and run on the reflector's task; an exception
  in one is logged with the object's key, counted, and the watch goes on.
* **Versions.** A resource served under several group versions (PodDisruptionBudgets:
  ``policy/v1`` from Kubernetes 1.21, ``policy/v1beta1`` before) lists its
  candidate paths in order; before its first list the reflector asks the
  server's discovery (``GET /apis/<group>/<version>``, open to every client)
  and reads the first version served.
* **Optional resources** (CSIStorageCapacities: ``storage.k8s.io/v1`` from
  Kubernetes 1.24, ``v1beta1`` from 1.21, ``v1alpha1`` in 1.19-1.20 only when
  the server enables it with ``--runtime-config``) may be served in none of
  their versions. Discovery saying so is logged once, naming the resource;
  the reflector then counts as synced with no objects (the service becomes
  ready) and reads nothing more, as kube-scheduler starts no informer for
  an API it does not use. A discovery that fails (5xx, 403) is retried.

Only the decoded objects of ``scorer.model`` are kept (one per key), never
the API's JSON.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import gc
import hashlib
import logging
import operator
import random
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, NamedTuple, NoReturn

import attrs
import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge

from scorer.errors import ModelError
from scorer.inputs.describe import describe_value, printable
from scorer.kube.apiresources import BoundHandlers, Resource, bind_handlers
from scorer.kube.client import DEFAULT_TIMEOUT, ApiClient, ApiResponse, ApiUnavailable
from scorer.kube.listing import DEFAULT_PAGE_SIZE, list_params, read_list
from scorer.logsummary import RepeatLog
from scorer.metrics import SchedulerMetrics
from scorer.tasks import Backoff

log = logging.getLogger("scorer.kube.reflector")

# The first list's deferred objects are decoded and delivered this many at a time (a few ms of work).
DEFERRED_CHUNK = 64
# A LIST is read as it arrives: at most this many seconds of silence (connecting, then between two reads).
LIST_READ_TIMEOUT = DEFAULT_TIMEOUT
DEFAULT_WATCH_TIMEOUT = 300.0  # seconds; each watch asks for this ±10 %
WATCH_TIMEOUT_JITTER = 0.1
# A watch is silent between events: the read timeout only catches a server gone quiet past its own deadline.
WATCH_READ_MARGIN = 30.0
# Once a watch event is read, the watch's socket is not read again for this long (seconds): the events
# that arrive meanwhile are read together (the module docstring's Watch).
WATCH_COALESCE = 0.005
# The same in a service that only answers kube-scheduler as its extender (``--no-scheduling``): no queue
# waits on the watch there (the module docstring's Watch).
EXTENDER_WATCH_COALESCE = 0.02
# The waits before trying again (seconds; RetryDelays, the module docstring's Faults).
CONNECT_BACKOFF = 0.2
CONNECT_BACKOFF_CAP = 2.0
RELIST_BACKOFF = 0.8
RELIST_BACKOFF_CAP = 30.0
GONE_JITTER = 0.5
RETRY_AFTER_CAP = 30.0
# A watch open this long without an error works: the server is back, the watch may be resumed at once.
WATCH_SETTLE = 1.0
# Repeats of one kind of failure within this are one counted line: every reflector meets the same outage.
FAILURE_LOG_INTERVAL = 120.0

InvalidCallback = Callable[[str, Mapping[str, Any], str], None]
# The reason labels of scorer_reflector_relists_total and scorer_reflector_watch_restarts_total: every
# one is exported at 0 from the reflector's start, so that increase() sees the first re-list or restart.
RELIST_REASONS = ("gone", "error")
WATCH_RESTART_REASONS = ("timeout", "closed", "error", "gone")


class ReflectorMetrics:
    """The ``scorer_reflector_*`` families, registered once in ``collector_registry`` (labelled by resource): the
    app's one (``SchedulerMetrics.collector_registry``), or a private one when None (tests)."""

    def __init__(self, collector_registry: CollectorRegistry | None = None) -> None:
        self.collector_registry = (collector_registry if collector_registry is not None
                                   else SchedulerMetrics().collector_registry)
        self.lists = Counter("scorer_reflector_lists", "LISTs of a resource (initial lists and re-lists).",
                             ["resource"], registry=self.collector_registry)
        self.relists = Counter("scorer_reflector_relists",
                               "Re-lists of a resource, by reason (gone: the watch's resourceVersion was "
                               "compacted; error: an unexpected answer or a restarted reflector).",
                               ["resource", "reason"], registry=self.collector_registry)
        self.watch_restarts = Counter("scorer_reflector_watch_restarts",
                                      "Watches of a resource that ended and were started again, by reason "
                                      "(timeout, closed, error, gone).",
                                      ["resource", "reason"], registry=self.collector_registry)
        self.invalid_objects = Counter("scorer_reflector_invalid_objects",
                                       "Objects the API sent that could not be decoded (each version once).",
                                       ["resource"], registry=self.collector_registry)
        self.handler_errors = Counter("scorer_reflector_handler_errors",
                                      "Exceptions raised by the object handlers (logged and skipped).",
                                      ["resource"], registry=self.collector_registry)
        self.last_sync = Gauge("scorer_reflector_last_sync_timestamp_seconds",
                               "When the reflector was last known to be in step with the API server "
                               "(a completed list, a watch event or bookmark, a watch that reached its timeout).",
                               ["resource"], registry=self.collector_registry)


def _non_negative(instance: Any, attribute: attrs.Attribute, value: float) -> None:  # type: ignore[type-arg]
    if not value >= 0:
        raise ValueError(f"RetryDelays.{attribute.name} must be a number of seconds >= 0, got {value!r}")


@attrs.frozen(slots=True)
class RetryDelays:
    """How long a reflector waits before trying again, in seconds (the module docstring's Faults).

    ``connect`` doubling to ``connect_cap``: after the API server could not
    be reached (refused, reset, timed out, a 5xx, a watch closed before it
    delivered anything); ``relist`` doubling to ``relist_cap``: before a
    re-list after any other error, and before ``ApiSource`` restarts a
    crashed reflector; ``gone_jitter``: the most a re-list after a 410 waits;
    ``retry_after_cap``: the most a 429's ``Retry-After`` is waited.
    """

    connect: float = attrs.field(default=CONNECT_BACKOFF, validator=_non_negative)
    connect_cap: float = attrs.field(default=CONNECT_BACKOFF_CAP, validator=_non_negative)
    relist: float = attrs.field(default=RELIST_BACKOFF, validator=_non_negative)
    relist_cap: float = attrs.field(default=RELIST_BACKOFF_CAP, validator=_non_negative)
    gone_jitter: float = attrs.field(default=GONE_JITTER, validator=_non_negative)
    retry_after_cap: float = attrs.field(default=RETRY_AFTER_CAP, validator=_non_negative)

    def __attrs_post_init__(self) -> None:
        for first, cap in (("connect", "connect_cap"), ("relist", "relist_cap")):
            if getattr(self, cap) < getattr(self, first):
                raise ValueError(f"RetryDelays.{cap} ({getattr(self, cap)}) must be >= {first} "
                                 f"({getattr(self, first)})")

    def connect_backoff(self, rng: random.Random | None = None) -> Backoff:
        return Backoff(self.connect, self.connect_cap, rng=rng)

    def relist_backoff(self, rng: random.Random | None = None) -> Backoff:
        return Backoff(self.relist, self.relist_cap, rng=rng)


DEFAULT_DELAYS = RetryDelays()


def retry_after(headers: Mapping[str, str], cap: float) -> float | None:
    """``Retry-After`` in seconds (the API server sends seconds), at most ``cap``; None when absent or a date."""
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), "").strip()
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(seconds, 0.0), cap) if seconds == seconds else None  # NaN is not a delay


class _GcPause:
    """``paused()`` nests across concurrent lists: the first pause disables the cyclic GC, the last
    one restores the state found by the first."""

    def __init__(self) -> None:
        self.depth = 0
        self.was_enabled = False

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        if self.depth == 0:
            self.was_enabled = gc.isenabled()
            gc.disable()
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0 and self.was_enabled:
                gc.enable()


GC_PAUSE = _GcPause()


class WatchError(Exception):
    """A watch (or list) ended by something other than its timeout.

    ``what`` is the short kind for logs and ``state()``; ``relist``: the next
    step is a re-list (else the watch resumes); ``gone``: a 410;
    ``unavailable``: the API server could not be reached or answered a 5xx
    (the connection backoff); ``retry_after``: the server's delay (429);
    ``reason``: the watch-restart label (error, closed, gone).
    """

    def __init__(self, what: str, message: str, *, relist: bool = False, retry_after: float | None = None,
                 gone: bool = False, unavailable: bool = False, reason: str = "error") -> None:
        super().__init__(message)
        self.what = what
        self.relist = relist or gone
        self.retry_after = retry_after
        self.gone = gone
        self.unavailable = unavailable
        self.reason = "gone" if gone else reason  # the watch_restarts label

    @property
    def kind(self) -> str:
        """The sort of failure, for the log's repeats (every way of being unreachable is one)."""
        return "API server unavailable" if self.unavailable else self.what


def _status_error(response: ApiResponse, cap: float) -> WatchError:
    """What an HTTP status other than 200 means for a reflector."""
    status = response.status
    message = f"HTTP {status}: {printable(response.reason())}"
    if status == 410:
        return WatchError("410 Gone", message, relist=True, gone=True)
    if status == 429:
        return WatchError("HTTP 429", message, retry_after=retry_after(response.headers, cap))
    if status >= 500:
        return WatchError(f"HTTP {status}", message, unavailable=True)
    return WatchError(f"HTTP {status}", message, relist=True)


class _Deferred(NamedTuple):
    """An object of the first list delivered after the sync: its place, its key (ties go in key order, an
    etcd list's order), its position in the list (a key listed twice: in the list's order) and its JSON,
    decoded when delivered."""

    place: int
    key: str
    position: int
    raw: Mapping[str, Any]
    digest: bytes | None = None  # its JSON's (``Reflector.keep_json_digests``)


class _NotServed(Exception):
    """Discovery found an optional resource in none of its group versions."""


@attrs.define(slots=True)
class _Outage:
    """The failures since the reflector was last in step: when the first came, how many, of which kinds
    (their ``RepeatLog`` kinds), and whether a 410 had it re-list on the way back."""

    started: float = 0.0  # monotonic
    failures: int = 0
    kinds: list[str] = attrs.Factory(list)
    relisted: bool = False

    def failed(self, kind: str) -> None:
        if not self.failures:
            self.started = time.monotonic()
        self.failures += 1
        if kind not in self.kinds:
            self.kinds.append(kind)

    def duration(self) -> float:
        return time.monotonic() - self.started if self.failures else 0.0


def _utc(timestamp: float) -> str:
    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ago(seconds: float) -> str:
    """A duration as people read it: ``0.2s``, ``35s``, ``5m3s``, ``2h10m``."""
    seconds = max(seconds, 0.0)
    if seconds < 10:
        return f"{seconds:.1f}s"
    if seconds < 120:
        return f"{seconds:.0f}s"
    minutes = int(seconds // 60)
    if minutes < 120:
        return f"{minutes}m{int(seconds % 60)}s"
    return f"{minutes // 60}h{minutes % 60}m"


class Reflector:
    """Lists and watches one ``Resource`` into the handlers given to ``run``.

    ``store`` maps keys to the objects as last delivered; ``resource_version``
    is the last one seen. ``deliver_after`` (awaited before each list is
    delivered) orders the first lists of several reflectors; ``watch_after``
    (awaited before the first watch) holds the watches until all of them are
    delivered (``ApiSource``: each watch's TLS handshake is off the path to the
    first bind; the watch then starts from the list's resourceVersion, as at
    once). ``delays`` are
    the waits before trying again; ``sleep`` waits them (tests record them).
    ``list_from_cache``: the first list asks for ``resourceVersion=0``. ``watch_coalesce``: how long the
    watch's socket is left unread after an event (``ApiStream``'s ``coalesce``; 0: never).
    """

    def __init__(self, client: ApiClient, resource: Resource, *, metrics: ReflectorMetrics | None = None,
                 page_size: int = DEFAULT_PAGE_SIZE, watch_timeout: float = DEFAULT_WATCH_TIMEOUT,
                 on_invalid: InvalidCallback | None = None, delays: RetryDelays = DEFAULT_DELAYS,
                 deliver_after: Callable[[], Awaitable[None]] | None = None,
                 watch_after: Callable[[], Awaitable[None]] | None = None, rng: random.Random | None = None,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep, list_from_cache: bool = True,
                 watch_coalesce: float = WATCH_COALESCE) -> None:
        self.client = client
        self.resource = resource
        self.metrics = metrics if metrics is not None else ReflectorMetrics()
        self.page_size = page_size
        self.watch_timeout = watch_timeout
        self.on_invalid = on_invalid
        self.delays = delays
        self.deliver_after = deliver_after
        self.watch_after = watch_after
        self.list_from_cache = list_from_cache
        self.watch_coalesce = watch_coalesce
        self.store: dict[str, Any] = {}
        self.resource_version = ""
        # With keep_json_digests: the objects it asks for by key, with their JSON's digest; and keys by digest.
        self._json_wanted: Callable[[Mapping[str, Any]], bool] | None = None
        self._digests: dict[str, tuple[bytes, Any]] = {}
        self._by_digest: dict[bytes, str] = {}
        # The path read: resource.path, or a fallback the server serves (chosen before the first list).
        self.path: str | None = None if resource.fallback_paths or resource.optional else resource.path
        self.served = True  # False once discovery said an optional resource is not served
        self._rng = rng or random.Random()
        self._sleep = sleep
        self._connect_backoff = delays.connect_backoff(self._rng)
        self._relist_backoff = delays.relist_backoff(self._rng)
        self._gone_relisted = False  # a 410 was re-listed at once; the next one, before the watch works, waits
        self._repeats = RepeatLog(log, interval=FAILURE_LOG_INTERVAL)
        self._handlers: BoundHandlers | None = None
        self._invalid: dict[str, str] = {}  # key -> the resourceVersion already reported invalid
        self._synced = asyncio.Event()
        self._delivered = False  # the first list delivered in full, its deferred objects too
        self._frozen = False
        self._state = "not started"
        # For state(): wall-clock times (None: not yet), and the backoff under way (monotonic).
        self._listed_at: float | None = None
        self._watch_opened_at: float | None = None
        self._last_event_at: float | None = None
        self._retry_at: float | None = None
        self._outage = _Outage()
        name = resource.name
        self._lists = self.metrics.lists.labels(name)
        self._invalid_count = self.metrics.invalid_objects.labels(name)
        self._handler_errors = self.metrics.handler_errors.labels(name)
        self._last_sync = self.metrics.last_sync.labels(name)
        for reason in RELIST_REASONS:
            self.metrics.relists.labels(name, reason)
        for reason in WATCH_RESTART_REASONS:
            self.metrics.watch_restarts.labels(name, reason)

    # -- status

    def has_synced(self) -> bool:
        """True once the first list was delivered."""
        return self._synced.is_set()

    def has_delivered(self) -> bool:
        """True once the first list was delivered in full: after the sync, once the objects it deferred
        (the waiting pods) were delivered too (kube-scheduler's informer sync, for ``/readyz``)."""
        return self._delivered

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    def state(self) -> str:
        """What the reflector is doing and when it last listed and watched, for ``/readyz?verbose``:
        ``watching (listed 2026-11-27T10:00:01Z, 35s ago; watch opened 12s ago, last event 0.2s ago)``,
        ``backing off after ApiUnavailable, next try in 1.2s, failing for 14s (listed ...; no watch open, last
        event 15s ago)``."""
        now, head, details = time.time(), self._state, []
        if self._retry_at is not None:
            head += f", next try in {max(self._retry_at - time.monotonic(), 0.0):.1f}s"
            if self._outage.failures:
                head += f", failing for {_ago(self._outage.duration())}"
        if self._listed_at is not None:
            details.append(f"listed {_utc(self._listed_at)}, {_ago(now - self._listed_at)} ago")
        if self._watch_opened_at is not None:  # (a watch was opened once)
            last = (f"last event {_ago(now - self._last_event_at)} ago" if self._last_event_at is not None
                    else "no event yet")
            details.append(f"watch opened {_ago(now - self._watch_opened_at)} ago, {last}" if self._watch_open
                           else f"no watch open, {last}")
        return f"{head} ({'; '.join(details)})" if details else head

    # -- the loop

    def bind(self, handlers: object) -> None:
        """Deliver to ``handlers`` (``on_<kind>_add/_update/_delete``); ``run`` does it."""
        self._handlers = bind_handlers(self.resource, handlers)

    async def run(self, handlers: object) -> None:
        """List, then watch, until cancelled. A run that starts with objects in the store (a restarted
        reflector) re-lists against them."""
        self.bind(handlers)
        name = self.resource.name
        listed = False
        if self.has_synced():
            self.metrics.relists.labels(name, "error").inc()
        while True:
            try:
                if not listed:
                    await self._list()
                    listed = True
                if self.watch_after is not None:
                    self._state = "listed; its watch waits for the other resources' lists"
                    await self.watch_after()
                    self.watch_after = None  # the first watch only
                self.metrics.watch_restarts.labels(name, await self._watch()).inc()
                continue
            except asyncio.CancelledError:
                self._repeats.flush()  # the repeats not yet counted in a line (shutdown)
                raise
            except _NotServed as error:
                await self._not_served(str(error))  # ends only by cancellation
            except WatchError as error:
                failure = error
            except ApiUnavailable as error:
                if self._streaming and self._watch_works:  # a watch that worked, cut: resumed at once
                    log.debug("%s reflector: the watch was cut (%s); resuming it", name, error)
                    self.metrics.watch_restarts.labels(name, "closed").inc()
                    continue
                failure = WatchError("ApiUnavailable", f"API server unavailable: {error}", unavailable=True,
                                     reason="closed" if self._streaming else "error")
            except Exception as error:  # a bug: logged with its traceback, then a re-list
                log.exception("%s reflector: unexpected error", name)
                failure = WatchError(type(error).__name__, str(error), relist=True)
            if listed:
                self.metrics.watch_restarts.labels(name, failure.reason).inc()
                if failure.relist:
                    listed = False
                    self.metrics.relists.labels(name, failure.reason if failure.gone else "error").inc()
            delay = self._delay(failure)
            self._report(failure, "listing" if not listed else "resuming the watch", delay)
            self._state = f"backing off after {failure.what}"
            self._retry_at = time.monotonic() + delay
            try:
                await self._sleep(delay)
            finally:
                self._retry_at = None

    def _delay(self, failure: WatchError) -> float:
        """How long to wait after ``failure`` (the module docstring's Faults)."""
        if failure.retry_after is not None:
            return failure.retry_after
        if failure.gone and not self._gone_relisted:
            self._gone_relisted = True
            return self._rng.uniform(0.0, self.delays.gone_jitter)
        if failure.unavailable:
            return self._connect_backoff.next()
        return self._relist_backoff.next()

    def _report(self, failure: WatchError, step: str, delay: float) -> None:
        """Log ``failure`` (a kind's repeats as one line) and count it in the outage under way."""
        name = self.resource.name
        if failure.gone:
            if self._outage.failures:  # the way back from an outage: told by the line that ends it
                self._outage.relisted = True
                log.debug("%s reflector: %s; %s in %.1fs", name, failure, step, delay)
            else:
                self._repeats.log(logging.INFO, f"{name} reflector: 410 Gone", "%s reflector: %s; %s in %.1fs",
                                  name, failure, step, delay)
            return
        self._outage.failed(f"{name} reflector: {failure.kind}")
        self._repeats.warning(f"{name} reflector: {failure.kind}", "%s reflector: %s; %s in %.1fs",
                              name, failure, step, delay)

    def _answered(self) -> None:
        """The server answered a list or discovery: it is reachable again."""
        self._connect_backoff.reset()

    def _in_step(self) -> None:
        """A list delivered and the watch after it works: the backoffs start again from the first delay,
        and an outage under way is over (its repeats summarised, then one INFO line)."""
        self._connect_backoff.reset()
        self._relist_backoff.reset()
        self._gone_relisted = False
        outage = self._outage
        if not outage.failures:
            return
        for kind in outage.kinds:
            self._repeats.recovered(kind)
        log.info("%s reflector: back in step after %s of failures (%d failed attempt%s%s)", self.resource.name,
                 _ago(outage.duration()), outage.failures, "" if outage.failures == 1 else "s",
                 "; re-listed" if outage.relisted else "")
        self._outage = _Outage()

    async def _not_served(self, message: str) -> NoReturn:
        """An optional resource the server does not serve: said once, synced with no objects, then idle."""
        if self.served:
            self.served = False
            log.info("%s reflector: %s; %s are not read (no objects of this kind)", self.resource.name, message,
                     self.resource.name)
        if self.deliver_after is not None and not self.has_synced():  # in its place in the order, as a list
            self._state = "not served by the API server; waiting for the resources delivered first"
            await self.deliver_after()
        self._state = "not served by the API server"
        if self.store:  # a restarted reflector over a server that stopped serving it: they are gone
            self._replace({})
        self._last_sync.set(time.time())
        self._synced.set()
        self._delivered = True
        self._in_step()
        idle = asyncio.Event()  # never set
        while True:
            await idle.wait()

    async def _choose_path(self) -> str:
        """The first of the resource's paths whose group version the server serves (discovery); raises
        ``_NotServed`` for an optional resource served in none of them."""
        candidates = (self.resource.path, *self.resource.fallback_paths)
        for path in candidates:
            group_version, _, plural = path.rpartition("/")
            response = await self.client.request("GET", group_version)
            if response.status == 404:
                continue
            if response.status != 200:
                raise _status_error(response, self.delays.retry_after_cap)
            self._answered()
            try:
                served = {r.get("name") for r in response.json().get("resources") or () if isinstance(r, Mapping)}
            except (orjson.JSONDecodeError, AttributeError) as error:
                raise WatchError("an undecodable discovery answer", f"GET {group_version}: {error}") from None
            if plural in served:
                if path != self.resource.path:
                    log.info("%s reflector: %s is not served; reading %s", self.resource.name,
                             self.resource.path.rpartition("/")[0], group_version)
                return path
        tried = ", ".join(p.rpartition("/")[0] for p in candidates)
        if self.resource.optional:
            raise _NotServed(f"the API server serves none of {tried}")
        raise WatchError("an unserved resource", f"the API server serves none of {tried}")

    async def _list(self) -> None:
        """One LIST of every page, decoded with the GC paused, then delivered against the store; on the first
        list, what ``resource.deferrable`` names is delivered after the sync."""
        if self.path is None:
            self._state = "discovering"
            self.path = await self._choose_path()
        self._state = "listing"
        self._streaming = self._watch_works = False
        self._lists.inc()
        first = not self.has_synced()
        items: dict[str, Any] = {}
        deferred: list[_Deferred] | None = [] if first and self.resource.deferrable is not None else None
        with GC_PAUSE.paused():
            version = await self._list_pages(items, deferred, from_cache=first and self.list_from_cache)
        self._answered()
        if self.deliver_after is not None:
            self._state = "listed, waiting for the resources delivered first"
            await self.deliver_after()
        with GC_PAUSE.paused():
            self._replace(items)
        del items
        self.resource_version = version
        self._listed_at = time.time()
        self._last_sync.set(self._listed_at)
        self._synced.set()
        if deferred:
            await self._deliver_deferred(deferred)
        self._delivered = True
        if not self._frozen:
            gc.freeze()  # the first cache is long-lived: keep it out of every later collection
            self._frozen = True

    async def _list_pages(self, items: dict[str, Any], deferred: list[_Deferred] | None = None, *,
                          from_cache: bool = False) -> str:
        """Every page of the list into ``items`` (key -> decoded object, in key order), except what
        ``deferred`` (when given) takes: the objects ``resource.deferrable`` names, with their place, not yet
        decoded. Each page is decoded item by item as it arrives (``read_list``)."""
        path = self._path()
        limit, token, version = self.page_size, "", ""
        seen: set[str] = set()
        deferrable = self.resource.deferrable if deferred is not None else None

        def take(raw: Any, digest: bytes | None) -> None:
            if not isinstance(raw, Mapping):
                return
            key = self.resource.key(raw)
            if key is None:
                self._report_nameless(raw)
                return
            seen.add(key)
            place = deferrable(raw) if deferrable is not None else None
            if place is not None:
                assert deferred is not None
                deferred.append(_Deferred(place, key, len(deferred), raw, digest))
                return
            obj = self._decode(key, raw)
            if obj is not None:
                items[key] = obj
                self._remember(key, digest, obj)

        while True:
            params = list_params(limit, token, from_cache=from_cache)
            async with self.client.stream("GET", path, params=params, read_timeout=LIST_READ_TIMEOUT,
                                          timed=True) as stream:
                if stream.status == 410 and token:
                    log.info("%s reflector: the list's continue token expired; listing again in one page",
                             self.resource.name)
                    limit, token = 0, ""
                    items.clear()
                    seen.clear()
                    if deferred is not None:
                        deferred.clear()
                    continue
                if stream.status != 200:
                    raise _status_error(stream.response(await stream.read()), self.delays.retry_after_cap)
                try:
                    body = await read_list(stream, take, self._list_digest if self._json_wanted else None)
                except orjson.JSONDecodeError as error:
                    raise WatchError("an undecodable list", f"GET {path}: the body is not JSON: {error}") from None
            if not isinstance(body, Mapping):
                raise WatchError("an undecodable list", f"GET {path}: {describe_value(body)} is not a list")
            meta = body.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            version = str(meta.get("resourceVersion") or version)
            token = str(meta.get("continue") or "")
            if not token:
                break
        # An object listed but invalid keeps its last valid version; reports of objects gone are dropped.
        for key in seen:
            if key not in items and key in self.store:
                items[key] = self.store[key]
        for key in [k for k in self._invalid if k not in seen]:
            del self._invalid[key]
        # A list from the watch cache comes in no order, one from etcd by key: scorer delivers them alike.
        ordered = sorted(items.items(), key=operator.itemgetter(0))
        items.clear()
        items.update(ordered)
        return version

    async def _deliver_deferred(self, deferred: list[_Deferred]) -> None:
        """Decode and deliver the first list's deferred objects as adds, in their place's order,
        ``DEFERRED_CHUNK`` at a time, the event loop free between chunks."""
        handlers = self._require_handlers()
        deferred.sort(reverse=True)  # popped from the end: lowest place first, each entry dropped as delivered
        total = len(deferred)
        while deferred:
            self._state = f"listed, delivering the objects waiting ({total - len(deferred)} of {total} delivered)"
            with GC_PAUSE.paused():
                for _ in range(min(DEFERRED_CHUNK, len(deferred))):
                    entry = deferred.pop()
                    obj = self._decode(entry.key, entry.raw)
                    if obj is not None:
                        self.store[entry.key] = obj
                        self._remember(entry.key, entry.digest, obj)
                        self._deliver(handlers.add, entry.key, obj)
            await asyncio.sleep(0)

    def _replace(self, items: dict[str, Any]) -> None:
        """Deliver ``items`` (the whole list) against the store: deletes first, then adds and updates."""
        handlers = self._require_handlers()
        store = self.store
        for key in [k for k in store if k not in items]:
            self._forget(key)
            self._deliver(handlers.delete, key, store.pop(key))
        changed = self.resource.changed
        for key, obj in items.items():
            old = store.get(key)
            if old is None:
                store[key] = obj
                self._deliver(handlers.add, key, obj)
            elif old is not obj and changed(old, obj):
                store[key] = obj
                self._deliver(handlers.update, key, old, obj)

    async def _watch(self) -> str:
        """One watch from ``resource_version`` until it ends: returns how (the watch-restart label: "timeout",
        or "closed" for a watch that worked and ended early); raises ``WatchError``/``ApiUnavailable`` for one
        that could not start or failed."""
        timeout = max(1, round(self.watch_timeout * self._rng.uniform(1 - WATCH_TIMEOUT_JITTER,
                                                                      1 + WATCH_TIMEOUT_JITTER)))
        params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout),
                  "resourceVersion": self.resource_version}
        self._streaming = self._watch_works = False
        self._state = "watching"
        started = time.monotonic()
        async with self.client.stream("GET", self._path(), params=params,
                                      read_timeout=timeout + WATCH_READ_MARGIN,
                                      coalesce=self.watch_coalesce) as stream:
            if stream.status != 200:
                raise _status_error(stream.response(await stream.read()), self.delays.retry_after_cap)
            self._streaming = self._watch_open = True
            self._watch_opened_at = time.time()
            settled = asyncio.get_running_loop().call_later(WATCH_SETTLE, self._watch_worked)
            try:
                while line := await stream.readline():
                    if not line.strip():
                        continue
                    try:
                        event = orjson.loads(line)
                    except orjson.JSONDecodeError as error:
                        raise WatchError("an undecodable watch event", f"watch event is not JSON: {error}",
                                         relist=True) from None
                    self.apply_event(event)
                    if self._json_wanted is not None:
                        self._remember_event(event, line)
                    self._last_event_at = time.time()
                    self._watch_worked()
            finally:
                settled.cancel()
                self._watch_open = False
        if time.monotonic() - started >= 0.9 * timeout:
            self._watch_worked()
            self._last_sync.set(time.time())
            return "timeout"
        if not self._watch_works:
            raise WatchError("a closed watch", "the watch ended before it delivered anything", unavailable=True,
                             reason="closed")
        log.debug("%s reflector: the watch ended before its timeout; resuming it", self.resource.name)
        return "closed"

    # The last watch: its answer was 200 (_streaming); it delivered an event or stayed open WATCH_SETTLE
    # (_watch_works); it is being read (_watch_open).
    _streaming = False
    _watch_works = False
    _watch_open = False

    def _watch_worked(self) -> None:
        if self._streaming and not self._watch_works:
            self._watch_works = True
            self._in_step()

    def apply_event(self, event: Any) -> None:
        """One decoded watch event: delivered, or only its resourceVersion kept (a bookmark). Raises
        ``WatchError`` for an ``ERROR`` event (``gone`` for code 410) or an event that makes no sense."""
        if not isinstance(event, Mapping) or not isinstance(event.get("object"), Mapping):
            raise WatchError("a malformed watch event", f"watch event without an object: {describe_value(event)}",
                             relist=True)
        type_, raw = event.get("type"), event["object"]
        if type_ == "ERROR":
            code, message = raw.get("code"), printable(str(raw.get("message", "")))
            if code == 410:
                raise WatchError("410 Gone", f"watch ERROR 410: {message}", relist=True, gone=True)
            raise WatchError(f"a watch ERROR {code}", f"watch ERROR {code}: {message}", relist=True)
        meta = raw.get("metadata")
        version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
        if type_ != "BOOKMARK":
            key = self.resource.key(raw)
            if type_ in ("ADDED", "MODIFIED"):
                if key is None:
                    self._report_nameless(raw)
                else:
                    self._apply_change(key, raw)
            elif type_ == "DELETED":
                if key is not None:
                    self._invalid.pop(key, None)
                    self._forget(key)
                    old = self.store.pop(key, None)
                    if old is not None:
                        self._deliver(self._require_handlers().delete, key, old)
            else:
                raise WatchError("an unknown watch event", f"unknown watch event type {describe_value(type_)}",
                                 relist=True)
        if isinstance(version, str) and version:
            self.resource_version = version
        self._last_sync.set(time.time())

    def _apply_change(self, key: str, raw: Mapping[str, Any]) -> None:
        old = self.store.get(key)
        obj = self._update(key, old, raw) if old is not None and self.resource.update is not None else None
        if obj is None:
            obj = self._decode(key, raw)
            if obj is None:
                return
        handlers = self._require_handlers()
        self.store[key] = obj
        if old is None:
            self._deliver(handlers.add, key, obj)
        else:
            self._deliver(handlers.update, key, old, obj)

    # -- objects by their JSON

    def keep_json_digests(self, wanted: Callable[[Mapping[str, Any]], bool]) -> None:
        """From now on, keep the digest of each ``wanted`` object's JSON as the API server sent it, list item
        or watch event, for ``by_json``: a client that sends the same bytes again (kube-scheduler sends its
        extender the pod it is placing, byte for byte the API server's JSON of it) gets the object decoded
        from them without decoding them again. Kept while the object is the one stored under its key and
        still ``wanted``; forgotten when it changes otherwise, or goes."""
        self._json_wanted = wanted

    def by_json(self, data: bytes | bytearray | memoryview) -> Any | None:
        """The stored object whose JSON, as the API server sent it without ``kind`` and ``apiVersion`` (a list
        item's), is ``data``; None when none is (or its digest was not kept)."""
        key = self._by_digest.get(json_digest(data))
        if key is None:
            return None
        entry = self._digests.get(key)
        if entry is None or self.store.get(key) is not entry[1]:
            return None
        return entry[1]

    def _list_digest(self, raw: Any, data: memoryview) -> bytes | None:
        """The digest of a list item's JSON ``data`` when it is wanted."""
        wanted = self._json_wanted
        return json_digest(data) if wanted is not None and isinstance(raw, Mapping) and wanted(raw) else None

    def _remember(self, key: str, digest: bytes | None, obj: Any) -> None:
        """``obj``, stored under ``key``, has JSON of ``digest`` (None: unknown, or not wanted)."""
        self._forget(key)
        if digest is not None:
            self._digests[key] = digest, obj
            self._by_digest[digest] = key

    def _forget(self, key: str) -> None:
        entry = self._digests.pop(key, None)
        if entry is not None and self._by_digest.get(entry[0]) == key:
            del self._by_digest[entry[0]]

    def _remember_event(self, event: Any, line: bytes) -> None:
        """After ``apply_event``: the digest of the event's object, its JSON cut from ``line`` without the
        ``kind`` and ``apiVersion`` the API server writes first in a watch event (a list item has neither),
        when it is wanted and is what the store now holds."""
        if not isinstance(event, Mapping) or event.get("type") not in ("ADDED", "MODIFIED"):
            return
        raw = event.get("object")
        key = self.resource.key(raw) if isinstance(raw, Mapping) else None
        if key is None:
            return
        assert self._json_wanted is not None and isinstance(raw, Mapping)
        obj = self.store.get(key)
        version = getattr(obj, "resource_version", None)
        data = _event_object(line) if version is not None and version == _version_of(raw) \
            and self._json_wanted(raw) else None
        self._remember(key, json_digest(data) if data is not None else None, obj)

    # -- objects

    def _decode(self, key: str, raw: Mapping[str, Any]) -> Any:
        """The model object, or None for a malformed one (reported once per resourceVersion)."""
        try:
            obj = self.resource.decode(raw)
        except ModelError as error:
            self._report_invalid(key, raw, str(error))
            return None
        except Exception as error:  # a decoder bug must not stop the watch either: logged with its traceback
            self._report_invalid(key, raw, f"{self.resource.kind} {key}: {type(error).__name__}: {error}",
                                 error=error)
            return None
        if self._invalid:
            self._invalid.pop(key, None)
        return obj

    def _update(self, key: str, old: Any, raw: Mapping[str, Any]) -> Any:
        """The resource's cheaper decode of a new version of ``old`` (a pod scorer bound), or None."""
        assert self.resource.update is not None
        obj = self.resource.update(old, raw)
        if obj is not None and self._invalid:
            self._invalid.pop(key, None)
        return obj

    def _report_nameless(self, raw: Mapping[str, Any]) -> None:
        self._report_invalid(None, raw, f"a {self.resource.kind} without a name: metadata.name: required")

    def _report_invalid(self, key: str | None, raw: Mapping[str, Any], message: str, *,
                        error: BaseException | None = None) -> None:
        """Log, count and pass on a malformed object, once per key and resourceVersion."""
        if key is not None:
            version = _version_of(raw)
            if self._invalid.get(key) == version:
                return
            self._invalid[key] = version
        self._invalid_count.inc()
        what = "its last valid version is kept" if key in self.store else "not delivered"
        log.warning("%s reflector: invalid object (%s): %s", self.resource.name, what, printable(message),
                    exc_info=error)
        if self.on_invalid is not None:
            try:
                self.on_invalid(self.resource.name, raw, message)
            except Exception:
                log.exception("%s reflector: the on_invalid callback failed for %s", self.resource.name,
                              printable(key or "an object without a name"))

    def _deliver(self, handler: Callable[..., None], key: str, *objects: Any) -> None:
        try:
            handler(*objects)
        except Exception:
            self._handler_errors.inc()
            log.exception("%s reflector: handler %s failed for %s", self.resource.name,
                          getattr(handler, "__name__", handler), printable(key))

    def _path(self) -> str:
        if self.path is None:
            raise RuntimeError(f"{self.resource.name} reflector: no path chosen (list first)")
        return self.path

    def _require_handlers(self) -> BoundHandlers:
        if self._handlers is None:
            raise RuntimeError(f"{self.resource.name} reflector: no handlers bound (call run or bind first)")
        return self._handlers


def _version_of(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    version = meta.get("resourceVersion") if isinstance(meta, Mapping) else None
    return version if isinstance(version, str) else ""


def json_digest(data: bytes | bytearray | memoryview) -> bytes:
    """The digest ``Reflector.by_json`` keeps of an object's JSON (BLAKE2b, 128 bits)."""
    return hashlib.blake2b(data, digest_size=16).digest()


_EVENT_OBJECT = b'"object":'
_KIND_FIRST = re.compile(rb'\{"kind":"[A-Za-z]+","apiVersion":"[a-z0-9./]+",')


def _event_object(line: bytes) -> bytes | None:
    """A watch event's object JSON in ``line`` (``{"type":...,"object":{...}}``) without the ``kind`` and
    ``apiVersion`` the API server writes first, as a list item has it; None for another layout. The object
    is the event's last member: from its key to the event's closing brace."""
    at = line.find(_EVENT_OBJECT)
    end = line.rfind(b"}")
    if at < 0 or end <= at:
        return None
    head = _KIND_FIRST.match(line, at + len(_EVENT_OBJECT))
    if head is None:
        return None
    return b"{" + line[head.end():end]
