"""`scorer run` under pod churn against a real kube-apiserver: memory comes back, no pod is lost, the log stays short.

``run_churn`` is the driver (used by the test, and by ``python tests/test_fault_churn.py --rate 365
--duration 180`` for the issue's full 3-minute figure): pods are created at a steady rate by a pool of
workers; a watch of the namespace deletes each pod as soon as it is bound, except every
``keep_every``-th, which stays; every ``early_delete_every``-th pod is deleted within half a second of
its creation, racing its scheduling and binding (deletes of pending pods, bind conflicts).
``churn_scenario`` wraps it: the scheduler's RSS (``VmRSS``) idle after a warm-up, the churn, every pod
left bound (none lost) and no node over its allocatable, every pod deleted, then ``idle`` seconds and
the RSS again. The test churns 200 pods/s for 60 s. Everything is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import orjson
import pytest
from kubekit import TOKEN, ControlPlane
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

from scorer.bench.e2e_api import delete_pod_now
from scorer.quantity import resource_value

pytestmark = [pytest.mark.kube, pytest.mark.slow]

NAMESPACE = "churn"
SCHEDULER = "scorer-churn"
RSS_MARGIN_KB = 30 * 1024  # the bar: back within 30 MB of idle
LEVELS = re.compile(r"^\S+ (INFO|WARNING|ERROR|CRITICAL) ")


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A process' ``VmRSS`` (or ``VmHWM``, its peak) in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@attrs.define
class ChurnStats:
    created: int = 0
    create_failures: int = 0
    deleted_bound: int = 0
    deleted_early: int = 0
    delete_failures: int = 0
    bound_seen: int = 0
    kept: list[str] = attrs.Factory(list)
    seconds: float = 0.0

    def rate(self) -> float:
        return self.created / self.seconds if self.seconds else 0.0


class _Churn:
    """One churn run's state: a session of ``connections`` connections, the pods kept and deleted."""

    def __init__(self, url: str, namespace: str, scheduler: str, *, keep_every: int, early_delete_every: int,
                 connections: int) -> None:
        self.url, self.namespace, self.scheduler = url, namespace, scheduler
        self.keep_every, self.early_delete_every = keep_every, early_delete_every
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=connections, ssl=False),
            headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
        self.stats = ChurnStats()
        self.deletions: asyncio.Queue[tuple[str, str, bool]] = asyncio.Queue()
        self.deleting: set[str] = set()
        self.kept: set[str] = set()
        self.rng = random.Random(7)

    async def close(self) -> None:
        await self.session.close()

    async def create(self, index: int) -> None:
        name = f"churn-{index:06d}"
        body = orjson.dumps(pod_manifest(name, namespace=self.namespace, scheduler=self.scheduler, cpu="10m",
                                         memory="16Mi"))
        # Marked before it exists: the pod can be bound (and seen bound by the watch) before the answer to
        # its creation arrives, and the watch must not delete a kept or early-deleted pod as a bound one.
        keep = index % self.keep_every == 0
        early = not keep and index % self.early_delete_every == 0
        if keep:
            self.kept.add(name)
        elif early:
            self.deleting.add(name)
        try:
            async with self.session.post(f"{self.url}/api/v1/namespaces/{self.namespace}/pods", data=body,
                                         timeout=aiohttp.ClientTimeout(total=30)) as response:
                created = await response.read()
                if response.status != 201:
                    self._failed(name)
                    return
        except (aiohttp.ClientError, TimeoutError):
            self._failed(name)
            return
        self.stats.created += 1
        if early:
            # Within half a second of its creation: while the pod is queued, scheduled or being bound.
            entry = (name, orjson.loads(created)["metadata"]["uid"], False)
            asyncio.get_running_loop().call_later(self.rng.uniform(0.0, 0.5), self.deletions.put_nowait, entry)

    def _failed(self, name: str) -> None:
        self.stats.create_failures += 1
        self.kept.discard(name)
        self.deleting.discard(name)

    async def delete(self, name: str, uid: str, bound: bool) -> None:
        status = await delete_pod_now(self.session, self.url, self.namespace, name, uid)
        ok = status in (200, 202, 404, 409)  # 404, 409: deleted already, or another pod of that name now
        if not ok:
            self.stats.delete_failures += 1
        elif bound:
            self.stats.deleted_bound += 1
        else:
            self.stats.deleted_early += 1

    async def watch(self, stop: asyncio.Event) -> None:
        """Deletes each pod the watch shows bound (except the kept ones) until ``stop``."""
        version = ""
        while not stop.is_set():
            params = {"watch": "1", "allowWatchBookmarks": "true", "timeoutSeconds": "60"}
            if version:
                params["resourceVersion"] = version
            try:
                async with self.session.get(f"{self.url}/api/v1/namespaces/{self.namespace}/pods", params=params,
                                            timeout=aiohttp.ClientTimeout(total=70, sock_read=5)) as response:
                    async for line in response.content:
                        if stop.is_set():
                            return
                        if line.strip():
                            version = self.on_event(orjson.loads(line)) or version
            except (aiohttp.ClientError, TimeoutError):
                await asyncio.sleep(0.1)

    def on_event(self, event: dict[str, Any]) -> str:
        obj = event.get("object") or {}
        metadata = obj.get("metadata") or {}
        if event.get("type") == "ERROR":
            return ""  # 410: watch again from now (the pods missed are deleted at the end)
        name = metadata.get("name", "")
        if event.get("type") in ("ADDED", "MODIFIED") and (obj.get("spec") or {}).get("nodeName"):
            if name not in self.kept and name not in self.deleting:
                self.stats.bound_seen += 1
                self.deleting.add(name)
                self.deletions.put_nowait((name, metadata["uid"], True))
        elif event.get("type") == "DELETED":
            self.deleting.discard(name)
        return str(metadata.get("resourceVersion", ""))


