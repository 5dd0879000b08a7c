"""The end-to-end bench's API access (``scorer.bench.e2e``): a Setup as API requests, the harness's own
unthrottled client, and the watch that stamps each pod's bind.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Container, Iterable, Mapping
from typing import Any

import aiohttp
import attrs
import orjson

from scorer.bench.controlplane import (
    TOKEN,
)
from scorer.bench.e2e_config import (
    E2EError,
)
from scorer.bench.spec import Setup

CONNECTIONS = 64  # concurrent keep-alive connections creating the objects
ADMISSION_SECONDS = 30.0  # the longest wait for the API server's admission to know a new PriorityClass


# --- the Setup as API requests ---------------------------------------------------------------------------


# (apiVersion, kind) -> (the version served by kube-apiserver 1.20, the collection's path, namespaced)
COLLECTIONS: dict[tuple[str, str], tuple[str, str, bool]] = {
    ("v1", "Namespace"): ("v1", "/api/v1/namespaces", False),
    ("v1", "Node"): ("v1", "/api/v1/nodes", False),
    ("v1", "Pod"): ("v1", "/api/v1/pods", True),
    ("v1", "Service"): ("v1", "/api/v1/services", True),
    ("v1", "ReplicationController"): ("v1", "/api/v1/replicationcontrollers", True),
    ("v1", "PersistentVolumeClaim"): ("v1", "/api/v1/persistentvolumeclaims", True),
    ("v1", "PersistentVolume"): ("v1", "/api/v1/persistentvolumes", False),
    ("storage.k8s.io/v1", "StorageClass"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses", False),
    ("storage.k8s.io/v1beta1", "StorageClass"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/storageclasses",
                                                 False),
    ("storage.k8s.io/v1", "CSINode"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes", False),
    ("storage.k8s.io/v1beta1", "CSINode"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csinodes", False),
    ("storage.k8s.io/v1", "CSIDriver"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csidrivers", False),
    ("storage.k8s.io/v1beta1", "CSIDriver"): ("storage.k8s.io/v1", "/apis/storage.k8s.io/v1/csidrivers", False),
    ("apps/v1", "ReplicaSet"): ("apps/v1", "/apis/apps/v1/replicasets", True),
    ("apps/v1", "StatefulSet"): ("apps/v1", "/apis/apps/v1/statefulsets", True),
    ("apps/v1", "Deployment"): ("apps/v1", "/apis/apps/v1/deployments", True),
    ("policy/v1", "PodDisruptionBudget"): ("policy/v1beta1", "/apis/policy/v1beta1/poddisruptionbudgets", True),
    ("policy/v1beta1", "PodDisruptionBudget"): ("policy/v1beta1", "/apis/policy/v1beta1/poddisruptionbudgets",
                                                True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("scheduling.k8s.io/v1",
                                                "/apis/scheduling.k8s.io/v1/priorityclasses", False),
}
# Set by the API server for the object it stores: not sent back.
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "selfLink", "generation",
                   "deletionTimestamp", "deletionGracePeriodSeconds")
SERVICE_ALLOCATED = frozenset({"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "healthCheckNodePort"})
BUILT_IN_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


@attrs.frozen(slots=True)
class Request:
    """One object to POST: its collection's path (namespace filled in) and the body."""

    path: str
    body: dict[str, Any]
    status: dict[str, Any] | None = None  # set after the create (a PodDisruptionBudget's disruptionsAllowed)


def request_for(obj: Mapping[str, Any]) -> Request:
    """The object, cleaned of what the server sets, posted to its collection (the version 1.20 serves)."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    if key not in COLLECTIONS:
        raise E2EError(f"{key[1] or '?'} {key[0] or '?'} objects cannot be created by the end-to-end bench")
    version, path, namespaced = COLLECTIONS[key]
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in SERVER_METADATA}
    body = {**obj, "apiVersion": version, "metadata": metadata}
    if namespaced:
        namespace = metadata.setdefault("namespace", "default")
        base, _, plural = path.rpartition("/")
        path = f"{base}/namespaces/{namespace}/{plural}"
    if key[1] == "Service":
        body["spec"] = service_spec(body.get("spec") or {})
    status = None
    if key[1] not in ("Node", "Namespace"):
        status = body.pop("status", None)  # ignored on create; a node's status is kept (what schedulers read)
    # no disruption controller runs: a budget keeps the disruptions its file allowed, set after the create
    return Request(path, body, status if key[1] == "PodDisruptionBudget" and status else None)


def service_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Without the addresses and node ports the user's cluster allocated (they would clash when scaled);
    a headless Service stays headless."""
    out = {k: v for k, v in spec.items() if k not in SERVICE_ALLOCATED}
    if spec.get("clusterIP") == "None":
        out["clusterIP"] = "None"
    if "ports" in out:
        out["ports"] = [{k: v for k, v in port.items() if k != "nodePort"} for port in out["ports"]]
    return out


