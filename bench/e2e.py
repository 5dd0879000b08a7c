"""End-to-end bench: a scheduler process against a real kube-apiserver v1.20.2, binding timed from a watch.

    python bench/e2e.py --scheduler kube-scheduler --nodes 500,1000,5000 --pods 1000 --repeat 2
    python bench/e2e.py --scheduler both --nodes 1000
    python bench/e2e.py --scheduler scorer --rss-pods 50000       # 5,000 nodes, 49,000 bound + 1,000 pending

Each run gets a fresh control plane (tests/kubekit.py ``ControlPlane``: etcd + kube-apiserver on 127.0.0.1,
etcd's data on /dev/shm when it exists). The bench creates N Ready nodes (32 CPU, 128Gi, 110 pods) and M
pending pods (100m CPU, 500Mi: the scheduler_perf pod template) whose ``schedulerName`` is the profile of the
scheduler under test, over 64 concurrent keep-alive connections. It then opens a WATCH on the pods from a
resourceVersion taken before the scheduler starts, starts the scheduler as a subprocess, and stamps each pod
when the watch first shows it with a ``spec.nodeName``.

Reported per run:
- ``pods_per_second``: pods bound / seconds from the first bind to the last; ``pods_per_second_from_start``:
  from the scheduler's process start to the last bind (process start-up and the initial LIST included);
- ``algorithm_ms`` and ``attempt_ms``: p50/p90/p99 and mean of the scheduler's own histograms
  ``scheduler_scheduling_algorithm_duration_seconds`` and ``scheduler_scheduling_attempt_duration_seconds``
  (kube-scheduler 1.20 still calls the latter ``scheduler_e2e_scheduling_duration_seconds``; the one found is
  named in ``metric``), scraped from its ``/metrics`` at the end; quantiles are interpolated inside the buckets
  as Prometheus' ``histogram_quantile`` does (the first bucket is 1 ms wide), the mean is exact;
- ``rss_peak_mb`` (``VmHWM`` of the scheduler process) and ``rss_end_mb`` (``VmRSS`` at the end).

Schedulers:
- ``kube-scheduler``: the binary built by ``bash scripts/build-kube.sh --with-scheduler`` (or ``--kube-scheduler``),
  a ``kubescheduler.config.k8s.io/v1beta1`` configuration, ``--secure-port=0``, metrics and healthz on a free
  loopback port (its insecure port);
- ``scorer``: ``scorer run --config C --kubeconfig K --bind-address 127.0.0.1 --port P`` (``-m scorer`` of this
  Python), a ``kubescheduler.config.k8s.io/v1`` configuration.
Both: one profile with the default plugins, ``clientConnection.qps``/``burst`` from ``--qps``/``--burst``
(5000/5000 by default, as scheduler_perf, so neither is throttled by its client), ``leaderElect: false``,
``percentageOfNodesToScore: 0`` (the adaptive default of both).

``--rss-pods P`` (default nodes 5,000) first creates P - M pods already bound (``spec.nodeName`` set, spread
evenly, in another namespace) so the scheduler's cache holds P pods once the M pending pods are bound; the RSS
figures are read then. Every run has a deadline (``--timeout``): a run that does not finish reports
``timed_out`` with what it measured. Processes are ended at the end of each run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from prometheus_client.parser import text_string_to_metric_families

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
import kubekit  # noqa: E402  (tests/kubekit.py: ControlPlane, the cache directory, free_port)

SCHEDULERS = ("kube-scheduler", "scorer")
PROFILE = "e2e-bench"  # schedulerName of the measured pods and the one profile of the scheduler under test
NAMESPACE = "bench"  # measured (pending) pods
EXISTING_NAMESPACE = "bench-existing"  # pods created bound (--rss-pods)
NODE_ALLOCATABLE = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
POD_REQUESTS = {"cpu": "100m", "memory": "500Mi"}
ZONES = ("zone-a", "zone-b", "zone-c")
ALGORITHM = "scheduler_scheduling_algorithm_duration_seconds"
ATTEMPT = ("scheduler_scheduling_attempt_duration_seconds", "scheduler_e2e_scheduling_duration_seconds")
STOP_GRACE = 15.0  # seconds for a SIGTERM before SIGKILL


class BenchError(Exception):
    """A run that cannot go on (the message says why)."""


# --- the schedulers under test --------------------------------------------------------------------------


def kube_scheduler_binary(override: str | None) -> Path:
    path = Path(override) if override else Path(os.environ.get("SCORER_KUBE_BIN", kubekit.CACHE_BIN)) / "kube-scheduler"
    if not path.is_file():
        raise BenchError(f"no kube-scheduler at {path}: build it with 'bash scripts/build-kube.sh --with-scheduler' "
                         "(as root), or pass --kube-scheduler PATH")
    return path


def check_scorer_run() -> None:
    """Fails with a clear message when this Python's scorer has no ``run`` command."""
    try:
        done = subprocess.run([sys.executable, "-m", "scorer", "run", "--help"], capture_output=True, timeout=60,
                              cwd=REPO, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        raise BenchError("'python -m scorer run --help' did not answer within 60 s") from error
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()[-1:] or ["?"]
        raise BenchError(f"'scorer run' is not available in {sys.executable} (python -m scorer run --help exited "
                         f"{done.returncode}: {tail[0]}); --scheduler scorer needs the scheduler service (issue 8)")


def scheduler_command(name: str, workdir: Path, kubeconfig: Path, port: int, qps: float, burst: int,
                      kube_scheduler: Path | None) -> list[str]:
    """Writes the scheduler's configuration into ``workdir`` and returns its command line."""
    common = {
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        "percentageOfNodesToScore": 0,
        "profiles": [{"schedulerName": PROFILE}],
    }
    config = workdir / f"{name}-config.json"  # JSON is YAML: both read it
    if name == "kube-scheduler":
        assert kube_scheduler is not None
        address = f"127.0.0.1:{port}"
        config.write_text(json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1beta1", **common,
                                      "healthzBindAddress": address, "metricsBindAddress": address}, indent=2))
        return [str(kube_scheduler), f"--config={config}", "--secure-port=0", "-v=1"]
    config.write_text(json.dumps({"apiVersion": "kubescheduler.config.k8s.io/v1", **common}, indent=2))
    return [sys.executable, "-m", "scorer", "run", "--config", str(config), "--kubeconfig", str(kubeconfig),
            "--bind-address", "127.0.0.1", "--port", str(port)]


