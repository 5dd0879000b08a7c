"""scorer.kube.reflector: unit tests on a scripted client, then the real API server behind the fault proxy."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import random
import re
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from faultproxy import FaultProxy, status_body, watch_error_line
from prometheus_client import CollectorRegistry

from scorer.cluster.memory import workload_key
from scorer.kube import reflector as reflector_module
from scorer.kube.apiresources import RESOURCES, unassigned_pod
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable
from scorer.kube.config import load_kubeconfig
from scorer.kube.reflector import (
    GC_PAUSE,
    RELIST_REASONS,
    WATCH_RESTART_REASONS,
    Reflector,
    ReflectorMetrics,
    RetryDelays,
    WatchError,
    retry_after,
)
from scorer.model import pod_from_dict
from scorer.tasks import Backoff

kube = pytest.mark.kube
pytest_plugins = ("faultproxy",)
LOGGER = "scorer.kube.reflector"


# --- helpers shared with tests/test_kube_source.py


class Recorder:
    """ObjectHandlers that record ``(change, kind, key, resourceVersion or labels)``."""

    def __init__(self, fail_on: str = "") -> None:
        self.events: list[tuple[str, str, str]] = []
        self.fail_on = fail_on  # a key whose add raises

    def _record(self, change: str, kind: str, obj: Any) -> None:
        key = (obj.key if kind == "pod" else workload_key(obj) if kind == "workload"
               else f"{type(obj).__name__}/{obj.key}" if kind == "storage" else obj.name)
        self.events.append((change, kind, key))
        if key == self.fail_on:
            raise RuntimeError(f"handler bug on {key}")

    def on_node_add(self, node: Any) -> None:
        self._record("add", "node", node)

    def on_node_update(self, old: Any, new: Any) -> None:
        self._record("update", "node", new)

    def on_node_delete(self, node: Any) -> None:
        self._record("delete", "node", node)

    def on_pod_add(self, pod: Any) -> None:
        self._record("add", "pod", pod)

    def on_pod_update(self, old: Any, new: Any) -> None:
        assert old.key == new.key
        self._record("update", "pod", new)

    def on_pod_delete(self, pod: Any) -> None:
        self._record("delete", "pod", pod)

    def on_namespace_add(self, namespace: Any) -> None:
        self._record("add", "namespace", namespace)

    def on_namespace_update(self, old: Any, new: Any) -> None:
        self._record("update", "namespace", new)

    def on_namespace_delete(self, namespace: Any) -> None:
        self._record("delete", "namespace", namespace)

    def on_workload_add(self, obj: Any) -> None:
        self._record("add", "workload", obj)

    def on_workload_update(self, old: Any, new: Any) -> None:
        assert workload_key(old) == workload_key(new)
        self._record("update", "workload", new)

    def on_workload_delete(self, obj: Any) -> None:
        self._record("delete", "workload", obj)

    def on_storage_add(self, obj: Any) -> None:
        self._record("add", "storage", obj)

    def on_storage_update(self, old: Any, new: Any) -> None:
        assert type(old) is type(new) and old.key == new.key
        self._record("update", "storage", new)

    def on_storage_delete(self, obj: Any) -> None:
        self._record("delete", "storage", obj)

    def of(self, prefix: str) -> list[tuple[str, str]]:
        """(change, key) of the events whose key starts with ``prefix``."""
        return [(change, key) for change, _, key in self.events if key.startswith(prefix)]


async def until(predicate: Callable[[], Any], what: str, timeout: float = 15.0) -> None:
    """Wait (bounded) until ``predicate()`` is true."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def running(coroutine):
    """Run ``coroutine`` as a task for the block, then cancel it and check it ended by the cancellation."""
    task = asyncio.create_task(coroutine)
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert task.cancelled()


def sample(collector_registry: CollectorRegistry, name: str, **labels: str) -> float:
    return collector_registry.get_sample_value(name, labels) or 0.0


# --- unit tests on a scripted client


def pod_json(name: str, version: str, cpu: str = "100m", namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version, "uid": f"u-{name}"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}, "status": {}}


def page(items: list[dict], version: str, token: str = "") -> ApiResponse:
    meta = {"resourceVersion": version, **({"continue": token} if token else {})}
    return ApiResponse(200, orjson.dumps({"kind": "PodList", "metadata": meta, "items": items}))


def line(type_: str, obj: dict) -> bytes:
    return orjson.dumps({"type": type_, "object": obj}) + b"\n"


class FakeStream:
    """A watch's answer: ``lines`` (an exception is raised where it stands), then the end of the body, or
    (``hold``) a watch left open."""

    def __init__(self, status: int = 200, lines: tuple[bytes | Exception, ...] = (), *,
                 headers: dict[str, str] | None = None, body: bytes = b"", hold: bool = False) -> None:
        self.status = status
        self.headers = headers or {}
        self._lines = list(lines)
        self._body = body
        self._hold = hold

    async def readline(self) -> bytes:
        if not self._lines:
            if self._hold:
                await asyncio.Event().wait()
            return b""
        item = self._lines.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    async def readchunk(self) -> bytes:
        chunk, self._body = self._body[:LIST_CHUNK], self._body[LIST_CHUNK:]
        return chunk

    async def read(self) -> bytes:
        body, self._body = self._body, b""
        return body

    def response(self, body: bytes) -> ApiResponse:
        return ApiResponse(self.status, body, self.headers)


# A scripted LIST answer comes in chunks of this many bytes, so that items straddle chunks.
LIST_CHUNK = 37


class FakeClient:
    """Answers LISTs and watches from scripts; once a script is used up, the call waits forever."""

    def __init__(self, lists: list[ApiResponse | Exception], watches: list[FakeStream | Exception]) -> None:
        self.lists = lists
        self.watches = watches
        self.calls: list[tuple[str, dict[str, str]]] = []
        self.blocked = False  # a call found its script used up
        self.gc_enabled: list[bool] = []  # gc.isenabled() at each LIST

    async def _block(self) -> None:
        self.blocked = True
        await asyncio.Event().wait()

    async def request(self, method: str, path: str, *, params: dict[str, str] | None = None,
                      body: Any = None) -> ApiResponse:
        """A discovery request: the next of ``lists``."""
        return await self._next_list(params)

    async def _next_list(self, params: dict[str, str] | None) -> ApiResponse:
        self.calls.append(("list", dict(params or {})))
        self.gc_enabled.append(gc.isenabled())
        if not self.lists:
            await self._block()
        item = self.lists.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, *, params: dict[str, str] | None = None,
                     read_timeout: float | None = None, timed: bool = False, coalesce: float = 0.0):
        if "watch" not in (params or {}):  # a LIST, read as it arrives
            answer = await self._next_list(params)
            yield FakeStream(answer.status, headers=dict(answer.headers), body=answer.body)
            return
        self.calls.append(("watch", dict(params or {})))
        if not self.watches:
            await self._block()
        item = self.watches.pop(0)
        if isinstance(item, Exception):
            raise item
        yield item


# Short waits for the scripted tests (the tests of the waits themselves record them instead).
FAST = RetryDelays(connect=0.01, connect_cap=0.05, relist=0.01, relist_cap=0.05, gone_jitter=0.01)


def fake_reflector(client: FakeClient, **kwargs: Any) -> Reflector:
    kwargs.setdefault("delays", FAST)
    return Reflector(client, RESOURCES["pods"], metrics=ReflectorMetrics(CollectorRegistry()),
                     rng=random.Random(1), **kwargs)


async def settle(client: FakeClient, reflector: Reflector, recorder: Recorder) -> None:
    """Run the reflector until it waits on a call past its scripts."""
    async with running(reflector.run(recorder)):
        await until(lambda: client.blocked, "the scripts to be used up", 5)


def test_backoff_doubles_up_to_the_cap_with_jitter_and_resets() -> None:
    backoff = Backoff(0.2, 1.0, jitter=0.5, rng=random.Random(3))
    delays = [backoff.next() for _ in range(6)]
    for delay, base in zip(delays, (0.2, 0.4, 0.8, 1.0, 1.0, 1.0), strict=True):
        assert base <= delay <= min(1.0, base * 1.5)
    backoff.reset()
    assert backoff.next() <= 0.3


def test_retry_after_is_seconds_capped() -> None:
    assert retry_after({"Retry-After": "3"}, 30.0) == 3.0
    assert retry_after({"retry-after": "900"}, 30.0) == 30.0
    assert retry_after({"Retry-After": "-1"}, 30.0) == 0.0
    assert retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 30.0) is None
    assert retry_after({"Retry-After": "nan"}, 30.0) is None
    assert retry_after({}, 30.0) is None