@attrs.frozen(slots=True)
class Objects:
    """The Setup as phases of creations (each phase done before the next starts)."""

    first: list[Request]  # namespaces, PriorityClasses
    workloads: list[Request]
    storage: list[Request]  # StorageClasses, CSIDrivers, CSINodes, PersistentVolumes
    claims: list[Request]  # PersistentVolumeClaims (after the volumes: a claim naming a volume not there is Lost)
    nodes: list[Request]
    init: list[Request]
    measured: list[Request]
    keys: list[tuple[str, str]]  # (namespace, name) of each measured pod


def setup_objects(setup: Setup) -> Objects:
    classes: dict[str, dict[str, Any]] = {}
    init = [pod_request(pod, classes, bound=True) for pod in setup.init]
    measured = [pod_request(pod, classes, bound=False) for pod in setup.measured]
    workloads = [request_for(obj) for obj in setup.workloads if obj.get("kind") != "PriorityClass"]
    for obj in setup.workloads:
        if obj.get("kind") == "PriorityClass":
            classes[obj["metadata"]["name"]] = dict(obj)
    storage = [request_for(obj) for obj in setup.storage if obj.get("kind") != "PersistentVolumeClaim"]
    claims = [request_for(obj) for obj in setup.storage if obj.get("kind") == "PersistentVolumeClaim"]
    namespaces = {(ns.get("metadata") or {}).get("name"): ns for ns in setup.namespaces}
    for request in (*workloads, *storage, *claims, *init, *measured):
        name = request.body["metadata"].get("namespace")
        if name and name not in namespaces:
            namespaces[name] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    first = [request_for({**ns, "status": {}}) for ns in namespaces.values()]
    first += [request_for(cls) for cls in classes.values()]
    return Objects(first=first, workloads=workloads, storage=storage, claims=claims,
                   nodes=[request_for(node) for node in setup.nodes],
                   init=init, measured=measured,
                   keys=[(r.body["metadata"]["namespace"], r.body["metadata"]["name"]) for r in measured])


def pod_request(pod: Mapping[str, Any], classes: dict[str, dict[str, Any]], *, bound: bool) -> Request:
    """A pod to create: bound or not as asked; a priority becomes a PriorityClass (the API server computes
    ``spec.priority`` from the class and refuses a pod that sets it), created with the pod's value."""
    request = request_for(pod)
    spec = dict(request.body.get("spec") or {})
    if not bound:
        spec.pop("nodeName", None)
    priority = spec.pop("priority", None)
    policy = spec.pop("preemptionPolicy", None)
    name = spec.get("priorityClassName")
    if priority is not None or name:
        if not name:
            value = int(priority or 0)
            name = f"bench-priority-{'m' if value < 0 else ''}{abs(value)}{'-never' if policy == 'Never' else ''}"
            spec["priorityClassName"] = name
        if name not in BUILT_IN_PRIORITY_CLASSES and name not in classes:
            cls: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                                   "metadata": {"name": name}, "value": int(priority or 0)}
            if policy:
                cls["preemptionPolicy"] = policy
            classes[name] = cls
    return Request(request.path, {**request.body, "spec": spec})


# --- API access (the harness's own, unthrottled: measuring must not go through the code under test) -----


async def delete_pod_now(session: aiohttp.ClientSession, url: str, namespace: str, name: str, uid: str) -> int | None:
    """DELETE pod ``name`` (of ``uid`` only) with no grace period; the answer's status, None when none came."""
    body = orjson.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                         "preconditions": {"uid": uid}})
    try:
        async with session.delete(f"{url}/api/v1/namespaces/{namespace}/pods/{name}", data=body,
                                  timeout=aiohttp.ClientTimeout(total=30)) as resp:
            await resp.read()
            return resp.status
    except (aiohttp.ClientError, TimeoutError):
        return None