# --- objects --------------------------------------------------------------------------------------------


def node_object(index: int) -> dict[str, Any]:
    name = f"node-{index:05d}"
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                              "topology.kubernetes.io/zone": ZONES[index % len(ZONES)]}},
        "status": {"capacity": NODE_ALLOCATABLE, "allocatable": NODE_ALLOCATABLE,
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                   "message": "e2e bench node", "lastHeartbeatTime": now,
                                   "lastTransitionTime": now}]},
    }


def pod_object(name: str, namespace: str, scheduler_name: str, node: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulerName": scheduler_name, "containers": [{
        "name": "pause", "image": "registry.k8s.io/pause:3.2", "resources": {"requests": POD_REQUESTS}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def pending_pod_names(count: int) -> list[str]:
    return [f"pod-{i:06d}" for i in range(count)]


# --- API access (the harness's own, unthrottled: measuring must not go through the code under test) -----------


class Api:
    """An aiohttp session to the control plane: bounded creates with a worker pool, a LIST, a WATCH stream."""

    def __init__(self, plane: kubekit.ControlPlane, concurrency: int) -> None:
        self.url = plane.url
        self.concurrency = concurrency
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=concurrency, ssl=False, keepalive_timeout=60),
            headers={"Authorization": f"Bearer {kubekit.TOKEN}", "Content-Type": "application/json"},
            read_bufsize=2**21, json_serialize=lambda o: orjson.dumps(o).decode())

    async def close(self) -> None:
        await self.session.close()

    async def create(self, path: str, obj: dict[str, Any], deadline: float) -> None:
        """POST one object; 409 (already there) is fine; 429/5xx/transport errors retried until the deadline."""
        body = orjson.dumps(obj)
        delay = 0.05
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BenchError(f"deadline reached while creating {path}")
            try:
                async with self.session.post(self.url + path, data=body,
                                             timeout=aiohttp.ClientTimeout(total=min(30.0, remaining))) as resp:
                    text = await resp.read()
                    if resp.status in (200, 201, 202, 409):
                        return
                    if resp.status != 429 and resp.status < 500:
                        raise BenchError(f"POST {path} answered {resp.status}: {text[:300]!r}")
            except (aiohttp.ClientError, TimeoutError):
                pass
            await asyncio.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 2.0)

    async def create_all(self, items: Iterable[tuple[str, dict[str, Any]]], deadline: float) -> float:
        """Creates every (path, object) with ``concurrency`` workers; returns the seconds it took."""
        start = time.monotonic()
        iterator: Iterator[tuple[str, dict[str, Any]]] = iter(items)

        async def worker() -> None:
            for path, obj in iterator:  # one shared iterator: each item is taken once
                await self.create(path, obj, deadline)

        await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        return time.monotonic() - start

    async def get_json(self, path: str, deadline: float) -> dict[str, Any]:
        remaining = max(0.1, deadline - time.monotonic())
        async with self.session.get(self.url + path, timeout=aiohttp.ClientTimeout(total=min(60.0, remaining))) as r:
            body = await r.read()
            if r.status != 200:
                raise BenchError(f"GET {path} answered {r.status}: {body[:300]!r}")
            result: dict[str, Any] = orjson.loads(body)
            return result