def test_gc_pauses_nest_and_restore_the_state_found_first() -> None:
    assert gc.isenabled()
    with GC_PAUSE.paused():
        assert not gc.isenabled()
        with GC_PAUSE.paused():
            pass
        assert not gc.isenabled()  # the outer list is still going
    assert gc.isenabled()
    gc.disable()
    try:
        with GC_PAUSE.paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


async def test_pages_are_listed_then_the_watch_starts_from_the_lists_version() -> None:
    client = FakeClient([page([pod_json("a", "5"), pod_json("b", "6")], "10", token="t1"),
                         page([pod_json("c", "7")], "10")], [])
    reflector, recorder = fake_reflector(client, page_size=2, watch_timeout=100), Recorder()
    gc.unfreeze()
    await settle(client, reflector, recorder)
    assert client.gc_enabled == [False, False] and gc.isenabled()  # paused during the list only
    assert gc.get_freeze_count() > 0  # then the first cache was frozen
    gc.unfreeze()
    # The first list asks for the API server's watch cache (resourceVersion=0); its next pages do not.
    assert client.calls[:2] == [("list", {"limit": "2", "resourceVersion": "0"}),
                                ("list", {"limit": "2", "continue": "t1"})]
    kind, params = client.calls[2]
    assert (kind, params["watch"], params["allowWatchBookmarks"], params["resourceVersion"]) == (
        "watch", "1", "true", "10")
    assert 90 <= int(params["timeoutSeconds"]) <= 110
    assert recorder.of("ns/") == [("add", "ns/a"), ("add", "ns/b"), ("add", "ns/c")]
    assert reflector.has_synced() and sorted(reflector.store) == ["ns/a", "ns/b", "ns/c"]
    assert sample(reflector.metrics.collector_registry, "scorer_reflector_lists_total", resource="pods") == 1
    # Every re-list and watch-restart reason exists at 0 from the start: increase() sees the first one.
    for family, reasons in (("relists", RELIST_REASONS), ("watch_restarts", WATCH_RESTART_REASONS)):
        for reason in reasons:
            assert reflector.metrics.collector_registry.get_sample_value(
                f"scorer_reflector_{family}_total", {"resource": "pods", "reason": reason}) == 0, (family, reason)


def waiting_pod(name: str, version: str, priority: int | None = None) -> dict[str, Any]:
    pod = pod_json(name, version)
    if priority is not None:
        pod["spec"]["priority"] = priority
    return pod


class SyncRecorder(Recorder):
    """A Recorder that also notes, per pod added, whether the reflector had synced then."""

    def __init__(self, reflector: Reflector) -> None:
        super().__init__()
        self.reflector = reflector
        self.synced_at_add: dict[str, bool] = {}
        self.delivered_at_add: set[bool] = set()

    def on_pod_add(self, pod: Any) -> None:
        self.synced_at_add[pod.key] = self.reflector.has_synced()
        self.delivered_at_add.add(self.reflector.has_delivered())
        super().on_pod_add(pod)


async def test_the_first_list_delivers_waiting_pods_after_the_sync_highest_priority_first(monkeypatch) -> None:
    monkeypatch.setattr(reflector_module, "DEFERRED_CHUNK", 2)
    bound = pod_json("bound", "1")
    bound["spec"]["nodeName"] = "n1"
    nominated = pod_json("nominated", "2")
    nominated["status"] = {"nominatedNodeName": "n1"}
    done = pod_json("done", "3")
    done["status"] = {"phase": "Succeeded"}
    items = [waiting_pod("none", "6"), waiting_pod("low", "4", 0), bound, waiting_pod("high-2", "7", 100),
             nominated, done, waiting_pod("high-1", "5", 100), waiting_pod("neg", "8", -5)]
    client = FakeClient([page(items, "10")], [])
    reflector = fake_reflector(client, watch_timeout=100)
    recorder = SyncRecorder(reflector)
    await settle(client, reflector, recorder)
    # What decides where a pod fits (bound, nominated, finished pods) comes with the sync; the waiting pods
    # after it, by priority (highest first). A list from the watch cache comes in no order: scorer takes
    # it by key, as etcd's (ties too).
    assert recorder.of("ns/") == [("add", f"ns/{name}") for name in (
        "bound", "done", "nominated", "high-1", "high-2", "low", "none", "neg")]
    assert recorder.synced_at_add == {"ns/bound": False, "ns/nominated": False, "ns/done": False,
                                      "ns/high-1": True, "ns/high-2": True, "ns/low": True, "ns/none": True,
                                      "ns/neg": True}
    # Ready (/readyz) once the waiting pods were delivered too, as kube-scheduler once its informers synced.
    assert recorder.delivered_at_add == {False} and reflector.has_delivered()
    # The watch starts once every waiting pod was delivered, from the list's resourceVersion.
    assert [(kind, params.get("resourceVersion")) for kind, params in client.calls] == [("list", "0"),
                                                                                       ("watch", "10")]
    assert sorted(reflector.store) == sorted(f"ns/{name}" for name in (
        "bound", "nominated", "done", "high-1", "high-2", "low", "none", "neg"))


async def test_the_first_watch_waits_for_watch_after_then_starts_from_the_lists_version() -> None:
    """``watch_after`` (ApiSource: every resource listed) holds the first watch, not the list nor its delivery;
    the watch then starts from the list's resourceVersion, and a later watch does not wait again."""
    client = FakeClient([page([pod_json("a", "3")], "10")],
                        [FakeStream(lines=(line("ADDED", pod_json("b", "11")),)), FakeStream(hold=True)])
    others_listed = asyncio.Event()
    reflector, recorder = fake_reflector(client, watch_after=others_listed.wait, watch_timeout=100), Recorder()
    async with running(reflector.run(recorder)):
        await until(reflector.has_synced, "the reflector synced")
        await asyncio.sleep(0.05)
        assert [kind for kind, _ in client.calls] == ["list"] and recorder.of("ns/") == [("add", "ns/a")]
        assert "its watch waits for the other resources' lists" in reflector.state()
        others_listed.set()
        await until(lambda: len(client.calls) == 3, "the watches")
    assert [(kind, params.get("resourceVersion")) for kind, params in client.calls] == [
        ("list", "0"), ("watch", "10"), ("watch", "11")]
    assert recorder.of("ns/") == [("add", "ns/a"), ("add", "ns/b")]


async def test_a_waiting_pod_listed_twice_is_delivered_in_the_lists_order() -> None:
    """A server that lists a key twice (none should): no comparison of the two objects, the later one last."""
    client = FakeClient([page([waiting_pod("twice", "4"), waiting_pod("once", "5"), waiting_pod("twice", "6")],
                              "10")], [])
    reflector = fake_reflector(client, watch_timeout=100)
    recorder = Recorder()
    await settle(client, reflector, recorder)
    assert recorder.of("ns/") == [("add", "ns/once"), ("add", "ns/twice"), ("add", "ns/twice")]
    assert reflector.store["ns/twice"].resource_version == "6"


async def test_a_relist_delivers_waiting_pods_with_the_list(monkeypatch) -> None:
    deferred_counts: list[int] = []
    deliver_deferred = Reflector._deliver_deferred

    async def counting(self: Reflector, deferred: list[Any]) -> None:
        deferred_counts.append(len(deferred))
        await deliver_deferred(self, deferred)

    monkeypatch.setattr(Reflector, "_deliver_deferred", counting)
    client = FakeClient([page([waiting_pod("a", "1")], "5"), page([waiting_pod("a", "1"), waiting_pod("b", "2", 9)],
                                                                 "6")],
                        [FakeStream(body=orjson.dumps(status_body(410, "Expired", "too old")), status=410)])
    reflector = fake_reflector(client, watch_timeout=100)
    recorder = SyncRecorder(reflector)
    await settle(client, reflector, recorder)
    assert recorder.of("ns/") == [("add", "ns/a"), ("add", "ns/b")]
    assert deferred_counts == [1]  # only the first list defers: b comes with the re-list, as before
    assert [(kind, params.get("resourceVersion")) for kind, params in client.calls][:3] == [
        ("list", "0"), ("watch", "5"), ("list", None)]


async def test_bookmarks_only_advance_the_resource_version() -> None:
    bookmark = {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": "77", "creationTimestamp": None},
                "spec": {"containers": None}, "status": {}}
    client = FakeClient([page([], "10")], [FakeStream(lines=(line("BOOKMARK", bookmark),))])
    reflector, recorder = fake_reflector(client), Recorder()
    await settle(client, reflector, recorder)
    assert [params["resourceVersion"] for kind, params in client.calls if kind == "watch"] == ["10", "77"]
    assert recorder.events == []
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="closed") == 1


