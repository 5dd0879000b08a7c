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
  API group is not served.
* ``write_pod_condition``: a strategic-merge patch of ``pods/status`` with
  ``PodScheduled``, only when it differs from what this writer wrote last for
  that pod, and never ``False`` for a pod it bound.

Not here yet (the service issue): aggregating and rate-limiting Events of
many unschedulable pods, and ``nominatedNodeName``.
"""

from __future__ import annotations

import datetime
import socket
import time

from scorer.cluster.interface import BindConflict
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable
from scorer.model import Pod

CONDITION_TYPE = "PodScheduled"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"


class ApiWriter:
    """Bindings, Events and pod conditions through ``client``."""

    def __init__(self, client: ApiClient, *, controller: str = "default-scheduler",
                 instance: str | None = None) -> None:
        self.client = client
        self.controller = controller
        self.instance = instance or f"{controller}-{socket.gethostname()}"
        self._conditions: dict[str, tuple[str, str, str, str]] = {}  # pod key -> (uid, status, reason, message)
        self._bound: set[tuple[str, str]] = set()  # (pod key, uid) this writer bound
        self._events_v1: bool | None = None  # None until the first Event tells

    async def bind(self, pod: Pod, node_name: str) -> None:
        body = {"apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid or None},
                "target": {"kind": "Node", "name": node_name}}
        response = await self.client.request("POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
                                             body=body)
        if response.status in (200, 201):
            self._bound.add((pod.key, pod.uid))
            return
        if response.status in (404, 409):
            raise BindConflict(f"binding {pod.key} to {node_name}: {response.status}: {response.reason()}")
        raise ApiUnavailable(f"binding {pod.key} to {node_name}: HTTP {response.status}: {response.reason()}")

    async def write_event(self, pod: Pod, type_: str, reason: str, action: str, note: str) -> None:
        now = datetime.datetime.now(datetime.UTC)
        name = f"{pod.name}.{time.time_ns():x}"
        if self._events_v1 is not False:
            response = await self.client.request("POST", f"/apis/events.k8s.io/v1/namespaces/{pod.namespace}/events",
                                                 body=self._event_v1(pod, name, now, type_, reason, action, note))
            if response.status != 404:
                self._events_v1 = True
                _check(response, f"Event {reason} for {pod.key}")
                return
            self._events_v1 = False  # the group is not served: core v1 from now on
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        response = await self.client.request("POST", f"/api/v1/namespaces/{pod.namespace}/events", body={
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": pod.namespace},
            "involvedObject": _regarding(pod), "type": type_, "reason": reason, "message": note,
            "action": action, "source": {"component": self.controller}, "reportingComponent": self.controller,
            "reportingInstance": self.instance, "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1})
        _check(response, f"Event {reason} for {pod.key}")

    def _event_v1(self, pod: Pod, name: str, now: datetime.datetime, type_: str, reason: str, action: str,
                  note: str) -> dict[str, object]:
        return {"apiVersion": "events.k8s.io/v1", "kind": "Event",
                "metadata": {"name": name, "namespace": pod.namespace},
                "eventTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"), "reportingController": self.controller,
                "reportingInstance": self.instance, "action": action, "reason": reason, "type": type_,
                "note": note, "regarding": _regarding(pod)}

    async def write_pod_condition(self, pod: Pod, status: str, reason: str, message: str) -> None:
        if status == "False" and (pod.key, pod.uid) in self._bound:
            return  # written after this writer bound the pod: the binding set PodScheduled=True
        wanted = (pod.uid, status, reason, message)
        if self._conditions.get(pod.key) == wanted:
            return
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {"status": {"conditions": [{"type": CONDITION_TYPE, "status": status, "reason": reason,
                                            "message": message, "lastProbeTime": None,
                                            "lastTransitionTime": stamp}]}}
        response = await self.client.request("PATCH", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/status",
                                             body=patch, content_type=STRATEGIC_MERGE_PATCH)
        if response.status == 404:
            self._conditions.pop(pod.key, None)
            return  # the pod is gone: nothing to tell
        _check(response, f"PodScheduled condition of {pod.key}")
        self._conditions[pod.key] = wanted

    def forget(self, pod_key: str) -> None:
        """A deleted pod: drop what this writer remembers of it."""
        self._conditions.pop(pod_key, None)
        self._bound = {entry for entry in self._bound if entry[0] != pod_key}


def _regarding(pod: Pod) -> dict[str, str]:
    return {"apiVersion": "v1", "kind": "Pod", "namespace": pod.namespace, "name": pod.name, "uid": pod.uid}


def _check(response: ApiResponse, what: str) -> None:
    if response.status >= 300:
        raise ApiUnavailable(f"{what}: HTTP {response.status}: {response.reason()}")