class BindWatch:
    """Stamps each measured pod when a WATCH first shows it bound (``spec.nodeName`` set)."""

    def __init__(self, api: Api, names: Iterable[str], resource_version: str) -> None:
        self.api = api
        self.pending = set(names)
        self.resource_version = resource_version
        self.bound: dict[str, tuple[float, str]] = {}  # pod name -> (monotonic time of the event, node)
        self.rebinds = 0  # a bound pod seen on another node: must stay 0
        self.watches = 0
        self.established = asyncio.Event()
        self.complete = asyncio.Event()

    async def run(self, deadline: float) -> None:
        path = f"/api/v1/namespaces/{NAMESPACE}/pods"
        while not self.complete.is_set():
            remaining = deadline - time.monotonic()
            if remaining <= 1:
                return
            params = {"watch": "1", "resourceVersion": self.resource_version, "allowWatchBookmarks": "true",
                      "timeoutSeconds": str(int(min(remaining, 1800)))}
            self.watches += 1
            try:
                async with self.api.session.get(self.api.url + path, params=params,
                                                timeout=aiohttp.ClientTimeout(total=remaining + 5)) as resp:
                    if resp.status != 200:
                        raise BenchError(f"WATCH {path} answered {resp.status}: {(await resp.read())[:300]!r}")
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
        if event.get("type") == "ERROR":  # e.g. 410 Expired: bind times after the gap would be wrong
            raise BenchError(f"the watch failed: {obj.get('message') or obj}")
        metadata = obj.get("metadata") or {}
        self.resource_version = metadata.get("resourceVersion", self.resource_version)
        if event.get("type") not in ("ADDED", "MODIFIED"):
            return
        node = (obj.get("spec") or {}).get("nodeName")
        name = metadata.get("name")
        if not node or name not in self.pending:
            return
        seen = self.bound.get(name)
        if seen is None:
            self.bound[name] = (now, node)
            if len(self.bound) == len(self.pending):
                self.complete.set()
        elif seen[1] != node:
            self.rebinds += 1