async def test_a_bind_of_a_listed_pod_is_applied_to_it_and_anything_else_decoded_in_full() -> None:
    pending = pod_json("web", "5")
    bound = {**pending, "metadata": {**pending["metadata"], "resourceVersion": "6"},
             "spec": {**pending["spec"], "nodeName": "n1"}, "status": {"phase": "Pending"}}
    relabelled = {**bound, "metadata": {**bound["metadata"], "resourceVersion": "7", "labels": {"a": "b"}}}
    client = FakeClient([page([pending], "5")], [FakeStream(lines=(line("MODIFIED", bound),
                                                                   line("MODIFIED", relabelled)))])
    reflector, recorder = fake_reflector(client), Recorder()
    await settle(client, reflector, recorder)
    assert recorder.of("ns/web") == [("add", "ns/web"), ("update", "ns/web"), ("update", "ns/web")]
    assert reflector.store["ns/web"] == pod_from_dict(relabelled)
    reflector.store["ns/web"] = listed = pod_from_dict(pending)
    reflector.apply_event({"type": "MODIFIED", "object": bound})
    applied = reflector.store["ns/web"]
    assert applied == pod_from_dict(bound) and applied.requests is listed.requests  # not decoded again


def test_apply_event_reports_errors_and_unknown_types() -> None:
    reflector = fake_reflector(FakeClient([], []))
    reflector.bind(Recorder())
    with pytest.raises(WatchError) as gone:
        reflector.apply_event(orjson.loads(watch_error_line(410)))
    assert gone.value.gone and gone.value.relist
    with pytest.raises(WatchError) as other:
        reflector.apply_event(orjson.loads(watch_error_line(500, "InternalError", "etcd went away")))
    assert other.value.relist and not other.value.gone and "etcd went away" in str(other.value)
    with pytest.raises(WatchError, match="unknown watch event type"):
        reflector.apply_event({"type": "SURPRISE", "object": pod_json("a", "1")})
    with pytest.raises(WatchError, match="without an object"):
        reflector.apply_event({"type": "ADDED"})
    reflector.apply_event({"type": "DELETED", "object": pod_json("never-seen", "9")})  # nothing to deliver
    assert reflector.resource_version == "9"


async def test_a_relist_after_gone_delivers_the_changes_of_the_gap() -> None:
    client = FakeClient(
        [page([pod_json("a", "1"), pod_json("b", "1"), pod_json("c", "1")], "1"),
         page([pod_json("a", "1"), pod_json("b", "2"), pod_json("d", "2")], "3")],
        [FakeStream(lines=(line("ADDED", pod_json("e", "2")), watch_error_line(410)))])
    reflector, recorder = fake_reflector(client), Recorder()
    await settle(client, reflector, recorder)
    assert recorder.of("ns/") == [("add", "ns/a"), ("add", "ns/b"), ("add", "ns/c"), ("add", "ns/e"),
                                  ("delete", "ns/c"), ("delete", "ns/e"), ("update", "ns/b"), ("add", "ns/d")]
    assert client.calls[-1][0] == "watch" and client.calls[-1][1]["resourceVersion"] == "3"
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_relists_total", resource="pods", reason="gone") == 1
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="gone") == 1
    assert sample(collector_registry, "scorer_reflector_lists_total", resource="pods") == 2


async def test_an_expired_continue_token_falls_back_to_one_full_list() -> None:
    expired = ApiResponse(410, orjson.dumps(status_body(410, "Expired", "continue token expired")))
    client = FakeClient([page([pod_json("a", "1")], "5", token="t"), expired,
                         page([pod_json("a", "1"), pod_json("b", "2")], "6")], [])
    reflector, recorder = fake_reflector(client, page_size=1), Recorder()
    await settle(client, reflector, recorder)
    assert [params for kind, params in client.calls if kind == "list"] == [
        {"limit": "1", "resourceVersion": "0"}, {"limit": "1", "continue": "t"}, {"resourceVersion": "0"}]
    assert recorder.of("ns/") == [("add", "ns/a"), ("add", "ns/b")]


async def test_watch_start_failures_resume_or_relist(caplog) -> None:
    client = FakeClient(
        [page([], "10"), page([], "11")],
        [ApiUnavailable("refused"),
         FakeStream(500, body=orjson.dumps(status_body(500, "InternalError", "boom"))),
         FakeStream(429, headers={"Retry-After": "0.2"}, body=b"{}"),
         FakeStream(lines=(b"not json\n",)),
         FakeStream(403, body=orjson.dumps(status_body(403, "Forbidden", "no")))])
    reflector = fake_reflector(client)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await settle(client, reflector, Recorder())
    kinds = [(kind, params.get("resourceVersion")) for kind, params in client.calls]
    # unreachable, 500, 429: the watch resumes from 10; an undecodable event: re-list (11); 403: re-list again.
    # The first list reads the watch cache (resourceVersion=0), the re-lists etcd.
    assert kinds == [("list", "0"), ("watch", "10"), ("watch", "10"), ("watch", "10"), ("watch", "10"),
                     ("list", None), ("watch", "11"), ("list", None)]
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="error") == 5
    assert sample(collector_registry, "scorer_reflector_relists_total", resource="pods", reason="error") == 2
    # The 500 is one more "API server unavailable" within its interval: counted, not a line of its own (the
    # count is written when the reflector stops).
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 5 and "refused" in messages[0] and "HTTP 403: no" in messages[3]
    assert not any("HTTP 500" in message for message in messages[:4])
    assert messages[4].startswith("pods reflector: API server unavailable: 1 more like this in the last ")
    assert messages[4].endswith("(last: pods reflector: HTTP 500: boom; resuming the watch in 0.0s)")
    assert all(r.exc_info is None for r in caplog.records)  # one line each, no traceback


class Sleeps:
    """A reflector's ``sleep`` that records each wait (and the reflector's state meanwhile) and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.states: list[str] = []
        self.reflector: Reflector | None = None

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)
        if self.reflector is not None:
            self.states.append(self.reflector.state())
        await asyncio.sleep(0)


def recorded_reflector(client: FakeClient, **kwargs: Any) -> tuple[Reflector, Sleeps]:
    """A pods reflector with the default delays, whose waits are recorded instead of waited."""
    sleeps = Sleeps()
    kwargs.setdefault("rng", random.Random(7))
    reflector = Reflector(client, RESOURCES["pods"], metrics=ReflectorMetrics(CollectorRegistry()), sleep=sleeps,
                          **kwargs)
    sleeps.reflector = reflector
    return reflector, sleeps


def bookmark_line(version: str) -> bytes:
    return line("BOOKMARK", {"kind": "Pod", "apiVersion": "v1", "metadata": {"resourceVersion": version}})


def grows_within(delays: list[float], first: float, cap: float) -> bool:
    """Each delay is the backoff's (``first`` doubling, each stretched by up to half) and at most ``cap``."""
    return all(min(cap, first * 2**i) <= delay <= min(cap, 1.5 * first * 2**i) for i, delay in enumerate(delays))


async def test_a_429_waits_its_retry_after() -> None:
    client = FakeClient([page([], "10")], [FakeStream(429, headers={"Retry-After": "0.3"}, body=b"{}"),
                                           FakeStream(429, headers={"Retry-After": "900"}, body=b"{}"),
                                           FakeStream(429, body=b"{}")])
    reflector, sleeps = recorded_reflector(client, delays=RetryDelays(retry_after_cap=5.0))
    await settle(client, reflector, Recorder())
    # Retry-After, capped; without one, the relist backoff's first delay (and the watch resumes: no re-list).
    assert sleeps.delays[:2] == [0.3, 5.0] and 0.8 <= sleeps.delays[2] <= 1.2
    assert [kind for kind, _ in client.calls] == ["list", "watch", "watch", "watch", "watch"]
    assert reflector.state().startswith("watching (listed ")


