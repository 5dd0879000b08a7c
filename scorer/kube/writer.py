"""What the scheduler writes to the API server: bindings, Events, the PodScheduled condition.

``ApiWriter`` is the ``ClusterWriter`` of ``scorer.cluster.interface`` for a
real cluster (reference §7, §8.1):

* ``bind``: ``POST pods/{name}/binding`` with the pod's UID as precondition
  (servers newer than 1.20 check it; 1.20 binds by name). 201 is success.
  404 (the pod is gone) and 409 (already bound, being deleted, or another
  UID) raise ``BindConflict``; anything else (5xx, 429, a timeout) raises
  ``ApiUnavailable``. Either way the binding cycle forgets the assumed pod
  and requeues it; the pod's update or delete on the watch then takes it
  out of the queue, and a second binding of a pod that was bound after all
  gets 409. (The service issue makes conflicts final without a requeue.)
* ``write_event``: an ``events.k8s.io/v1`` Event regarding the pod
  (reportingController = the profile's scheduler name, reportingInstance =
  ``<controller>-<hostname>``), falling back to a core v1 Event when that
  API group is not served. So that 10,000 unschedulable pods retried over
  and over do not flood the API server (client-go's EventCorrelator, in
  short; numbers in ``EventLimits``):

  - an Event identical to one written for the same pod (type, reason,
    action, note) within ``window`` of the last occurrence is not written
    again but counted in that Event's ``series`` (core v1: ``count``); the
    count is patched on the first repeat and then at most every
    ``series_interval`` (``flush_series()`` patches what is left);
  - a new Event needs a token from the pod's own bucket (burst 25, one more
    every 5 minutes: client-go's spam filter) and, when ``qps`` is set, from
    the writer's global bucket (off by default: the events client's own
    qps/burst paces the writes, and the recorder's bounded buffer drops what
    it cannot hold); without one it is dropped and counted.

  ``scorer_events_total{result}`` counts written, aggregated, dropped and
  failed Events (a failed series patch counts as failed too), in the
  collector registry given (the app's; without one it is exported nowhere).
* ``write_pod_condition``: a strategic-merge patch of ``pods/status`` with
  ``PodScheduled`` and ``nominatedNodeName`` (set when preemption nominated a
  node, cleared with null when asked with ``""``, untouched when None), sent only
  when the condition or the nomination differs from what this writer wrote
  last for that pod, and never ``False`` for a pod it bound.

* ``update_persistent_volume`` / ``update_persistent_volume_claim`` (the
  ``VolumeWriter`` of VolumeBinding's PreBind, reference §10.6.7): the PV's
  ``spec.claimRef`` and annotations, the PVC's annotations (the selected
  node). kube-scheduler PUTs the whole object (verb ``update``); this writer
  sends a JSON merge patch (verb ``patch``) of just those fields, carrying
  the cached ``metadata.resourceVersion``: the API server refuses a patch
  whose resourceVersion is not the stored one with 409, so a stale write
  fails exactly as kube's PUT would. The annotations given are set (a merge
  patch removes none: the scheduler only adds). The stored object comes
  back decoded. 404 (gone) and 409 (changed since) raise ``UpdateConflict``;
  anything else ``ApiUnavailable`` (retried by requeueing the pod).
* ``delete_pod`` (a preemption victim): ``DELETE pods/{name}`` with a UID
  precondition and the pod's own grace period; 404/409 = already gone.
  ``clear_nominated_node``: ``nominatedNodeName: null`` in a status patch.

What the writer remembers is bounded, so that churn (pods created and
deleted by the thousand) leaves nothing behind: the Event series and the
per-pod buckets are least-recently-used caches of ``max_series`` entries
(4,096, client-go's EventCorrelator and spam filter size), series also expire
``window`` after their last occurrence; the conditions written and the pods
bound are kept for at most ``max_pods`` pods (least recently used go first),
and a pod's condition is dropped once this writer bound it (a bound pod's
condition is never written again). ``forget(pod_key)`` drops everything of a
deleted pod, its series included; the event handlers call it (through the
recorder, in order after the pod's last writes) for every pod deleted.
"""

from __future__ import annotations

import collections
import datetime
import logging
import socket
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import attrs
import orjson
from prometheus_client import CollectorRegistry, Counter