# --- the scheduler process --------------------------------------------------------------------------------


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | str) -> float:
    """User + system CPU seconds of a process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime (fields 14 and 15 of stat)


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent not idle (all cores)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:8]]
    return (sum(values) - values[3] - values[4]) / CLOCK_TICKS  # minus idle and iowait


def cpu_snapshot(pids: dict[str, int | str]) -> dict[str, float]:
    return {"machine": machine_busy_seconds(), **{name: cpu_seconds(pid) for name, pid in pids.items()}}


def cpu_split(before: dict[str, float], after: dict[str, float], wall: float) -> dict[str, float]:
    """CPU seconds each process used between two snapshots; ``other`` is everything else on the machine
    (other work sharing the cores), ``wall`` the seconds between the snapshots."""
    used = {name: after[name] - before[name] for name in before}
    machine = used.pop("machine")
    return {**{k: round(v, 2) for k, v in used.items()}, "other": round(max(0.0, machine - sum(used.values())), 2),
            "wall": round(wall, 2), "cores": os.cpu_count() or 1}


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process in kB ({} once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


async def watch_process(proc: subprocess.Popen[bytes], peak: dict[str, int], exited: asyncio.Event) -> None:
    """Polls the process' RSS (every 0.2 s) until it exits."""
    while proc.poll() is None:
        status = proc_status(proc.pid)
        peak["VmRSS"] = max(peak.get("VmRSS", 0), status.get("VmRSS", 0))
        peak["VmHWM"] = max(peak.get("VmHWM", 0), status.get("VmHWM", 0))
        await asyncio.sleep(0.2)
    exited.set()


def stop_process(proc: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM, then SIGKILL after STOP_GRACE seconds; returns the exit code."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_GRACE)
    return proc.returncode


def log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --- metrics --------------------------------------------------------------------------------------------


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus' histogram_quantile over cumulative (upper bound, count) buckets sorted by bound."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for upper, count in buckets:
        if count >= rank:
            if upper == float("inf"):
                return lower  # the upper bound of the highest finite bucket
            if count == below:
                return upper
            return lower + (upper - lower) * (rank - below) / (count - below)
        lower, below = upper, count
    return lower


def histogram_summary(metrics_text: str, names: Iterable[str]) -> dict[str, Any] | None:
    """p50/p90/p99/mean in ms of the first histogram of ``names`` found, over all its series
    (only ``result="scheduled"`` when the histogram has a ``result`` label)."""
    families = {family.name: family for family in text_string_to_metric_families(metrics_text)}
    for name in names:
        family = families.get(name)
        if family is None or family.type != "histogram":
            continue
        samples = family.samples
        if any("result" in s.labels for s in samples):
            samples = [s for s in samples if s.labels.get("result") == "scheduled"]
        buckets: dict[float, float] = {}
        total = count = 0.0
        for s in samples:
            if s.name == name + "_bucket":
                le = float(s.labels["le"])
                buckets[le] = buckets.get(le, 0.0) + s.value
            elif s.name == name + "_sum":
                total += s.value
            elif s.name == name + "_count":
                count += s.value
        ordered = sorted(buckets.items())

        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1000.0, 3)

        return {"metric": name, "count": int(count),
                "p50": ms(histogram_quantile(0.5, ordered)), "p90": ms(histogram_quantile(0.9, ordered)),
                "p99": ms(histogram_quantile(0.99, ordered)), "mean": ms(total / count) if count else None}
    return None


async def scrape(session: aiohttp.ClientSession, port: int, want: int, deadline: float) -> str | None:
    """The scheduler's /metrics, once its attempt histogram counts ``want`` pods (or after 5 s)."""
    until = min(deadline, time.monotonic() + 5.0)
    text = None
    while True:
        try:
            async with session.get(f"http://127.0.0.1:{port}/metrics", timeout=aiohttp.ClientTimeout(total=5)) as r:
                if r.status == 200:
                    text = await r.text()
                    attempts = histogram_summary(text, ATTEMPT)
                    if attempts is not None and attempts["count"] >= want:
                        return text
        except (aiohttp.ClientError, TimeoutError):
            pass
        if time.monotonic() >= until:
            return text
        await asyncio.sleep(0.25)


# --- one run ----------------------------------------------------------------------------------------------


def workdir_base() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