async def test_connection_failures_are_retried_within_the_small_cap_keeping_the_resource_version(caplog) -> None:
    """An outage: the list, then the watch, cannot connect (refused, 503) many times over; every wait is the
    connection backoff (0.2 s doubling to 2 s), the watch resumes from its resourceVersion, and the log has
    three lines: the first failure, the count of the others, and the way back."""
    unavailable = ApiResponse(503, orjson.dumps(status_body(503, "ServiceUnavailable", "starting")))
    client = FakeClient([ApiUnavailable("refused"), unavailable, *[ApiUnavailable("refused")] * 4, page([], "10")],
                        [*[ApiUnavailable("refused")] * 8, FakeStream(lines=(bookmark_line("11"),), hold=True)])
    reflector, sleeps = recorded_reflector(client)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        async with running(reflector.run(Recorder())):
            await until(lambda: reflector.resource_version == "11", "the watch after the outage")
            await until(lambda: any("back in step" in r.getMessage() for r in caplog.records), "the way back")
    assert grows_within(sleeps.delays[:6], 0.2, 2.0)  # the list's six failures
    assert grows_within(sleeps.delays[6:], 0.2, 2.0)  # reset by the list; then the watch's eight
    assert max(sleeps.delays) == 2.0 and len(sleeps.delays) == 14
    assert {params.get("resourceVersion") for kind, params in client.calls if kind == "watch"} == {"10"}
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_relists_total", resource="pods", reason="error") == 0
    lines = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert len(lines) == 3, lines
    assert lines[0][0] == logging.WARNING and lines[0][1].startswith(
        "pods reflector: API server unavailable: refused; listing in ")
    assert lines[1][0] == logging.WARNING and lines[1][1].startswith(
        "pods reflector: API server unavailable: 13 more like this in the last ")
    assert lines[2][0] == logging.INFO and lines[2][1].startswith("pods reflector: back in step after ")
    assert lines[2][1].endswith("of failures (14 failed attempts)")


async def test_a_410_relists_at_once_within_a_bounded_jitter_and_a_second_one_waits() -> None:
    """A 410 (HTTP or in-stream) re-lists after at most 0.5 s; a second 410 before the watch worked again
    waits the relist backoff (no loop of lists); once the watch works, a 410 is re-listed at once again."""
    client = FakeClient(
        [page([], "1"), page([], "2"), page([], "3"), page([], "4")],
        [FakeStream(lines=(watch_error_line(410),)),
         FakeStream(410, body=orjson.dumps(status_body(410, "Gone", "too old"))),
         FakeStream(lines=(line("ADDED", pod_json("a", "5")), watch_error_line(410)))])
    reflector, sleeps = recorded_reflector(client)
    await settle(client, reflector, Recorder())
    first, second, third = sleeps.delays
    assert 0 <= first <= 0.5 and 0.8 <= second <= 1.2 and 0 <= third <= 0.5
    assert [kind for kind, _ in client.calls] == ["list", "watch", "list", "watch", "list", "watch", "list", "watch"]
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_relists_total", resource="pods", reason="gone") == 3
    # The jitter is bounded whatever the draw.
    jittered = [recorded_reflector(FakeClient([], []), rng=random.Random(seed))[0] for seed in range(50)]
    gone = WatchError("410 Gone", "HTTP 410: gone", gone=True)
    assert all(0 <= r._delay(gone) <= 0.5 for r in jittered)  # noqa: SLF001 - the delay alone


async def test_the_connection_backoff_resets_after_a_list_and_the_relist_backoff_once_the_watch_works() -> None:
    client = FakeClient(
        [ApiUnavailable("refused")] * 3 + [page([], "1")]
        + [ApiResponse(403, b"{}")] * 2 + [page([], "2"), page([], "3"), page([], "4")],
        [ApiUnavailable("refused"),  # the connection backoff starts again after the list
         FakeStream(403, body=b"{}"),  # a re-list after the relist backoff: 0.8
         FakeStream(403, body=b"{}"),  # 2 failed lists (1.6, 3.2), then a list that is not the way back: 6.4
         FakeStream(lines=(line("ADDED", pod_json("a", "5")),
                           orjson.dumps({"type": "ERROR", "object": status_body(500, "InternalError", "x")}))),
         FakeStream(403, body=b"{}")])
    reflector, sleeps = recorded_reflector(client)
    await settle(client, reflector, Recorder())
    connect, relist = sleeps.delays[:4], sleeps.delays[4:]
    assert grows_within(connect[:3], 0.2, 2.0) and 0.2 <= connect[3] <= 0.3
    # 403 on the watch, twice on the list, again on the watch after a good list: the backoff grows (a list
    # alone does not reset it: a watch refused after every list must not re-list every second);
    # then the watch worked (an event) before its in-stream error: the next waits start from 0.8 again.
    assert grows_within(relist[:4], 0.8, 30.0)
    assert grows_within(relist[4:], 0.8, 30.0) and len(relist) == 6


async def test_a_watch_that_worked_is_resumed_at_once_when_cut_and_one_that_did_not_backs_off(caplog) -> None:
    client = FakeClient([page([], "1")],
                        [FakeStream(lines=(line("ADDED", pod_json("a", "2")), ApiUnavailable("reset"))),
                         FakeStream(lines=(bookmark_line("3"),)),
                         FakeStream()])  # 200, then the end at once: nothing delivered
    reflector, sleeps = recorded_reflector(client)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await settle(client, reflector, Recorder())
    assert [params["resourceVersion"] for kind, params in client.calls if kind == "watch"] == ["1", "2", "3", "3"]
    assert len(sleeps.delays) == 1 and 0.2 <= sleeps.delays[0] <= 0.3
    assert [r.getMessage() for r in caplog.records] == [
        "pods reflector: the watch ended before it delivered anything; resuming the watch in "
        f"{sleeps.delays[0]:.1f}s"]
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="closed") == 3


STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"
AGO = r"\d+(\.\d)?s"


async def test_the_state_tells_the_last_list_and_the_last_watch_event() -> None:
    client = FakeClient([page([], "1"), page([], "2")],
                        [FakeStream(lines=(line("ADDED", pod_json("a", "2")), ApiUnavailable("reset"))),
                         ApiUnavailable("refused"),
                         FakeStream(lines=(bookmark_line("3"),), hold=True)])
    reflector, sleeps = recorded_reflector(client)
    assert reflector.state() == "not started"
    async with running(reflector.run(Recorder())):
        await until(lambda: reflector.resource_version == "3", "the last watch's bookmark")
        state = reflector.state()
    assert re.fullmatch(rf"watching \(listed {STAMP}, {AGO} ago; watch opened {AGO} ago, last event {AGO} ago\)",
                        state), state
    # While it backed off: the failure, the next try, how long it had been failing; the last list and event.
    [backing_off] = sleeps.states
    assert re.fullmatch(rf"backing off after ApiUnavailable, next try in {AGO}, failing for {AGO} "
                        rf"\(listed {STAMP}, {AGO} ago; no watch open, last event {AGO} ago\)", backing_off), (
        backing_off)


def test_retry_delays_are_checked() -> None:
    assert RetryDelays() == RetryDelays(connect=0.2, connect_cap=2.0, relist=0.8, relist_cap=30.0, gone_jitter=0.5,
                                        retry_after_cap=30.0)
    with pytest.raises(ValueError, match=r"connect_cap \(1\) must be >= connect \(3\)"):
        RetryDelays(connect=3, connect_cap=1)
    with pytest.raises(ValueError, match="gone_jitter must be a number of seconds >= 0, got -1"):
        RetryDelays(gone_jitter=-1)


async def test_malformed_objects_are_reported_once_and_never_delivered(caplog) -> None:
    invalid: list[tuple[str, str]] = []
    client = FakeClient(
        [page([pod_json("good", "1"), pod_json("bad", "1", cpu="abc")], "1"),
         page([pod_json("good", "3", cpu="lots"), pod_json("bad", "1", cpu="abc")], "4")],
        [FakeStream(lines=(line("MODIFIED", pod_json("good", "2", cpu="lots")),
                           line("MODIFIED", pod_json("bad", "1", cpu="abc")),  # the same version again: no report
                           watch_error_line(410)))])
    reflector = fake_reflector(client, on_invalid=lambda resource, raw, message: invalid.append(
        (resource, raw["metadata"]["name"])))
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await settle(client, reflector, recorder)
    assert recorder.of("ns/") == [("add", "ns/good")]  # the invalid update kept the last valid version
    assert reflector.store["ns/good"].resource_version == "1"
    assert invalid == [("pods", "bad"), ("pods", "good"), ("pods", "good")]  # good: versions 2 and 3
    reports = [r.getMessage() for r in caplog.records if "invalid object" in r.getMessage()]
    assert len(reports) == 3
    assert "not delivered" in reports[0] and "Pod ns/bad" in reports[0]
    assert "spec.containers[0].resources.requests.cpu" in reports[0]
    assert "last valid version is kept" in reports[1]
    assert sample(reflector.metrics.collector_registry, "scorer_reflector_invalid_objects_total", resource="pods") == 3
    # A delete of a known object is delivered whatever its last version looked like.
    reflector.apply_event({"type": "DELETED", "object": pod_json("good", "5", cpu="lots")})
    assert recorder.of("ns/good")[-1] == ("delete", "ns/good") and "ns/good" not in reflector.store