from scorer.cluster.interface import BindConflict, UpdateConflict
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable
from scorer.model import Pod
from scorer.model.decode import storage_from_dict
from scorer.model.storage import PersistentVolume, PersistentVolumeClaim

log = logging.getLogger("scorer.kube.writer")

CONDITION_TYPE = "PodScheduled"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
MICRO_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
_V = TypeVar("_V")
_S = TypeVar("_S", PersistentVolume, PersistentVolumeClaim)

DEFAULT_MAX_PODS = 100_000  # pods whose last condition and binding are remembered


@attrs.frozen(slots=True)
class EventLimits:
    """How many Events an ``ApiWriter`` sends. A rate <= 0 means no limit."""

    # New Events per second, all pods together, after a burst. Off by default, as in kube-scheduler: the
    # events client's own qps/burst (clientConnection) paces the writes, and the recorder's bounded
    # buffer drops what it cannot hold (kube's broadcaster queue does the same). A global cap here
    # would drop the Scheduled Events of a busy scheduler.
    qps: float = 0.0
    burst: int = 25
    per_object_burst: int = 25  # new Events of one pod (client-go's spam filter: 25, ...
    per_object_refill_seconds: float = 300.0  # ... then one every 5 minutes)
    window: float = 600.0  # seconds after its last occurrence an Event still absorbs identical ones
    series_interval: float = 60.0  # seconds between two patches of a series' count
    # Series and per-pod buckets remembered (least recently used go first): client-go's LRU size. A repeat
    # of an Event whose series was dropped is written as a new Event.
    max_series: int = 4_096


class _Bucket:
    """A token bucket that never waits: ``ready`` says whether a token is there, ``spend`` takes it."""

    __slots__ = ("tokens", "updated")

    def __init__(self, burst: int, now: float) -> None:
        self.tokens = float(burst)
        self.updated = now

    def ready(self, rate: float, burst: int, now: float) -> bool:
        if rate <= 0:
            return True
        self.tokens = min(float(burst), self.tokens + (now - self.updated) * rate)
        self.updated = now
        return self.tokens >= 1.0

    def spend(self) -> None:
        self.tokens -= 1.0


@attrs.define(slots=True)
class _Series:
    """An Event written, and the identical ones absorbed since."""

    path: str  # the Event's URL path (events.k8s.io/v1 or core v1)
    v1: bool
    last_seen: float  # monotonic
    last_patch: float  # monotonic
    last_observed: datetime.datetime
    count: int = 1
    reported: int = 1  # the count the API has