async def load_cluster(api: Api, nodes: int, pods: int, existing: int, deadline: float) -> dict[str, float]:
    for namespace in (NAMESPACE, EXISTING_NAMESPACE):
        await api.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": namespace}}, deadline)
    seconds = {"nodes": await api.create_all((("/api/v1/nodes", node_object(i)) for i in range(nodes)), deadline)}
    if existing:
        path = f"/api/v1/namespaces/{EXISTING_NAMESPACE}/pods"
        seconds["existing_pods"] = await api.create_all(
            ((path, pod_object(f"existing-{i:06d}", EXISTING_NAMESPACE, PROFILE, f"node-{i % nodes:05d}"))
             for i in range(existing)), deadline)
    path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    seconds["pods"] = await api.create_all(((path, pod_object(name, NAMESPACE, PROFILE))
                                            for name in pending_pod_names(pods)), deadline)
    return {k: round(v, 2) for k, v in seconds.items()}


async def measure(plane: kubekit.ControlPlane, args: argparse.Namespace, nodes: int, existing: int, deadline: float,
                  result: dict[str, Any], start_scheduler: Callable[[], subprocess.Popen[bytes]]) -> None:
    """Loads the cluster, starts the scheduler and fills ``result`` with what the watch, /metrics and /proc say."""
    api = Api(plane, args.concurrency)
    try:
        result["load_seconds"] = await load_cluster(api, nodes, args.pods, existing, deadline)
        listing = await api.get_json(f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1", deadline)
        watch = BindWatch(api, pending_pod_names(args.pods), listing["metadata"]["resourceVersion"])
        watch_task = asyncio.create_task(watch.run(deadline), name="bind-watch")
        established = asyncio.create_task(watch.established.wait())
        await asyncio.wait({watch_task, established}, timeout=max(0.1, min(30.0, deadline - time.monotonic())),
                           return_when=asyncio.FIRST_COMPLETED)
        if not watch.established.is_set():
            established.cancel()
            if watch_task.done():
                watch_task.result()  # raises what stopped it
            watch_task.cancel()
            raise BenchError("the pod watch was not established within 30 s")
        etcd, apiserver = plane.processes
        result["load_average_before"] = [round(x, 2) for x in os.getloadavg()]
        t0 = time.monotonic()
        proc = start_scheduler()
        pids: dict[str, int | str] = {"scheduler": proc.pid, "kube_apiserver": apiserver.pid, "etcd": etcd.pid,
                                      "harness": "self"}
        cpu_before = {**cpu_snapshot(pids), "scheduler": 0.0}
        peak: dict[str, int] = {}
        exited = asyncio.Event()
        poller = asyncio.create_task(watch_process(proc, peak, exited), name="rss-poll")
        exit_wait = asyncio.create_task(exited.wait())
        complete = asyncio.create_task(watch.complete.wait())
        await asyncio.wait({complete, exit_wait, watch_task}, timeout=max(0.0, deadline - time.monotonic()),
                           return_when=asyncio.FIRST_COMPLETED)
        result["cpu_seconds"] = cpu_split(cpu_before, cpu_snapshot(pids), time.monotonic() - t0)
        for task in (complete, exit_wait):
            task.cancel()
        if watch_task.done() and not watch.complete.is_set():
            watch_task.result()  # a watch error ends the run with its message
        times = sorted(t for t, _ in watch.bound.values())
        bound = len(times)
        result.update({
            "bound": bound,
            "timed_out": bound < args.pods and proc.poll() is None,
            "scheduler_exited_early": proc.poll() is not None,
            "rebinds": watch.rebinds,
            "watches": watch.watches,
            "nodes_used": len({node for _, node in watch.bound.values()}),
        })
        if bound:
            span = times[-1] - times[0]
            result.update({
                "first_bind_after_start_s": round(times[0] - t0, 3),
                "last_bind_after_start_s": round(times[-1] - t0, 3),
                "pods_per_second": round((bound - 1) / span, 1) if span > 0 else None,
                "pods_per_second_from_start": round(bound / (times[-1] - t0), 1),
                # binds in each whole second from the first bind (scheduler_perf samples throughput this way)
                "binds_per_second_samples": [sum(1 for t in times if times[0] + i <= t < times[0] + i + 1)
                                             for i in range(int(span))],
            })
        if proc.poll() is None:
            metrics = await scrape(api.session, result["metrics_port"], bound, deadline + 10)
            if metrics is None:
                result["metrics_error"] = "no /metrics answer"
            else:
                result["algorithm_ms"] = histogram_summary(metrics, (ALGORITHM,))
                result["attempt_ms"] = histogram_summary(metrics, ATTEMPT)
            status = proc_status(proc.pid)
            peak["VmHWM"] = max(peak.get("VmHWM", 0), status.get("VmHWM", 0))
            result["rss_end_mb"] = round(status.get("VmRSS", 0) / 1024, 1)
        poller.cancel()
        result["rss_peak_mb"] = round(max(peak.get("VmHWM", 0), peak.get("VmRSS", 0)) / 1024, 1)
        watch_task.cancel()
        await asyncio.gather(watch_task, poller, return_exceptions=True)
    finally:
        await api.close()


def run_one(args: argparse.Namespace, scheduler: str, nodes: int, repeat: int) -> dict[str, Any]:
    existing = max(0, args.rss_pods - args.pods) if args.rss_pods else 0
    result: dict[str, Any] = {"scheduler": scheduler, "nodes": nodes, "pods": args.pods, "existing_pods": existing,
                              "repeat": repeat, "bound": 0, "timed_out": False}
    deadline = time.monotonic() + args.timeout
    workdir = Path(tempfile.mkdtemp(prefix="scorer-e2e-", dir=workdir_base()))
    result["workdir_on_tmpfs"] = str(workdir).startswith("/dev/shm")
    kube_scheduler = kube_scheduler_binary(args.kube_scheduler) if scheduler == "kube-scheduler" else None
    plane = kubekit.ControlPlane(workdir / "plane", audit=False)
    procs: list[subprocess.Popen[bytes]] = []
    log = workdir / f"{scheduler}.log"
    try:
        plane.start()
        port = kubekit.free_port()
        result["metrics_port"] = port
        command = scheduler_command(scheduler, workdir, plane.kubeconfig, port, args.qps, args.burst, kube_scheduler)
        result["command"] = command

        def start_scheduler() -> subprocess.Popen[bytes]:
            with open(log, "wb") as out:
                proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        cwd=workdir)
            procs.append(proc)
            return proc

        asyncio.run(measure(plane, args, nodes, existing, deadline, result, start_scheduler))
    except BenchError as error:
        result["error"] = str(error)
        result["timed_out"] = time.monotonic() >= deadline
    except Exception as error:  # a run that breaks is reported; the next runs still happen
        result["error"] = f"{type(error).__name__}: {error}"
        result["timed_out"] = time.monotonic() >= deadline
    finally:
        for proc in procs:
            result["scheduler_exit_code"] = stop_process(proc)  # after SIGTERM unless it exited early
        if procs and (result.get("error") or result["bound"] < args.pods):
            result["scheduler_log_tail"] = log_tail(log)
        plane.stop()
        if args.keep:
            result["workdir"] = str(workdir)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    result.pop("metrics_port", None)
    return result