async def test_a_failing_handler_is_logged_and_counted_and_the_watch_goes_on(caplog) -> None:
    client = FakeClient([page([pod_json("a", "1"), pod_json("b", "1")], "1")],
                        [FakeStream(lines=(line("ADDED", pod_json("c", "2")),))])
    reflector, recorder = fake_reflector(client), Recorder(fail_on="ns/a")
    with caplog.at_level(logging.ERROR, logger=LOGGER):
        await settle(client, reflector, recorder)
    assert recorder.of("ns/") == [("add", "ns/a"), ("add", "ns/b"), ("add", "ns/c")]
    assert [r.getMessage() for r in caplog.records] == ["pods reflector: handler on_pod_add failed for ns/a"]
    assert sample(reflector.metrics.collector_registry, "scorer_reflector_handler_errors_total", resource="pods") == 1


# --- workloads


def service_json(name: str, version: str, selector: Any, namespace: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version},
            "spec": {"selector": selector}}


class PathClient(FakeClient):
    """A FakeClient that also records the path of each request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.paths: list[str] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        self.paths.append(path)
        return await super().request(method, path, **kwargs)

    def stream(self, method: str, path: str, **kwargs: Any):
        self.paths.append(("watch " if "watch" in (kwargs.get("params") or {}) else "") + path)
        return super().stream(method, path, **kwargs)


def discovery(*resources: str) -> ApiResponse:
    return ApiResponse(200, orjson.dumps({"kind": "APIResourceList",
                                          "resources": [{"name": name} for name in resources]}))


NOT_FOUND = ApiResponse(404, b'{"kind":"Status","code":404}')


def workload_reflector(client: FakeClient, name: str, **kwargs: Any) -> Reflector:
    return Reflector(client, RESOURCES[name], metrics=ReflectorMetrics(CollectorRegistry()),
                     rng=random.Random(1), delays=FAST, **kwargs)


async def test_workload_resources_deliver_to_the_workload_handlers() -> None:
    client = PathClient(
        [page([service_json("web", "1", {"app": "web"}), service_json("bad", "1", {"app": 1})], "2")],
        [FakeStream(lines=(line("MODIFIED", service_json("web", "3", {"app": "web", "tier": "a"})),
                           line("ADDED", service_json("all", "4", {})),
                           line("DELETED", service_json("web", "5", {"app": "web", "tier": "a"}))))])
    invalid: list[str] = []
    reflector = workload_reflector(client, "services", on_invalid=lambda resource, raw, message: invalid.append(
        message))
    recorder = Recorder()
    await settle(client, reflector, recorder)
    assert recorder.events == [("add", "workload", "Service/ns/web"), ("update", "workload", "Service/ns/web"),
                               ("add", "workload", "Service/ns/all"), ("delete", "workload", "Service/ns/web")]
    assert invalid == ["Service ns/bad: spec.selector.app: expected a string, got integer 1 (quote it in YAML)"]
    assert client.paths[:2] == ["/api/v1/services", "watch /api/v1/services"]
    assert list(reflector.store) == ["ns/all"]
    assert reflector.store["ns/all"].selector is not None  # selector {}: every pod of the namespace


@pytest.mark.parametrize(("answers", "path"), [
    ([discovery("poddisruptionbudgets", "poddisruptionbudgets/status")], "/apis/policy/v1/poddisruptionbudgets"),
    ([NOT_FOUND, discovery("poddisruptionbudgets")], "/apis/policy/v1beta1/poddisruptionbudgets"),
    ([discovery("evictions"), discovery("poddisruptionbudgets")], "/apis/policy/v1beta1/poddisruptionbudgets"),
])
async def test_budgets_are_read_in_the_first_version_the_server_serves(answers, path) -> None:
    budget = {"metadata": {"name": "b", "namespace": "ns", "resourceVersion": "1"},
              "spec": {"selector": {"matchLabels": {"app": "web"}}}, "status": {"disruptionsAllowed": 1}}
    client = PathClient([*answers, page([budget], "2")], [])
    reflector, recorder = workload_reflector(client, "poddisruptionbudgets"), Recorder()
    await settle(client, reflector, recorder)
    discovered = ["/apis/policy/v1", "/apis/policy/v1beta1"][:len(answers)]
    assert client.paths == [*discovered, path, "watch " + path]
    assert reflector.path == path
    assert recorder.events == [("add", "workload", "PodDisruptionBudget/ns/b")]
    assert reflector.store["ns/b"].disruptions_allowed == 1


async def test_a_resource_served_in_no_version_is_retried(caplog) -> None:
    client = PathClient([NOT_FOUND, NOT_FOUND, ApiResponse(503, b"{}"), discovery("poddisruptionbudgets"),
                         page([], "2")], [])
    reflector, recorder = workload_reflector(client, "poddisruptionbudgets"), Recorder()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await settle(client, reflector, recorder)
    assert client.paths == ["/apis/policy/v1", "/apis/policy/v1beta1", "/apis/policy/v1", "/apis/policy/v1",
                            "/apis/policy/v1/poddisruptionbudgets", "watch /apis/policy/v1/poddisruptionbudgets"]
    warnings = [r.getMessage() for r in caplog.records]
    assert "the API server serves none of /apis/policy/v1, /apis/policy/v1beta1" in warnings[0]
    assert "HTTP 503" in warnings[1]
    assert reflector.has_synced()


def pv_json(name: str, version: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": version, "uid": f"u-{name}"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], **spec}}


def pvc_json(name: str, version: str, namespace: str = "ns", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": version},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec}}


async def test_volumes_and_claims_deliver_decoded_objects_to_the_storage_handlers(caplog) -> None:
    client = PathClient(
        [page([pv_json("pv-a", "1", storageClassName="local"),
               pv_json("pv-bad", "1", capacity={"storage": "lots"})], "2")],
        [FakeStream(lines=(line("MODIFIED", pv_json("pv-a", "3", storageClassName="local",
                                                    claimRef={"namespace": "ns", "name": "data", "uid": "u1"})),
                           line("DELETED", pv_json("pv-a", "4"))))])
    invalid: list[str] = []
    reflector = workload_reflector(client, "persistentvolumes",
                                   on_invalid=lambda resource, raw, message: invalid.append(message))
    recorder = Recorder()
    updated: list[Any] = []
    recorder.on_storage_update = lambda old, new: (updated.append(new),  # type: ignore[method-assign]
                                                   Recorder._record(recorder, "update", "storage", new))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        await settle(client, reflector, recorder)
    assert recorder.events == [("add", "storage", "PersistentVolume/pv-a"),
                               ("update", "storage", "PersistentVolume/pv-a"),
                               ("delete", "storage", "PersistentVolume/pv-a")]
    assert client.paths[:2] == ["/api/v1/persistentvolumes", "watch /api/v1/persistentvolumes"]
    [claimed] = updated
    assert (claimed.storage_class, claimed.capacity, claimed.claim_ref.key, claimed.resource_version) == (
        "local", 2**30, "ns/data", "3")
    [message] = invalid
    assert message.startswith("PersistentVolume pv-bad: spec.capacity.storage")
    assert any("persistentvolumes reflector: invalid object" in r.getMessage() and "pv-bad" in r.getMessage()
               for r in caplog.records)


async def test_claims_are_keyed_by_namespace() -> None:
    client = PathClient([page([pvc_json("data", "1", "a"), pvc_json("data", "1", "b", volumeName="pv-a")], "2")],
                        [])
    reflector, recorder = workload_reflector(client, "persistentvolumeclaims"), Recorder()
    await settle(client, reflector, recorder)
    assert client.paths[0] == "/api/v1/persistentvolumeclaims"
    assert sorted(reflector.store) == ["a/data", "b/data"]
    assert reflector.store["b/data"].volume_name == "pv-a"


@pytest.mark.parametrize(("name", "path"), [
    ("storageclasses", "/apis/storage.k8s.io/v1/storageclasses"),
    ("csidrivers", "/apis/storage.k8s.io/v1/csidrivers"),
    ("csinodes", "/apis/storage.k8s.io/v1/csinodes"),
    ("persistentvolumes", "/api/v1/persistentvolumes"),
    ("persistentvolumeclaims", "/api/v1/persistentvolumeclaims"),
])
def test_the_storage_resources_are_read_from_their_group_version_by_the_storage_handlers(name, path) -> None:
    resource = RESOURCES[name]
    assert (resource.path, resource.handler_kind, resource.fallback_paths, resource.optional) == (
        path, "storage", (), False)


async def test_capacities_are_read_in_the_first_version_served() -> None:
    capacity = {"metadata": {"name": "c", "namespace": "kube-system", "resourceVersion": "1"},
                "storageClassName": "fast", "capacity": "10Gi"}
    client = PathClient([discovery("storageclasses"), discovery("csistoragecapacities"), page([capacity], "2")], [])
    reflector, recorder = workload_reflector(client, "csistoragecapacities"), Recorder()
    await settle(client, reflector, recorder)
    path = "/apis/storage.k8s.io/v1beta1/csistoragecapacities"
    assert client.paths == ["/apis/storage.k8s.io/v1", "/apis/storage.k8s.io/v1beta1", path, "watch " + path]
    assert recorder.events == [("add", "storage", "CSIStorageCapacity/kube-system/c")]
    assert reflector.store["kube-system/c"].capacity == 10 * 2**30


async def test_an_optional_resource_served_in_no_version_is_synced_in_its_place_in_the_order() -> None:
    """The resources after it (the pods, after the storage resources, after the nodes) wait for it: it is
    synced only once the resource before it is, as a listed one would be."""
    client = PathClient([discovery("storageclasses"), NOT_FOUND, NOT_FOUND], [])
    before = asyncio.Event()
    reflector = Reflector(client, RESOURCES["csistoragecapacities"], metrics=ReflectorMetrics(CollectorRegistry()),
                          rng=random.Random(1), delays=FAST, deliver_after=before.wait)
    async with running(reflector.run(Recorder())):
        await until(lambda: "waiting for the resources delivered first" in reflector.state(), "the reflector waiting")
        assert not reflector.has_synced()
        before.set()
        await until(reflector.has_synced, "the reflector synced")
        assert reflector.state() == "not served by the API server"


async def test_an_optional_resource_served_in_no_version_is_reported_once_and_counts_as_synced(caplog) -> None:
    """Kubernetes 1.20 serves CSIStorageCapacities only with storage.k8s.io/v1alpha1 enabled: without it the
    reflector says so in one line, is synced with no objects (the service becomes ready) and asks nothing more."""
    client = PathClient([ApiResponse(503, b"{}"), discovery("storageclasses", "csinodes"),
                         discovery("volumeattachments"),
                         NOT_FOUND], [])
    collector_registry = CollectorRegistry()
    reflector = Reflector(client, RESOURCES["csistoragecapacities"], metrics=ReflectorMetrics(collector_registry),
                          rng=random.Random(1), delays=FAST)
    recorder = Recorder()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        async with running(reflector.run(recorder)):
            await until(reflector.has_synced, "the reflector synced")
            await asyncio.sleep(0.2)  # nothing more is asked
            assert reflector.state() == "not served by the API server"
    # The 503 is a failed discovery, retried; then the three versions, once.
    assert client.paths == ["/apis/storage.k8s.io/v1", "/apis/storage.k8s.io/v1", "/apis/storage.k8s.io/v1beta1",
                            "/apis/storage.k8s.io/v1alpha1"]
    assert recorder.events == [] and reflector.store == {} and not reflector.served
    reports = [r for r in caplog.records if "not read" in r.getMessage()]
    assert [(r.levelno, r.getMessage()) for r in reports] == [(logging.INFO, (
        "csistoragecapacities reflector: the API server serves none of /apis/storage.k8s.io/v1, "
        "/apis/storage.k8s.io/v1beta1, /apis/storage.k8s.io/v1alpha1; csistoragecapacities are not read "
        "(no objects of this kind)"))]
    assert sample(collector_registry, "scorer_reflector_lists_total", resource="csistoragecapacities") == 0
    assert sample(collector_registry, "scorer_reflector_last_sync_timestamp_seconds",
                  resource="csistoragecapacities") > 0


def test_handlers_without_a_kind_are_refused_at_once() -> None:
    reflector = fake_reflector(FakeClient([], []))
    with pytest.raises(TypeError, match="cannot receive pods"):
        reflector.bind(object())


# --- the real API server behind the fault proxy


class Cluster:
    """Writes to one control plane (direct, not through the proxy)."""

    def __init__(self, plane: Any) -> None:
        self.plane = plane

    def call(self, method: str, path: str, body: dict | None = None, expect: tuple[int, ...] = (200, 201)) -> dict:
        content = "application/merge-patch+json" if method == "PATCH" else "application/json"
        status, raw = self.plane.request(method, path, json.dumps(body).encode() if body is not None else None,
                                         content_type=content)
        assert status in expect, raw
        return json.loads(raw) if raw else {}

    def namespace(self, name: str) -> None:
        self.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": name}}, expect=(201, 409))

    def pod(self, namespace: str, name: str, labels: dict[str, str] | None = None) -> dict:
        return self.call("POST", f"/api/v1/namespaces/{namespace}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "pause",
                                     "resources": {"requests": {"cpu": "100m"}}}]}})

    def label(self, namespace: str, name: str, **labels: str) -> dict:
        return self.call("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}", {"metadata": {"labels": labels}})

    def delete(self, namespace: str, name: str) -> None:
        self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")

    def keys(self, namespace: str) -> dict[str, str]:
        """The pods of ``namespace``: key -> resourceVersion."""
        listed = self.call("GET", f"/api/v1/namespaces/{namespace}/pods")
        return {f"{namespace}/{p['metadata']['name']}": p["metadata"]["resourceVersion"] for p in listed["items"]}


def in_step(reflector: Reflector, cluster: Cluster, namespace: str) -> Callable[[], bool]:
    """The reflector's pods of ``namespace`` are the API's, at the same versions."""
    def check() -> bool:
        mine = {k: p.resource_version for k, p in reflector.store.items() if k.startswith(namespace + "/")}
        return mine == cluster.keys(namespace)
    return check


def pods_reflector(client: ApiClient, **kwargs: Any) -> Reflector:
    return Reflector(client, RESOURCES["pods"], metrics=ReflectorMetrics(CollectorRegistry()), **kwargs)


def no_duplicate_adds(recorder: Recorder, prefix: str) -> bool:
    adds = [key for change, key in recorder.of(prefix) if change == "add"]
    return len(adds) == len(set(adds))


@kube
@pytest.mark.parametrize("from_cache", [False, True], ids=["paginated", "from-cache"])
async def test_the_first_list_delivers_every_object(control_plane, fault_proxy, proxied_client, from_cache) -> None:
    namespace = f"rf-list-{'cache' if from_cache else 'pages'}"
    cluster = Cluster(control_plane)
    cluster.namespace(namespace)
    for i in range(11):
        cluster.pod(namespace, f"p{i:02d}")
    reflector, recorder = pods_reflector(proxied_client, page_size=3, list_from_cache=from_cache), Recorder()
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        await until(lambda: len(recorder.of(namespace)) == 11, "the pods waiting, delivered after the sync")
        assert recorder.of(namespace) == [("add", f"{namespace}/p{i:02d}") for i in range(11)]  # in key order
        assert in_step(reflector, cluster, namespace)()
        await until(lambda: fault_proxy.watches("/api/v1/pods"), "the watch, once every pod is delivered")
    lists = [r for r in fault_proxy.requests if r.path == "/api/v1/pods" and not r.watch]
    if from_cache:
        # kube-apiserver answers resourceVersion=0 from its watch cache, whole: the limit is not applied there.
        assert [r.query for r in lists] == [{"limit": "3", "resourceVersion": "0"}]
    else:
        assert len(lists) >= 4 and all(r.query["limit"] == "3" for r in lists)
        assert [("continue" in r.query) for r in lists] == [False] + [True] * (len(lists) - 1)
    assert fault_proxy.watches("/api/v1/pods")[0].query["allowWatchBookmarks"] == "true"


@kube
async def test_the_watch_delivers_adds_updates_and_deletes_and_renews_at_its_timeout(
        control_plane, fault_proxy, proxied_client) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("rf-watch")
    reflector, recorder = pods_reflector(proxied_client, watch_timeout=1.0), Recorder()
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        cluster.pod("rf-watch", "w")
        await until(lambda: recorder.of("rf-watch/") == [("add", "rf-watch/w")], "the add")
        cluster.label("rf-watch", "w", tier="web")
        await until(lambda: len(recorder.of("rf-watch/")) == 2, "the update")
        assert reflector.store["rf-watch/w"].labels == {"tier": "web"}
        cluster.delete("rf-watch", "w")  # (the API server marks the pod deleted, then deletes it)
        await until(lambda: recorder.of("rf-watch/")[-1] == ("delete", "rf-watch/w"), "the delete")
        assert "rf-watch/w" not in reflector.store
        assert no_duplicate_adds(recorder, "rf-watch/")
        collector_registry = reflector.metrics.collector_registry
        await until(lambda: sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods",
                                   reason="timeout") >= 1, "a watch to reach its timeout")
    watches = fault_proxy.watches("/api/v1/pods")
    assert {w.query["timeoutSeconds"] for w in watches} == {"1"}
    assert sample(collector_registry, "scorer_reflector_lists_total", resource="pods") == 1


@kube
async def test_a_watch_dropped_repeatedly_resumes_without_duplicates_or_gaps(
        control_plane, fault_proxy, proxied_client) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("rf-drop")
    reflector, recorder = pods_reflector(proxied_client), Recorder()
    drops = fault_proxy.add(watch=True, path="^/api/v1/pods$", drop_after_lines=1, count=6)
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        for i in range(6):
            cluster.pod("rf-drop", f"d{i}")
            await asyncio.sleep(0.05)
        cluster.label("rf-drop", "d1", changed="yes")
        cluster.delete("rf-drop", "d2")
        await until(lambda: drops.hits == 6 and in_step(reflector, cluster, "rf-drop")(), "the pods after the drops")
        assert no_duplicate_adds(recorder, "rf-drop/")
        assert ("delete", "rf-drop/d2") in recorder.of("rf-drop/")
        assert reflector.store["rf-drop/d1"].labels == {"changed": "yes"}
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="closed") >= 6
    assert sample(collector_registry, "scorer_reflector_lists_total", resource="pods") == 1  # resumed, never re-listed
    versions = [int(w.query["resourceVersion"]) for w in fault_proxy.watches("/api/v1/pods")]
    assert versions == sorted(versions)  # each watch resumed from the last version seen


@kube
async def test_500_and_429_on_the_watch_back_off_then_resume(control_plane, fault_proxy, proxied_client) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("rf-5xx")
    reflector, recorder = pods_reflector(proxied_client), Recorder()
    fault_proxy.add(watch=True, path="^/api/v1/pods$", status=500, body=status_body(500, "InternalError", "x"), count=2)
    fault_proxy.add(watch=True, path="^/api/v1/pods$", status=429, headers={"Retry-After": "1"},
              body=status_body(429, "TooManyRequests", "slow down"), count=1)
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        await until(lambda: len(fault_proxy.watches("/api/v1/pods")) == 4, "the fourth watch")
        cluster.pod("rf-5xx", "after")
        await until(lambda: recorder.of("rf-5xx/") == [("add", "rf-5xx/after")], "the pod")
    watches = fault_proxy.watches("/api/v1/pods")
    assert len({w.query["resourceVersion"] for w in watches}) == 1  # resumed from the list's version each time
    assert watches[1].time > watches[0].time and watches[3].time - watches[2].time >= 0.99  # Retry-After: 1
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="error") == 3
    assert sample(collector_registry, "scorer_reflector_lists_total", resource="pods") == 1


async def _gap(cluster: Cluster, proxy: FaultProxy, namespace: str) -> None:
    """Stop the watch (every new one is reset), then change the namespace's pods while it is down."""
    proxy.add(watch=True, path="^/api/v1/pods$", reset=True, count=None)
    proxy.drop_streams()
    cluster.delete(namespace, "a")
    cluster.label(namespace, "b", changed="yes")
    cluster.pod(namespace, "c")