async def run_churn(url: str, *, rate: float, duration: float, namespace: str = NAMESPACE,
                    scheduler: str = SCHEDULER, keep_every: int = 50, early_delete_every: int = 7,
                    connections: int = 48) -> ChurnStats:
    """Create pods at ``rate`` a second for ``duration`` seconds, deleting the bound ones (see the module
    docstring); returns when the last creation and deletion were answered (at most ~30 s later)."""
    churn = _Churn(url, namespace, scheduler, keep_every=keep_every, early_delete_every=early_delete_every,
                   connections=connections)
    stop_watch = asyncio.Event()
    watcher = asyncio.create_task(churn.watch(stop_watch), name="churn-watch")
    creations: asyncio.Queue[int | None] = asyncio.Queue(maxsize=connections * 4)
    workers = connections // 2

    async def create_worker() -> None:
        while (index := await creations.get()) is not None:
            await churn.create(index)

    async def delete_worker() -> None:
        while True:
            await churn.delete(*await churn.deletions.get())
            churn.deletions.task_done()

    creators = [asyncio.create_task(create_worker(), name=f"churn-create-{i}") for i in range(workers)]
    deleters = [asyncio.create_task(delete_worker(), name=f"churn-delete-{i}") for i in range(workers)]
    start = time.monotonic()
    index = 0
    try:
        while (elapsed := time.monotonic() - start) < duration:
            due = int(elapsed * rate)
            while index < due:
                await creations.put(index)  # waits when the workers fall behind: the rate is a ceiling
                index += 1
            await asyncio.sleep(0.01)
        for _ in creators:
            await creations.put(None)
        async with asyncio.timeout(60):
            await asyncio.gather(*creators)
        churn.stats.seconds = time.monotonic() - start
        # The last bound pods reach the watch a little later: let it delete them for a few seconds (the
        # scenario deletes whatever is left anyway).
        await asyncio.sleep(3.0)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(15):
                await churn.deletions.join()
    finally:
        stop_watch.set()
        for task in (*creators, *deleters, watcher):
            task.cancel()
        await asyncio.gather(*creators, *deleters, watcher, return_exceptions=True)
        await churn.close()
    churn.stats.kept = sorted(churn.kept)
    return churn.stats


# --- the scenario: idle, churn, every pod deleted, idle again ------------------------------------------


@attrs.define
class ChurnReport:
    stats: ChurnStats
    rss_fresh_kb: int  # ready, nothing scheduled yet
    rss_idle_kb: int  # after a warm-up of a few hundred pods, all deleted, and a short idle
    rss_peak_kb: int  # VmHWM at the end of the churn
    rss_after_kb: int  # every pod deleted, then ``idle`` seconds
    log_lines: int  # INFO and above written during the churn
    conflicts: float
    kept_bound: int  # of the kept pods (the rest of those left are bound too, or listed in ``unbound``)
    unbound: list[str]  # pods left that never got bound: lost
    over_allocatable: list[str]

    def summary(self) -> str:
        mb = 1024
        return (f"created {self.stats.created} pods in {self.stats.seconds:.0f}s ({self.stats.rate():.0f}/s), "
                f"deleted {self.stats.deleted_bound} bound + {self.stats.deleted_early} early "
                f"({self.stats.create_failures} create / {self.stats.delete_failures} delete failures), "
                f"{len(self.stats.kept)} kept, {len(self.unbound)} left unbound, {len(self.over_allocatable)} nodes "
                f"over allocatable; bind conflicts {self.conflicts:.0f}; "
                f"RSS fresh {self.rss_fresh_kb / mb:.0f} MB, idle {self.rss_idle_kb / mb:.0f} MB, "
                f"peak {self.rss_peak_kb / mb:.0f} MB, after {self.rss_after_kb / mb:.0f} MB; "
                f"{self.log_lines} log lines (INFO+) during the churn")