class Api:
    """An aiohttp session to the control plane: creations by a pool of workers, a LIST, deletes, a scrape."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=False, keepalive_timeout=60),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"},
            read_bufsize=2**21)

    async def close(self) -> None:
        await self.session.close()

    async def create(self, request: Request, deadline: float) -> None:
        """POST one object (409, already there, is fine), then its status when it carries one."""
        await self.send("POST", request.path, request.body, request, deadline)
        if request.status is not None:
            item = f"{request.path}/{request.body['metadata']['name']}/status"
            await self.send("PATCH", item, {"status": request.status}, request, deadline,
                            content_type="application/merge-patch+json")

    async def send(self, method: str, path: str, body: dict[str, Any], request: Request, deadline: float,
                   content_type: str = "application/json", retried: Container[int] = ()) -> None:
        """One write; 429, 5xx, transport errors and the ``retried`` statuses are retried until the deadline."""
        data = orjson.dumps(body)
        delay, status, text = 0.05, 0, b""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                last = f" (last answer {status}: {status_message(text)})" if status else ""
                raise E2EError(f"deadline reached while creating objects in {request.path}{last}")
            try:
                async with self.session.request(method, self.url + path, data=data,
                                                headers={"Content-Type": content_type},
                                                timeout=aiohttp.ClientTimeout(total=min(30.0, remaining))) as resp:
                    status, text = resp.status, await resp.read()
                    if status in (200, 201, 202, 409):
                        return
                    if status != 429 and status < 500 and status not in retried:
                        name = request.body["metadata"].get("name", "?")
                        raise E2EError(f"creating {request.body.get('kind')} {name}: the API server answered "
                                       f"{status}: {status_message(text)}")
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 2.0)

    async def wait_admitted(self, classes: Iterable[str], deadline: float) -> None:
        """Waits until the API server's admission knows each PriorityClass of ``classes``: its Priority plugin
        reads them from an informer, so a pod naming a class created a moment ago can be refused (403 "no
        PriorityClass with name ... was found"). A dry-run pod naming the class (``send``, that 403 retried
        too) is admitted once it is known, for at most ``ADMISSION_SECONDS``."""
        until = min(deadline, time.monotonic() + ADMISSION_SECONDS)
        for name in classes:
            probe = Request("/api/v1/namespaces/default/pods?dryRun=All",
                            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"priority-probe-{name}"},
                             "spec": {"priorityClassName": name, "containers": [{"name": "probe", "image": "probe"}]}})
            await self.send("POST", probe.path, probe.body, probe, until, retried=(403,))

    async def create_all(self, requests: Iterable[Request], deadline: float) -> float:
        """Creates every object with CONNECTIONS workers; returns the seconds it took."""
        start = time.monotonic()
        iterator = iter(requests)

        async def worker() -> None:
            for request in iterator:  # one shared iterator: each request is taken once
                await self.create(request, deadline)

        await asyncio.gather(*(worker() for _ in range(CONNECTIONS)))
        return time.monotonic() - start

    async def get_json(self, path: str, deadline: float) -> dict[str, Any]:
        timeout = aiohttp.ClientTimeout(total=max(0.1, min(60.0, deadline - time.monotonic())))
        async with self.session.get(self.url + path, timeout=timeout) as resp:
            body = await resp.read()
            if resp.status != 200:
                raise E2EError(f"GET {path}: the API server answered {resp.status}: {status_message(body)}")
            result: dict[str, Any] = orjson.loads(body)
            return result

    async def delete_now(self, namespace: str, name: str, uid: str) -> bool:
        """DELETE a pod with no grace period (what a kubelet does once the containers stopped)."""
        return await delete_pod_now(self.session, self.url, namespace, name, uid) in (200, 202)

    async def status(self, port: int, path: str) -> int | None:
        """The HTTP status of a GET of ``path`` on a local server (a probe), None while nothing answers."""
        try:
            async with self.session.get(f"http://127.0.0.1:{port}{path}",
                                        timeout=aiohttp.ClientTimeout(total=2)) as resp:
                await resp.read()
                return resp.status
        except (aiohttp.ClientError, TimeoutError):
            return None

    async def metrics(self, port: int) -> str | None:
        try:
            async with self.session.get(f"http://127.0.0.1:{port}/metrics",
                                        timeout=aiohttp.ClientTimeout(total=5)) as resp:
                return await resp.text() if resp.status == 200 else None
        except (aiohttp.ClientError, TimeoutError):
            return None


def status_message(body: bytes) -> str:
    """The ``message`` of a Status answer, else the body's start, on one line."""
    try:
        message = str(orjson.loads(body).get("message"))
    except (orjson.JSONDecodeError, AttributeError):
        message = body[:300].decode(errors="replace")
    return " ".join(message.split())