@kube
@pytest.mark.parametrize("answer", ["http", "in-stream"])
async def test_a_410_from_the_proxy_relists_and_delivers_the_gap(
        control_plane, fault_proxy, proxied_client, answer) -> None:
    namespace = f"rf-gone-{answer}"
    cluster = Cluster(control_plane)
    cluster.namespace(namespace)
    cluster.pod(namespace, "a")
    cluster.pod(namespace, "b")
    reflector, recorder = pods_reflector(proxied_client), Recorder()
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        await _gap(cluster, fault_proxy, namespace)
        fault_proxy.clear()
        if answer == "http":
            fault_proxy.add(watch=True, path="^/api/v1/pods$", status=410, body=status_body(410, "Gone", "gone"))
        else:
            fault_proxy.add(watch=True, path="^/api/v1/pods$", status=200, body=watch_error_line(410))
        await until(in_step(reflector, cluster, namespace), "the re-list")
    assert recorder.of(namespace) == [("add", f"{namespace}/a"), ("add", f"{namespace}/b"),
                                      ("delete", f"{namespace}/a"), ("update", f"{namespace}/b"),
                                      ("add", f"{namespace}/c")]
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_relists_total", resource="pods", reason="gone") == 1
    assert sample(collector_registry, "scorer_reflector_watch_restarts_total", resource="pods", reason="gone") == 1
    assert sample(collector_registry, "scorer_reflector_lists_total", resource="pods") == 2