# --- report --------------------------------------------------------------------------------------------


def fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:,.{digits}f}" if isinstance(value, int | float) else str(value)


def quantiles(h: dict[str, Any] | None) -> str:
    if not h:
        return "-"
    return " / ".join(fmt(h[k], 2) for k in ("p50", "p90", "p99")) + f" ({fmt(h['mean'], 2)})"


def markdown(results: list[dict[str, Any]]) -> str:
    lines = ["| scheduler | nodes | pods | bound | pods/s first→last | pods/s from start | algorithm ms p50 / p90 / "
             "p99 (mean) | attempt ms p50 / p90 / p99 (mean) | peak RSS MB |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        pods = f"{r['pods']:,}" + (f" (+{r['existing_pods']:,} bound)" if r["existing_pods"] else "")
        bound = f"{r['bound']:,}" + (" TIMEOUT" if r.get("timed_out") else "") + (" ERROR" if r.get("error") else "")
        lines.append(f"| {r['scheduler']} | {r['nodes']:,} | {pods} | {bound} | {fmt(r.get('pods_per_second'))} | "
                     f"{fmt(r.get('pods_per_second_from_start'))} | {quantiles(r.get('algorithm_ms'))} | "
                     f"{quantiles(r.get('attempt_ms'))} | {fmt(r.get('rss_peak_mb'))} |")
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default=None,
                        help="comma-separated node counts (default 500,1000,5000; 5000 with --rss-pods)")
    parser.add_argument("--pods", type=int, default=1000, help="pending pods to schedule per run")
    parser.add_argument("--scheduler", choices=(*SCHEDULERS, "both"), default="both")
    parser.add_argument("--rss-pods", type=int, default=0,
                        help="total pods in the cluster: the ones beyond --pods are created already bound")
    parser.add_argument("--repeat", type=int, default=1, help="runs per point, each on a fresh control plane")
    parser.add_argument("--qps", type=float, default=5000.0, help="clientConnection.qps of both schedulers")
    parser.add_argument("--burst", type=int, default=5000, help="clientConnection.burst of both schedulers")
    parser.add_argument("--concurrency", type=int, default=64, help="connections used to create the objects")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline of each run, seconds")
    parser.add_argument("--kube-scheduler", default=None, help="kube-scheduler binary (default: the build cache)")
    parser.add_argument("--keep", action="store_true", help="keep each run's work directory (logs, etcd data)")
    parser.add_argument("--out", default=None, help="JSON results (default bench/results/e2e-<date>.json)")
    args = parser.parse_args(argv)
    args.nodes = args.nodes or ("5000" if args.rss_pods else "500,1000,5000")
    try:
        args.sizes = [int(s) for s in args.nodes.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--nodes must be comma-separated integers, not {args.nodes!r}")
    if not args.sizes or min(args.sizes) < 1 or args.pods < 1 or args.repeat < 1 or args.concurrency < 1:
        parser.error("--nodes, --pods, --repeat and --concurrency must be positive")
    if args.rss_pods and args.rss_pods < args.pods:
        parser.error("--rss-pods counts every pod, so it must be at least --pods")
    args.out = args.out or f"bench/results/e2e-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    schedulers = SCHEDULERS if args.scheduler == "both" else (args.scheduler,)
    try:
        kubekit.kube_binaries()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # pytest's Skipped/Failed (not Exception subclasses): the message says why
        print(f"e2e: {error}", file=sys.stderr)
        return 2
    try:
        if "kube-scheduler" in schedulers:
            kube_scheduler_binary(args.kube_scheduler)
        if "scorer" in schedulers:
            check_scorer_run()
    except BenchError as error:
        print(f"e2e: {error}", file=sys.stderr)
        return 2
    version = subprocess.run([str(Path(os.environ.get("SCORER_KUBE_BIN", kubekit.CACHE_BIN)) / "kube-apiserver"),
                              "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    results = []
    for nodes, repeat, scheduler in itertools.product(args.sizes, range(1, args.repeat + 1), schedulers):
        print(f"e2e: {scheduler}, {nodes:,} nodes, {args.pods:,} pods"
              + (f" (+{args.rss_pods - args.pods:,} bound)" if args.rss_pods else "") + f", run {repeat}",
              file=sys.stderr, flush=True)
        r = run_one(args, scheduler, nodes, repeat)
        results.append(r)
        print(f"e2e:   bound {r['bound']:,}/{r['pods']:,}, {fmt(r.get('pods_per_second'))} pods/s first→last, "
              f"{fmt(r.get('pods_per_second_from_start'))} from start, peak RSS {fmt(r.get('rss_peak_mb'))} MB"
              + (f"; ERROR {r['error']}" if r.get("error") else "") + (" TIMEOUT" if r.get("timed_out") else ""),
              file=sys.stderr, flush=True)
    report = {
        "bench": "e2e",
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "kube_apiserver": version,
        "python": sys.version.split()[0],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "load_average": os.getloadavg()},
        "settings": {"qps": args.qps, "burst": args.burst, "concurrency": args.concurrency, "timeout": args.timeout,
                     "profile": PROFILE, "node_allocatable": NODE_ALLOCATABLE, "pod_requests": POD_REQUESTS},
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(results))
    print(f"written {out}")
    failed = [r for r in results if r.get("error") or r["bound"] < r["pods"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