class ApiWriter:
    """Bindings, Events and pod conditions through ``client``."""

    def __init__(self, client: ApiClient, *, events_client: ApiClient | None = None,
                 controller: str = "default-scheduler",
                 instance: str | None = None, limits: EventLimits = EventLimits(),
                 collector_registry: CollectorRegistry | None = None, max_pods: int = DEFAULT_MAX_PODS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        # Events go through their own client (its own token bucket), as kube-scheduler's do: a burst of
        # Events never holds up bindings.
        self.events_client = events_client if events_client is not None else client
        self.controller = controller
        self.instance = instance or f"{controller}-{socket.gethostname()}"
        self.limits = limits
        self.max_pods = max_pods
        self._clock = clock
        # pod key -> (uid, status, reason, message, nominated node)
        self._conditions: collections.OrderedDict[str, tuple[str, str, str, str, str]] = collections.OrderedDict()
        self._bound: collections.OrderedDict[str, str] = collections.OrderedDict()  # pod key -> uid this writer bound
        self._events_v1: bool | None = None  # None until the first Event tells
        # (pod key, uid, type, reason, action, note, related) -> its series, least recently seen first
        self._series: collections.OrderedDict[tuple[str, ...], _Series] = collections.OrderedDict()
        self._pod_series: dict[str, set[tuple[str, ...]]] = {}  # pod key -> the keys of its series
        self._object_buckets: collections.OrderedDict[str, _Bucket] = collections.OrderedDict()
        self._bucket = _Bucket(limits.burst, clock())
        self._dropping = False
        events = Counter("scorer_events", "Events regarding pods: written, aggregated into the series of an "
                         "identical one, dropped by the rate limits, or failed.", ["result"],
                         registry=collector_registry)
        self._written, self._aggregated, self._dropped, self._failed = (
            events.labels(result) for result in ("written", "aggregated", "dropped", "failed"))

    async def bind(self, pod: Pod, node_name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid or None},
                "target": {"kind": "Node", "name": node_name}}
        response = await self.client.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
                                             body=body)
        if response.status in (200, 201):
            _remember(self._bound, pod.key, pod.uid, self.max_pods)
            self._conditions.pop(pod.key, None)  # a bound pod's condition is not written again
            return
        if response.status in (404, 409):
            raise BindConflict(f"binding {pod.key} to {node_name}: {response.status}: {response.reason()}")
        raise ApiUnavailable(f"binding {pod.key} to {node_name}: HTTP {response.status}: {response.reason()}")

    # --- Events ----------------------------------------------------------------------------------

    async def write_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                          related: Pod | None = None) -> None:
        now = self._clock()
        self._expire_series(now)
        key = (pod.key, pod.uid, type_, reason, action, note, related.key if related is not None else "")
        series = self._series.get(key)
        if series is not None:
            series.count += 1
            series.last_seen = now
            series.last_observed = datetime.datetime.now(datetime.UTC)
            self._series.move_to_end(key)
            due = series.reported == 1 or now - series.last_patch >= self.limits.series_interval
            if not due or await self._patch_series(key, series, now) or key in self._series:
                self._aggregated.inc()
                return
            # The Event is gone (expired): this occurrence starts a new one.
        if not self._admit(pod.key, now):
            self._dropped.inc()
            if not self._dropping:
                self._dropping = True
                log.warning("event rate limit reached: dropping new events (counted in scorer_events_total)")
            return
        if self._dropping:
            self._dropping = False
            log.info("event rate limit: writing events again")
        try:
            path, v1, stamp = await self._post_event(pod, type_, reason, action, note, related)
        except Exception:
            self._failed.inc()
            raise
        self._written.inc()
        self._add_series(key, _Series(path, v1, now, now, stamp))

    async def _post_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                          related: Pod | None = None) -> tuple[str, bool, datetime.datetime]:
        """POST a new Event; its path, whether it is events.k8s.io/v1, and its time."""
        now = datetime.datetime.now(datetime.UTC)
        name = f"{pod.name}.{time.time_ns():x}"
        if self._events_v1 is not False:
            path = f"/apis/events.k8s.io/v1/namespaces/{pod.namespace}/events"
            response = await self.events_client.request("POST", path,
                                                 body=self._event_v1(pod, name, now, type_, reason, action, note,
                                                                     related))
            if response.status != 404:
                self._events_v1 = True
                _check(response, f"Event {reason} for {pod.key}")
                return f"{path}/{name}", True, now
            self._events_v1 = False  # the group is not served: core v1 from now on
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        path = f"/api/v1/namespaces/{pod.namespace}/events"
        response = await self.events_client.request("POST", path, body={
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": _regarding(pod), "type": type_, "reason": reason, "message": note,
            "action": action, "source": {"component": self.controller}, "reportingComponent": self.controller,
            "reportingInstance": self.instance, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
            **({"related": _regarding(related)} if related is not None else {})})
        _check(response, f"Event {reason} for {pod.key}")
        return f"{path}/{name}", False, now

    def _event_v1(self, pod: Pod, name: str, now: datetime.datetime, type_: str, reason: str, action: str,
                  note: str, related: Pod | None = None) -> dict[str, object]:
        event: dict[str, object] = {
            "apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": name, "namespace": pod.namespace},
            "eventTime": now.strftime(MICRO_TIME), "reportingController": self.controller,
            "reportingInstance": self.instance, "action": action, "reason": reason, "type": type_,
            "note": note, "regarding": _regarding(pod)}
        if related is not None:  # kube's Eventf(regarding, related, ...): the preemptor of a Preempted Event
            event["related"] = _regarding(related)
        return event

    def _admit(self, pod_key: str, now: float) -> bool:
        """Whether a new Event of this pod may be written now (a token from its bucket and the global one)."""
        limits = self.limits
        bucket = self._object_buckets.get(pod_key)
        if bucket is None:
            bucket = _remember(self._object_buckets, pod_key, _Bucket(limits.per_object_burst, now),
                               limits.max_series)
        else:
            self._object_buckets.move_to_end(pod_key)
        per_object_rate = 1.0 / limits.per_object_refill_seconds if limits.per_object_refill_seconds > 0 else 0.0
        if not (bucket.ready(per_object_rate, limits.per_object_burst, now)
                and self._bucket.ready(limits.qps, limits.burst, now)):
            return False
        if per_object_rate > 0:
            bucket.spend()
        if limits.qps > 0:
            self._bucket.spend()
        return True

    async def _patch_series(self, key: tuple[str, ...], series: _Series, now: float) -> bool:
        """Bring the API's count of ``series`` up to date, if the global bucket has a token."""
        if not self._bucket.ready(self.limits.qps, self.limits.burst, now):
            return False  # later: the next repeat or flush_series()
        if self.limits.qps > 0:
            self._bucket.spend()
        count, observed = series.count, series.last_observed
        if series.v1:
            patch: dict[str, object] = {"series": {"count": count, "lastObservedTime": observed.strftime(MICRO_TIME)}}
        else:
            patch = {"count": count, "lastTimestamp": observed.strftime("%Y-%m-%dT%H:%M:%SZ")}
        try:
            response = await self.events_client.request("PATCH", series.path, body=patch, content_type=MERGE_PATCH)
            if response.status == 404:  # the Event expired (the API's event TTL): forget the series
                self._drop_series(key)
                return False
            _check(response, f"Event series {series.path}")
        except Exception:
            self._failed.inc()
            raise
        series.reported = max(series.reported, count)
        series.last_patch = now
        return True

    async def flush_series(self) -> int:
        """Patch every series whose count the API does not have yet (shutdown, or a periodic task);
        the number patched. Limited by the global bucket like every Event write."""
        patched = 0
        for key, series in list(self._series.items()):
            if series.count > series.reported and await self._patch_series(key, series, self._clock()):
                patched += 1
        return patched

    def _expire_series(self, now: float) -> None:
        window = self.limits.window
        while self._series:
            key, oldest = next(iter(self._series.items()))
            if now - oldest.last_seen < window:
                break
            self._drop_series(key)

    def _add_series(self, key: tuple[str, ...], series: _Series) -> None:
        """Remember a new series, dropping the least recently seen beyond ``max_series``."""
        self._series[key] = series
        self._pod_series.setdefault(key[0], set()).add(key)
        while len(self._series) > self.limits.max_series:
            self._drop_series(next(iter(self._series)))

    def _drop_series(self, key: tuple[str, ...]) -> None:
        if self._series.pop(key, None) is None:
            return
        keys = self._pod_series.get(key[0])
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._pod_series[key[0]]

    # --- the PodScheduled condition ---------------------------------------------------------------

    async def write_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                                  nominated_node: str | None = None) -> None:
        if status == "False" and self._bound.get(pod.key) == pod.uid:
            return  # written after this writer bound the pod: the binding set PodScheduled=True
        previous = self._conditions.get(pod.key)
        # The nomination the pod has: the one this writer wrote last, else the one the pod was read with.
        current = previous[4] if previous is not None and previous[0] == pod.uid else pod.nominated_node_name
        nominated = current if nominated_node is None else nominated_node  # None: leave it as it is
        wanted = (pod.uid, status, reason, message, nominated)
        if previous == wanted:
            self._conditions.move_to_end(pod.key)
            return
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        pod_status: dict[str, object] = {"conditions": [{
            "type": CONDITION_TYPE, "status": status, "reason": reason, "message": message, "lastProbeTime": None,
            "lastTransitionTime": stamp}]}
        if nominated != current:
            pod_status["nominatedNodeName"] = nominated or None
        response = await self.client.request("PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                                             body={"status": pod_status}, content_type=STRATEGIC_MERGE_PATCH)
        if response.status == 404:
            self._conditions.pop(pod.key, None)
            return  # the pod is gone: nothing to tell
        _check(response, f"PodScheduled condition of {pod.key}")
        _remember(self._conditions, pod.key, wanted, self.max_pods)

    # --- preemption ----------------------------------------------------------------------------

    async def delete_pod(self, pod: Pod) -> None:
        """DELETE the victim with its UID as precondition and no grace period override (as
        kube-scheduler: the pod terminates with its own terminationGracePeriodSeconds). 404
        (gone) and 409 (re-created: another UID) mean there is nothing left to delete."""
        body: dict[str, object] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if pod.uid:
            body["preconditions"] = {"uid": pod.uid}
        response = await self.client.request("DELETE", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
                                             body=body)
        if response.status in (404, 409):
            return
        _check(response, f"deleting preempted pod {pod.key}")

    async def clear_nominated_node(self, pod: Pod) -> None:
        """A strategic-merge patch of ``pods/status`` removing ``nominatedNodeName`` (kube's
        ClearNominatedNodeName); nothing is sent when the pod has none as far as this writer knows."""
        previous = self._conditions.get(pod.key)
        current = previous[4] if previous is not None and previous[0] == pod.uid else pod.nominated_node_name
        if not current:
            return
        response = await self.client.request("PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                                             body={"status": {"nominatedNodeName": None}},
                                             content_type=STRATEGIC_MERGE_PATCH)
        if response.status == 404:
            return
        _check(response, f"clearing nominatedNodeName of {pod.key}")
        if previous is not None and previous[0] == pod.uid:
            self._conditions[pod.key] = (*previous[:4], "")

    # --- VolumeBinding's writes (VolumeWriter) ----------------------------------------------------------

    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        """Write ``pv``'s claimRef and annotations, if the stored PV still has ``pv.resource_version``."""
        claim = pv.claim_ref
        claim_ref = None if claim is None else {
            "kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": claim.namespace, "name": claim.name,
            "uid": claim.uid or None, "resourceVersion": claim.resource_version or None}
        patch = {"metadata": _metadata_patch(pv.resource_version, pv.annotations), "spec": {"claimRef": claim_ref}}
        return await self._patch_storage(f"/api/v1/persistentvolumes/{pv.name}", patch,
                                         f"PersistentVolume {pv.name}", PersistentVolume)

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """Write ``pvc``'s annotations, if the stored PVC still has ``pvc.resource_version``."""
        patch = {"metadata": _metadata_patch(pvc.resource_version, pvc.annotations)}
        return await self._patch_storage(f"/api/v1/namespaces/{pvc.namespace}/persistentvolumeclaims/{pvc.name}",
                                         patch, f"PersistentVolumeClaim {pvc.key}", PersistentVolumeClaim)

    async def _patch_storage(self, path: str, patch: Mapping[str, object], what: str, kind: type[_S]) -> _S:
        """A merge patch of a PV or PVC; the stored object decoded."""
        response = await self.client.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        if response.status in (404, 409):
            raise UpdateConflict(f"updating {what}: {response.status}: {response.reason()}")
        _check(response, f"updating {what}")
        try:
            stored = storage_from_dict(response.json(), origin=f"PATCH {path}", kind=kind.__name__)
        except orjson.JSONDecodeError as error:
            raise ApiUnavailable(f"updating {what}: the answer is not JSON: {error}") from None
        if not isinstance(stored, kind):
            raise ApiUnavailable(f"updating {what}: the answer is a {type(stored).__name__}")
        return stored

    def forget(self, pod_key: str) -> None:
        """A deleted pod: drop what this writer remembers of it, its Event series included."""
        self._conditions.pop(pod_key, None)
        self._bound.pop(pod_key, None)
        self._object_buckets.pop(pod_key, None)
        for key in self._pod_series.pop(pod_key, ()):
            self._series.pop(key, None)

    def remembered(self) -> dict[str, int]:
        """How many entries each per-pod memory holds (tests, diagnostics)."""
        return {"conditions": len(self._conditions), "bound": len(self._bound), "series": len(self._series),
                "series_pods": len(self._pod_series), "buckets": len(self._object_buckets)}


def _remember(entries: collections.OrderedDict[str, _V], key: str, value: _V, cap: int) -> _V:
    """Set ``key`` as the most recent entry, dropping the least recent ones beyond ``cap``."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > cap:
        entries.popitem(last=False)
    return value


def _metadata_patch(resource_version: str, annotations: dict[str, str]) -> dict[str, object]:
    """``metadata`` of a merge patch: the resourceVersion precondition (when known) and the annotations."""
    metadata: dict[str, object] = {"annotations": dict(annotations)}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    return metadata


def _regarding(pod: Pod) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}


def _check(response: ApiResponse, what: str) -> None:
    if response.status >= 300:
        raise ApiUnavailable(f"{what}: HTTP {response.status}: {response.reason()}")