@pytest.fixture(scope="module")
def compacting_plane(tmp_path_factory):
    """A second control plane without the watch cache that compacts etcd every 2 s: old versions are 410."""
    from kubekit import ControlPlane

    with ControlPlane(tmp_path_factory.mktemp("compacting"),
                      extra_args=("--watch-cache=false", "--etcd-compaction-interval=2s")) as plane:
        yield plane


@kube
async def test_a_real_compaction_gives_410_and_the_relist_delivers_the_gap(compacting_plane, tmp_path) -> None:
    cluster = Cluster(compacting_plane)
    cluster.namespace("rf-compact")
    cluster.pod("rf-compact", "a")
    cluster.pod("rf-compact", "b")
    async with FaultProxy(compacting_plane.url) as proxy, \
            ApiClient(load_kubeconfig(proxy.write_kubeconfig(tmp_path / "kubeconfig"))) as client:
        reflector, recorder = pods_reflector(client), Recorder()
        async with running(reflector.run(recorder)):
            await asyncio.wait_for(reflector.wait_for_sync(), 15)
            old = reflector.resource_version
            await _gap(cluster, proxy, "rf-compact")
            await until(lambda: _expired(compacting_plane, old), "etcd to compact the old version", timeout=20)
            proxy.clear()
            await until(in_step(reflector, cluster, "rf-compact"), "the re-list")
            # The re-list's events can arrive before its watch is opened: wait for a watch past the 410'd one.
            await until(lambda: any(w.query.get("resourceVersion") != old
                                    for w in proxy.watches("/api/v1/pods")), "the watch after the re-list")
        watches = proxy.watches("/api/v1/pods")
    assert recorder.of("rf-compact/") == [("add", "rf-compact/a"), ("add", "rf-compact/b"),
                                          ("delete", "rf-compact/a"), ("update", "rf-compact/b"),
                                          ("add", "rf-compact/c")]
    collector_registry = reflector.metrics.collector_registry
    assert sample(collector_registry, "scorer_reflector_relists_total", resource="pods", reason="gone") == 1
    assert watches[-1].query["resourceVersion"] != old


def _expired(plane: Any, version: str) -> bool:
    """Whether a watch from ``version`` is answered 410 (in-stream, as etcd compacted it)."""
    status, raw = plane.request("GET", f"/api/v1/pods?watch=1&resourceVersion={version}&timeoutSeconds=1")
    return status == 410 or b'"code":410' in raw


@kube
async def test_malformed_objects_from_the_api_are_logged_once_and_the_rest_delivered(
        control_plane, fault_proxy, proxied_client, caplog) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("rf-bad")
    cluster.pod("rf-bad", "listed-bad")

    def corrupt(doc: dict) -> dict:
        for pod in doc.get("items", []) + ([doc["object"]] if doc.get("type") in ("ADDED", "MODIFIED") else []):
            name = pod["metadata"]["name"]
            if name.endswith("-bad") or pod["metadata"].get("labels", {}).get("corrupt") == "yes":
                pod["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "abc"
        return doc

    fault_proxy.add(path="^/api/v1/pods$", rewrite=corrupt, count=None)
    invalid: list[tuple[str, str]] = []
    reflector = pods_reflector(proxied_client, on_invalid=lambda resource, raw, message: invalid.append(
        (raw["metadata"]["name"], raw["metadata"]["resourceVersion"])))
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        async with running(reflector.run(recorder)):
            await asyncio.wait_for(reflector.wait_for_sync(), 15)
            cluster.pod("rf-bad", "good")
            cluster.pod("rf-bad", "watched-bad")
            cluster.pod("rf-bad", "good2")
            await until(lambda: len(recorder.of("rf-bad/")) == 2 and len(invalid) == 2, "the pods")
            cluster.label("rf-bad", "good", corrupt="yes")  # an invalid update: the last valid version stays
            cluster.delete("rf-bad", "good")  # a delete of a known pod is delivered all the same
            await until(lambda: len(recorder.of("rf-bad/")) == 3, "the delete")
    assert recorder.of("rf-bad/") == [("add", "rf-bad/good"), ("add", "rf-bad/good2"), ("delete", "rf-bad/good")]
    # Each invalid version once (the delete of "good" first marks it deleted: a second invalid version).
    assert len(set(invalid)) == len(invalid) and [name for name, _ in invalid][:3] == ["listed-bad", "watched-bad",
                                                                                       "good"]
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER and "rf-bad" in r.getMessage()]
    assert len(lines) == len(invalid) and all("spec.containers[0].resources.requests.cpu" in x for x in lines)
    assert "Pod rf-bad/listed-bad" in lines[0] and "not delivered" in lines[0]
    assert "Pod rf-bad/good" in lines[2] and "last valid version is kept" in lines[2]
    counted = sample(reflector.metrics.collector_registry, "scorer_reflector_invalid_objects_total", resource="pods")
    assert counted == len(invalid)