def cache_empty(proc: ScorerProcess) -> bool:
    return (proc.metric("scheduler_cache_size", {"type": "pods"}) == 0
            and proc.metric("scheduler_pending_pods") == 0)


def log_offset(proc: ScorerProcess) -> int:
    return proc.log_path.stat().st_size


def info_lines(proc: ScorerProcess, start: int, end: int) -> list[str]:
    with open(proc.log_path, "rb") as log:
        log.seek(start)
        text = log.read(end - start).decode(errors="replace")
    return [line for line in text.splitlines() if LEVELS.match(line)]


def over_allocatable(cluster: Cluster, namespace: str) -> list[str]:
    """Nodes whose bound pods' requests (of every namespace) exceed their allocatable."""
    nodes = {n["metadata"]["name"]: n["status"]["allocatable"] for n in cluster.call("GET", "/api/v1/nodes")["items"]}
    used: dict[str, list[int]] = {name: [0, 0, 0] for name in nodes}
    for pod in cluster.call("GET", "/api/v1/pods")["items"]:
        node = pod["spec"].get("nodeName")
        if node not in used:
            continue
        for container in pod["spec"]["containers"]:
            requests = (container.get("resources") or {}).get("requests") or {}
            used[node][0] += resource_value("cpu", requests.get("cpu", "0"))
            used[node][1] += resource_value("memory", requests.get("memory", "0"))
        used[node][2] += 1
    over = []
    for name, (cpu, memory, count) in used.items():
        alloc = nodes[name]
        if (cpu > resource_value("cpu", alloc["cpu"]) or memory > resource_value("memory", alloc["memory"])
                or count > int(alloc["pods"])):
            over.append(name)
    return over


async def _delete_listed(url: str, namespace: str, connections: int = 32) -> int:
    """Delete (grace period 0) every pod the API lists in ``namespace``, many at a time; how many were listed."""
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections, ssl=False),
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as session:
        async with session.get(f"{url}/api/v1/namespaces/{namespace}/pods",
                               timeout=aiohttp.ClientTimeout(total=60)) as response:
            names = [item["metadata"]["name"] for item in orjson.loads(await response.read())["items"]]
        body = orjson.dumps({"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})

        async def delete(name: str) -> None:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                async with session.delete(f"{url}/api/v1/namespaces/{namespace}/pods/{name}", data=body,
                                          headers={"Content-Type": "application/json"},
                                          timeout=aiohttp.ClientTimeout(total=30)) as response:
                    await response.read()

        await asyncio.gather(*(delete(name) for name in names))
    return len(names)


def delete_every_pod(plane: ControlPlane, proc: ScorerProcess, namespace: str, timeout: float = 300) -> None:
    """Delete the namespace's pods until the API lists none and the scheduler's cache and queue are empty."""
    def gone() -> bool:
        try:
            if asyncio.run(_delete_listed(plane.url, namespace)):
                return False
        except (aiohttp.ClientError, TimeoutError, KeyError):
            return False
        return cache_empty(proc)

    try:
        wait_until(gone, timeout, "every pod deleted and gone from the scheduler", interval=1.0)
    except AssertionError as error:
        state = {name: proc.samples(name) for name in ("scheduler_cache_size", "scheduler_pending_pods")}
        raise AssertionError(f"{error}; the scheduler has {state}") from None


def churn_scenario(plane: ControlPlane, cluster: Cluster, proc: ScorerProcess, *, rate: float, duration: float,
                   nodes: int = 80, idle: float = 30.0, warmup: int = 300, namespace: str = NAMESPACE,
                   phase: Callable[[str], None] = lambda name: None) -> ChurnReport:
    """Nodes, a warm-up, the churn, every pod deleted, ``idle`` seconds: the figures (``ChurnReport``).
    ``phase`` is told of ``"idle"``, ``"peak"`` and ``"after"`` as their RSS is read (diagnostics)."""
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest(f"churn-node-{i:03d}", cpu="8", memory="32Gi", pods=110)
                        for i in range(nodes)])
    proc.wait_ready()
    wait_until(lambda: proc.metric("scheduler_cache_size", {"type": "nodes"}) >= nodes, 60, "the nodes in the cache")
    time.sleep(2.0)
    rss_fresh = rss_kb(proc.proc.pid)
    # Warm-up: the first cycles import and build what every later one reuses; that is not churn.
    cluster.create_all([pod_manifest(f"warm-{i:04d}", namespace=namespace, scheduler=SCHEDULER, cpu="10m",
                                     memory="16Mi") for i in range(warmup)])
    wait_until(lambda: len(cluster.bound(namespace)) == warmup, 120, "the warm-up pods bound")
    delete_every_pod(plane, proc, namespace)
    time.sleep(min(idle, 10.0))
    rss_idle = rss_kb(proc.proc.pid)
    phase("idle")
    conflicts_before = proc.metric("scorer_bind_results_total", {"result": "conflict"})

    start = log_offset(proc)
    stats = asyncio.run(run_churn(plane.url, rate=rate, duration=duration, namespace=namespace))
    # No pod lost: every pod left (the kept ones, and those the churn had not deleted yet) gets bound;
    # none over a node's allocatable.
    def unbound() -> list[str]:
        return sorted(name for name, pod in cluster.pods(namespace).items() if not pod["spec"].get("nodeName"))

    with contextlib.suppress(AssertionError):  # what is left unbound is reported
        wait_until(lambda: not unbound(), 180, "every pod left bound", interval=2.0)
    left_unbound = unbound()
    kept_bound = set(stats.kept) & set(cluster.bound(namespace))
    over = over_allocatable(cluster, namespace)
    rss_peak = rss_kb(proc.proc.pid, "VmHWM")
    phase("peak")
    lines = len(info_lines(proc, start, log_offset(proc)))
    conflicts = proc.metric("scorer_bind_results_total", {"result": "conflict"}) - conflicts_before

    delete_every_pod(plane, proc, namespace)
    time.sleep(idle)
    rss_after = rss_kb(proc.proc.pid)
    phase("after")
    return ChurnReport(stats, rss_fresh, rss_idle, rss_peak, rss_after, lines, conflicts, len(kept_bound),
                       left_unbound, over)