class _Watch:
    """A WATCH of ``path`` (``selector``: its fieldSelector) from ``resource_version``, resumed from the last
    version seen when the connection ends, until ``complete`` is set or the deadline; each event goes to
    ``on_object`` with the monotonic time it arrived. ``what`` names it in errors."""

    path = ""
    selector = ""
    what = ""

    def __init__(self, api: Api, resource_version: str) -> None:
        self.api = api
        self.resource_version = resource_version
        self.established = asyncio.Event()
        self.complete = asyncio.Event()

    async def run(self, deadline: float) -> None:
        while not self.complete.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                return
            params = {"watch": "1", "resourceVersion": self.resource_version, "allowWatchBookmarks": "true",
                      "timeoutSeconds": str(int(min(remaining, 1800)))}
            if self.selector:
                params["fieldSelector"] = self.selector
            try:
                async with self.api.session.get(self.api.url + self.path, params=params,
                                                timeout=aiohttp.ClientTimeout(total=remaining + 5)) as resp:
                    if resp.status != 200:
                        raise E2EError(f"the {self.what} WATCH was answered {resp.status}: "
                                       f"{status_message(await resp.read())}")
                    self.established.set()
                    async for line in resp.content:
                        if line.strip():
                            self.on_event(orjson.loads(line), time.monotonic())
                        if self.complete.is_set():
                            return
            except (aiohttp.ClientError, TimeoutError):  # resumed from the last resourceVersion seen
                await asyncio.sleep(0.2)

    def on_event(self, event: dict[str, Any], now: float) -> None:
        obj = event.get("object") or {}
        if event.get("type") == "ERROR":  # e.g. 410 Expired: times after the gap would be wrong
            raise E2EError(f"the {self.what} watch failed: {obj.get('message') or obj}")
        metadata = obj.get("metadata") or {}
        self.resource_version = metadata.get("resourceVersion", self.resource_version)
        if event.get("type") in ("ADDED", "MODIFIED"):
            self.on_object(obj, metadata, now)

    def on_object(self, obj: dict[str, Any], metadata: dict[str, Any], now: float) -> None:
        raise NotImplementedError


class BindWatch(_Watch):
    """Stamps each measured pod when a WATCH first shows it bound; removes deleted bound pods at once."""

    path = "/api/v1/pods"
    what = "pod"

    def __init__(self, api: Api, keys: Iterable[tuple[str, str]], resource_version: str) -> None:
        super().__init__(api, resource_version)
        self.pending = set(keys)
        self.bound: dict[tuple[str, str], tuple[float, str]] = {}  # (ns, name) -> (monotonic time, node)
        self.rebinds = 0  # a bound pod seen on another node: must stay 0
        self.victims = 0  # bound pods the scheduler deleted (preemption), removed by the harness
        self.deleting: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.first_bound = asyncio.Event()
        self.last_bind = time.monotonic()

    def on_object(self, obj: dict[str, Any], metadata: dict[str, Any], now: float) -> None:
        node = (obj.get("spec") or {}).get("nodeName")
        if node and metadata.get("deletionTimestamp"):
            self.remove(metadata)
        key = (metadata.get("namespace", ""), metadata.get("name", ""))
        if not node or key not in self.pending:
            return
        seen = self.bound.get(key)
        if seen is None:
            self.bound[key] = (now, node)
            self.last_bind = now
            self.first_bound.set()
            if len(self.bound) == len(self.pending):
                self.complete.set()
        elif seen[1] != node:
            self.rebinds += 1

    def remove(self, metadata: Mapping[str, Any]) -> None:
        uid = str(metadata.get("uid", ""))
        if uid in self.deleting:
            return
        self.deleting.add(uid)
        task = asyncio.create_task(self._delete(metadata["namespace"], metadata["name"], uid),
                                   name=f"delete {metadata['namespace']}/{metadata['name']}")
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _delete(self, namespace: str, name: str, uid: str) -> None:
        if await self.api.delete_now(namespace, name, uid):
            self.victims += 1

    async def stop(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


class ScheduledEventWatch(_Watch):
    """Stamps each measured pod when a WATCH of Events first shows its ``Scheduled`` Event (kube-scheduler's
    and scorer's, events.k8s.io/v1 or core v1: the core v1 view shows both, ``regarding`` as
    ``involvedObject``). ``wait_for(keys)`` sets ``complete`` once each of ``keys`` has one."""

    path = "/api/v1/events"
    selector = "reason=Scheduled"
    what = "Event"

    def __init__(self, api: Api, keys: Iterable[tuple[str, str]], resource_version: str) -> None:
        super().__init__(api, resource_version)
        self.measured = set(keys)
        self.seen: dict[tuple[str, str], float] = {}  # (ns, name) -> monotonic time of its first Scheduled Event
        self.awaited: set[tuple[str, str]] | None = None

    def on_object(self, obj: dict[str, Any], metadata: dict[str, Any], now: float) -> None:
        regarding = obj.get("involvedObject") or {}
        key = (str(regarding.get("namespace", "")), str(regarding.get("name", "")))
        if regarding.get("kind") != "Pod" or key not in self.measured or key in self.seen:
            return
        self.seen[key] = now
        self._check()

    def wait_for(self, keys: Iterable[tuple[str, str]]) -> None:
        self.awaited = set(keys)
        self._check()

    def _check(self) -> None:
        if self.awaited is not None and self.awaited <= self.seen.keys():
            self.complete.set()