@kube
async def test_an_unknown_taint_effect_on_a_node_is_reported_and_other_nodes_delivered(
        control_plane, fault_proxy, proxied_client, caplog) -> None:
    cluster = Cluster(control_plane)
    for name in ("rf-node-ok", "rf-node-odd"):
        cluster.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                                               "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}},
                     expect=(201, 409))

    def odd_taint(doc: dict) -> dict:
        for node in doc.get("items", []):
            if node["metadata"]["name"] == "rf-node-odd":
                node["spec"]["taints"][0]["effect"] = "Sometimes"
        return doc

    fault_proxy.add(path="^/api/v1/nodes$", watch=False, rewrite=odd_taint)
    reflector = Reflector(proxied_client, RESOURCES["nodes"], metrics=ReflectorMetrics(CollectorRegistry()))
    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        async with running(reflector.run(recorder)):
            await asyncio.wait_for(reflector.wait_for_sync(), 15)
    assert ("add", "rf-node-ok") in recorder.of("rf-node")
    assert ("add", "rf-node-odd") not in recorder.of("rf-node")
    [report] = [r.getMessage() for r in caplog.records if "rf-node-odd" in r.getMessage()]
    assert "spec.taints[0].effect" in report and "Sometimes" in report


@kube
async def test_an_unreachable_api_server_is_retried_with_backoff_until_it_answers(
        control_plane, fault_proxy, proxied_client, caplog) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("rf-down")
    cluster.pod("rf-down", "p")
    fault_proxy.add(reset=True, count=None)
    reflector, recorder = pods_reflector(proxied_client), Recorder()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        async with running(reflector.run(recorder)):
            await until(lambda: len(fault_proxy.requests) >= 4, "a few attempts")
            assert not reflector.has_synced()
            # Between two attempts, or in one (the proxy resets it at once).
            assert reflector.state().startswith(("backing off after ApiUnavailable, next try in ", "listing"))
            attempts = sample(reflector.metrics.collector_registry, "scorer_reflector_lists_total", resource="pods")
            span = fault_proxy.requests[-1].time - fault_proxy.requests[0].time
            fault_proxy.clear()
            await asyncio.wait_for(reflector.wait_for_sync(), 15)
            assert recorder.of("rf-down/") == [("add", "rf-down/p")]
            await until(lambda: any("back in step" in r.getMessage() for r in caplog.records), "the way back")
    # The first failure, then the others counted in one line, then the way back (the watch worked).
    failures = [r.getMessage() for r in caplog.records if "API server unavailable" in r.getMessage()]
    assert len(failures) == 2 and re.search(r"listing in 0\.[23]s$", failures[0])
    assert " more like this in the last " in failures[1] and "listing in" in failures[1]
    [back] = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.name == LOGGER]
    assert back.startswith("pods reflector: back in step after ") and "failed attempts" in back
    assert not any(r.exc_info for r in caplog.records)
    # Backed off, never a hot loop: at least the first delay (0.2 s) between two attempts (aiohttp itself
    # sends a GET again at once when its connection is reset, so the fault_proxy sees up to two requests each).
    assert span >= 0.2 * (attempts - 2)


@kube
async def test_a_bookmark_from_the_api_server_advances_the_resource_version(control_plane, fault_proxy,
                                                                           proxied_client) -> None:
    # 1.20's watch cache sends a bookmark about 2 s before a watch's deadline, once the resource had an event
    # since the watch started; the proxy notes the bookmarks it passes on.
    cluster = Cluster(control_plane)
    cluster.namespace("rf-bookmark")
    bookmarks: list[str] = []

    def note(event: dict) -> dict:
        if event.get("type") == "BOOKMARK":
            bookmarks.append(event["object"]["metadata"]["resourceVersion"])
        return event

    fault_proxy.add(watch=True, path="^/api/v1/pods$", rewrite=note, count=None)
    reflector, recorder = pods_reflector(proxied_client, watch_timeout=4.0), Recorder()
    async with running(reflector.run(recorder)):
        await asyncio.wait_for(reflector.wait_for_sync(), 15)
        await until(lambda: fault_proxy.watches("/api/v1/pods"), "the watch")
        cluster.pod("rf-bookmark", "b")
        await until(lambda: bookmarks, "a bookmark", timeout=10)
        watches = len(fault_proxy.watches("/api/v1/pods"))
        await until(lambda: len(fault_proxy.watches("/api/v1/pods")) > watches, "the next watch")
        assert recorder.of("rf-bookmark/") == [("add", "rf-bookmark/b")]  # a bookmark is not delivered
    # (For a watch of every pod, 1.20's bookmark carries the version of the last event: the unit test
    # test_bookmarks_only_advance_the_resource_version shows a bookmark moving the version on its own.)
    assert fault_proxy.watches("/api/v1/pods")[-1].query["resourceVersion"] == bookmarks[-1]


async def test_unassigned_pods_are_found_by_the_json_the_api_server_sent_of_them() -> None:
    bound = pod_json("bound", "1")
    bound["spec"]["nodeName"] = "n1"
    nominated = pod_json("nominated", "2")  # (unassigned, but not deferred: decoded with the list)
    nominated["status"] = {"nominatedNodeName": "n1"}
    first, gone, waiting = waiting_pod("a", "3"), waiting_pod("b", "4"), waiting_pod("c", "6")
    last = waiting_pod("z", "5")
    late = pod_json("late", "11")
    now_bound = {**first, "metadata": {**first["metadata"], "resourceVersion": "12"},
                 "spec": {**first["spec"], "nodeName": "n1"}}

    def event(type_: str, obj: dict) -> bytes:  # (a watch event's object: kind and apiVersion first)
        return line(type_, {"kind": "Pod", "apiVersion": "v1", **obj})

    watch = FakeStream(lines=(event("ADDED", late), event("MODIFIED", now_bound), event("DELETED", gone)))
    client = FakeClient([page([first, bound, nominated, gone, waiting, last], "10")], [watch])
    reflector = fake_reflector(client, watch_timeout=100)
    reflector.keep_json_digests(unassigned_pod)
    await settle(client, reflector, Recorder())
    store = reflector.store
    # the pods still unassigned, by the bytes of their JSON as a list item has it (no kind, no apiVersion):
    # from the list (delivered with it, or after the sync) and from a watch event alike
    assert reflector.by_json(orjson.dumps(nominated)) is store["ns/nominated"]
    assert reflector.by_json(orjson.dumps(waiting)) is store["ns/c"]
    assert reflector.by_json(orjson.dumps(late)) is store["ns/late"]
    assert reflector.by_json(bytearray(orjson.dumps(late))) is store["ns/late"]
    # not any other: bound since, bound from the start, deleted, other bytes of the same pod; the last item
    # of a list page is read with the page's end, not from its own bytes: not found (it is decoded instead)
    for other in (first, now_bound, bound, gone, last, {**late, "status": {"phase": "Pending"}}):
        assert reflector.by_json(orjson.dumps(other)) is None
    assert reflector.by_json(orjson.dumps(late, option=orjson.OPT_INDENT_2)) is None
    assert set(reflector._digests) == {"ns/nominated", "ns/c", "ns/late"} and len(reflector._by_digest) == 3


async def test_without_keep_json_digests_nothing_is_found_by_json() -> None:
    late = pod_json("late", "11")
    client = FakeClient([page([waiting_pod("a", "3"), waiting_pod("z", "5")], "10")],
                        [FakeStream(lines=(line("ADDED", {"kind": "Pod", "apiVersion": "v1", **late}),))])
    reflector = fake_reflector(client, watch_timeout=100)
    await settle(client, reflector, Recorder())
    assert "ns/late" in reflector.store and reflector.by_json(orjson.dumps(late)) is None
    assert reflector.by_json(orjson.dumps(waiting_pod("a", "3"))) is None and not reflector._digests