# --- the test ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[ControlPlane]:
    with ControlPlane(tmp_path_factory.mktemp("churn-plane"), audit=False) as control_plane:
        yield control_plane


@pytest.fixture
def scorer(plane, tmp_path) -> Iterator[ScorerProcess]:
    proc = ScorerProcess(tmp_path, scheduler_config(tmp_path / "churn.yaml", SCHEDULER), plane.kubeconfig,
                         extra_args=("--seed", "7"))
    yield proc
    proc.stop()


def test_churn_loses_no_pod_and_memory_comes_back_after_every_pod_is_deleted(plane, scorer):
    cluster = Cluster(plane)
    try:
        report = churn_scenario(plane, cluster, scorer, rate=200, duration=60, idle=30)
    finally:
        with contextlib.suppress(OSError, AssertionError):  # (a collection of thousands may outlast 10 s)
            cluster.delete_pods(NAMESPACE)
        cluster.delete_all_nodes()
    print(report.summary())
    assert not scorer.exited(), scorer.log()[-3000:]
    assert report.stats.created > 5_000 and report.stats.deleted_bound > 2_000, report.summary()
    assert not report.unbound, f"pods never bound: {report.unbound[:10]}"
    assert report.kept_bound == len(report.stats.kept) > 0
    assert not report.over_allocatable, report.over_allocatable
    # Memory: the peak grew under churn; once every pod is gone it comes back to within 30 MB of idle.
    assert report.rss_after_kb <= report.rss_idle_kb + RSS_MARGIN_KB, report.summary()
    # The log: no line per bind conflict or per pod; a few dozen lines at most over the whole churn.
    assert report.log_lines <= 50, "\n".join(info_lines(scorer, 0, log_offset(scorer))[-60:])
    assert "Traceback" not in scorer.log()


# --- the full figure: python tests/test_fault_churn.py --duration 180 --rate 365 ---------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=365)
    parser.add_argument("--duration", type=float, default=180)
    parser.add_argument("--idle", type=float, default=30)
    parser.add_argument("--nodes", type=int, default=80)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="churn-") as tmp, ControlPlane(Path(tmp) / "plane", audit=False) as plane:
        workdir = Path(tmp)
        proc = ScorerProcess(workdir, scheduler_config(workdir / "churn.yaml", SCHEDULER), plane.kubeconfig,
                             extra_args=("--seed", "7"))
        try:
            report = churn_scenario(plane, Cluster(plane), proc, rate=args.rate, duration=args.duration,
                                    nodes=args.nodes, idle=args.idle)
        finally:
            log = proc.log()
            proc.stop()
        print(json.dumps(attrs.asdict(report, filter=lambda a, v: a.name not in ("kept", "unbound")), indent=1))
        print(report.summary())
        print("\n".join(line for line in log.splitlines() if LEVELS.match(line))[-5000:])


if __name__ == "__main__":
    main()
