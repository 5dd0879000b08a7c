"""The bench's end-to-end mode: a scheduler process against a real kube-apiserver v1.20.2, binds timed from a watch.

``run_e2e_point`` measures one point as scheduler_perf does, but with the
scheduler as its own process and the API server real: binding, Events and the
watch are part of what is timed. For each point:

1. a fresh control plane (``scorer.bench.controlplane``: etcd on ``/dev/shm``
   when it exists, kube-apiserver on 127.0.0.1);
2. the Setup's objects are created over 64 keep-alive connections, in order:
   namespaces and PriorityClasses, workloads (Services, ReplicaSets, PDBs ...:
   default spreading reads them), nodes (with their status: allocatable,
   capacity, Ready; no kubelet ever changes it), the init pods already bound
   (``spec.nodeName`` set), then the measured pods, pending. None of it is
   timed;
3. a WATCH on every pod from a resourceVersion taken after that;
4. the scheduler starts: ``python -m scorer run`` with a ``v1`` configuration,
   or kube-scheduler v1.20.2 with a ``v1beta1`` one, each with the profile
   (its own default plugins, or ``config_path``'s profiles: converted to
   v1beta1 for kube-scheduler, or an error saying why not),
   ``clientConnection.qps``/``burst``, ``leaderElect: false`` and the point's
   ``percentageOfNodesToScore``. For ``kube-scheduler+scorer`` (``EXTENDER``),
   scorer starts first as kube-scheduler's HTTP extender (``scorer run
   --extender-profile scorer-extender --no-scheduling --metrics FILE``: only
   the metric-driven plugins of the ``metrics`` profile, reading the Setup's
   generated snapshot, written to FILE), and kube-scheduler, started once
   scorer's ``/readyz`` answers 200 (its caches synced), gets an ``extenders``
   entry for it (``nodeCacheCapable: true``, ``ignorable: false``, weight 5);
   ``kube-scheduler+stand-in`` (``STAND_IN``) is the same with
   ``scorer.bench.standin`` in scorer's place, an extender that answers at
   once (the protocol's own cost); binds are timed from kube-scheduler's
   start, as for the others;
5. each measured pod is stamped when the watch first shows it bound. The
   harness plays the kubelet's one part a preemption needs: a bound pod the
   scheduler deletes (a victim, graceful deletion) is removed at once
   (``gracePeriodSeconds: 0``), as a kubelet would once its containers stop;
6. the run ends when every measured pod is bound, when no pod was bound for
   ``STALL_SECONDS`` (``FIRST_BIND_SECONDS`` before the first: start-up and the initial LISTs of a
   large cluster), the rest reported unscheduled, or at the deadline;
   the scheduler's ``/metrics`` is scraped, then every process is stopped.

The point (``scorer.bench.spec``'s shape, ``mode: "e2e"``) carries:
``throughput`` (pods bound over the seconds from the first bind to the last,
binds in each whole second and their p50/p90/p99, and
``pods_per_second_from_start``: from the scheduler's process start, its
start-up and initial LIST included); ``cycle_ms`` from the scheduler's
``scheduler_scheduling_algorithm_duration_seconds`` histogram (quantiles
interpolated inside the buckets as Prometheus' ``histogram_quantile`` does:
the first bucket is 0-1 ms, so sub-millisecond quantiles are coarse, the mean
is exact; ``max`` cannot be known from a histogram: null); ``attempt_ms``
(``scheduler_scheduling_attempt_duration_seconds``, kube 1.20's
``scheduler_e2e_scheduling_duration_seconds``: until the bind returned);
``extension_points_ms`` and ``plugins_ms`` from
``scheduler_framework_extension_point_duration_seconds`` and
``scheduler_plugin_execution_duration_seconds`` (both schedulers sample the
plugin durations in 10% of the cycles); ``memory.peak_rss_mb`` (``VmHWM`` of
the scheduler process); ``cpu_seconds`` used from the scheduler's start to
the end by the scheduler, kube-apiserver, etcd, this harness and the rest of
the machine (``other``: work sharing the cores). The end is once every bound
pod has its ``Scheduled`` Event too (at most ``EVENTS_SECONDS`` after the last
bind), so Events a scheduler writes after its bindings are in its CPU;
``events`` says how many bound pods had theirs then and how long after the
last bind the last came. A ``kube-scheduler+scorer``
point also has ``extender``: how kube-scheduler calls scorer and what scorer's
``/metrics`` counted (``scorer_extender_requests_total`` by verb and result,
``scorer_extender_request_duration_seconds`` by verb, its peak RSS; its CPU
seconds are ``cpu_seconds.extender``); ``memory`` is kube-scheduler's. A
``kube-scheduler+stand-in`` point has the same section for the stand-in.

The schedulers' configurations and command lines are in ``scorer.bench.e2e_config``, the API access and
the bind watch in ``scorer.bench.e2e_api``, what is read of the processes and their ``/metrics`` in
``scorer.bench.e2e_metrics``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import attrs
import orjson

from scorer.bench.controlplane import (
    KUBE_VERSION,
    ControllerManager,
    ControlPlane,
    ControlPlaneError,
    end_process,
    find_binary,
    free_port,
    kube_binaries,
    tmpfs_dir,
)
from scorer.bench.e2e_api import (
    Api,
    BindWatch,
    Objects,
    Request,
    ScheduledEventWatch,
    request_for,
    setup_objects,
)
from scorer.bench.e2e_config import (
    BUILD_HINT,
    EXTENDED,
    EXTENDER,
    EXTENDER_PROFILE,
    EXTENDER_WEIGHT,
    KUBE_SCHEDULERS,
    STAND_IN,
    E2EError,
    bytecode_cache,
    catalog,
    extender_command,
    extender_entry,
    extender_scorer_config,
    kube_scheduler_config,
    python_env,
    scheduler_command,
    scorer_config,
    snapshot_document,
    stand_in_command,
    v1beta1_profile,
    warm_bytecode,
)
from scorer.bench.e2e_metrics import (
    ATTEMPT,
    cpu_per_pod,
    cpu_seconds,
    cpu_snapshot,
    cpu_split,
    cycle_ms,
    extender_figures,
    extension_points_ms,
    log_tail,
    plugins_ms,
    poll_rss,
    proc_status,
    scrape,
    startup_s,
    summary_ms,
)
from scorer.bench.runner import METRICS_CONFIG, histogram_quantile
from scorer.bench.spec import PointSpec, Setup
from scorer.bench.spec import throughput as spec_throughput
from scorer.config.load import load_and_resolve
from scorer.errors import ScorerError

# What the other bench modules and the tests use, with the parts defined in e2e_config, e2e_api and e2e_metrics.
__all__ = [
    "ATTEMPT",
    "Api",
    "E2EError",
    "EXTENDED",
    "EXTENDER",
    "Objects",
    "Request",
    "Run",
    "STAND_IN",
    "e2e_available",
    "bytecode_cache",
    "cpu_per_pod",
    "empty_extender",
    "empty_point",
    "extender_entry",
    "extender_figures",
    "extension_points_ms",
    "histogram_quantile",
    "kube_scheduler_config",
    "load",
    "plugins_ms",
    "python_env",
    "request_for",
    "run_e2e_point",
    "scorer_config",
    "setup_objects",
    "startup_s",
    "summary_ms",
    "throughput",
    "v1beta1_profile",
    "warm_bytecode",
]

STALL_SECONDS = 30.0  # no bind for this long: the rest are unscheduled
FIRST_BIND_SECONDS = 300.0  # the same before the first bind (start-up and the initial LISTs of a large cluster)
WATCH_READY_SECONDS = 30.0
EVENTS_SECONDS = 30.0  # after the last bind, for the Scheduled Events of the bound pods (the CPU is read then)
VOLUMES_SYNC_SECONDS = 120.0  # for the PersistentVolume controller to give thousands of new volumes a phase
SERVICE_RANGE = "10.96.0.0/12"  # room for a user's Services (each gets a ClusterIP)

EXTENDER_READY_SECONDS = 300.0  # scorer's start-up and the initial LISTs of a large cluster, to /readyz 200


def e2e_available() -> str | None:
    """None when kube-apiserver, etcd (and openssl) and kube-scheduler are there, else the one-line reason."""
    try:
        binaries = kube_binaries()
    except ControlPlaneError as error:
        return str(error)
    if binaries.scheduler is None:
        return f"kube-scheduler not found: {BUILD_HINT}"
    return None


# --- one point -----------------------------------------------------------------------------------------


def throughput(times: list[float], started: float) -> dict[str, Any] | None:
    """``spec.throughput`` from the first bind, and pods per second from the scheduler's start."""
    if not times:
        return None
    return {**spec_throughput(times, times[0]),
            "pods_per_second_from_start": round(len(times) / (times[-1] - started), 1),
            "first_bind_after_start_s": round(times[0] - started, 3),
            "last_bind_after_start_s": round(times[-1] - started, 3)}


def empty_point(setup: Setup, spec: PointSpec, config_path: str | None) -> dict[str, Any]:
    return {"workload": spec.workload, "mode": "e2e", "scheduler": spec.scheduler,
            "profile": config_path or "default", "nodes": len(setup.nodes), "percentage": spec.percentage,
            "init_pods": len(setup.init), "pods": len(setup.measured), "bound": 0, "unscheduled": len(setup.measured),
            "cycle_ms": None, "cycle_source": "algorithm histogram", "attempt_ms": None, "throughput": None,
            "extension_points_ms": {}, "plugins_ms": {},
            "memory": {"peak_rss_mb": None, "base_rss_mb": None, "bytes_per_node": None, "bytes_per_pod": None},
            "cpu_seconds": None, "cpu_per_pod": None, "events": None, "startup_s": None, "load_s": {}, "wall_s": None,
            "check": {},
            "warnings": [], "error": None,
            "kube_version": KUBE_VERSION,
            **({"extender": empty_extender(spec.scheduler)} if spec.scheduler in EXTENDED else {})}


def empty_extender(scheduler: str = EXTENDER) -> dict[str, Any]:
    """An EXTENDER or STAND_IN point's ``extender``: how kube-scheduler calls it, then what its /metrics
    counted (the stand-in has no profile and no plugin)."""
    metrics = METRICS_CONFIG["profiles"][0]
    scorer = scheduler == EXTENDER
    return {"profile": EXTENDER_PROFILE if scorer else None,
            "plugins": [entry["name"] for entry in metrics["plugins"]["multiPoint"]["enabled"]] if scorer else [],
            "weight": EXTENDER_WEIGHT, "nodeCacheCapable": True, "ignorable": False,
            "requests": None, "errors": None, "unknown_nodes": None, "mean_ms": None, "p50_ms": None,
            "p99_ms": None, "peak_rss_mb": None}


@attrs.define
class Run:
    """One point's moving parts: where it works, the control plane, the scheduler process."""

    setup: Setup
    spec: PointSpec
    config_path: str | None
    qps: float
    burst: int
    deadline: float
    point: dict[str, Any]
    workdir: Path = attrs.field(factory=lambda: Path(tempfile.mkdtemp(prefix="scorer-e2e-", dir=tmpfs_dir())))
    plane: ControlPlane | None = None
    controllers: ControllerManager | None = None  # the PersistentVolume controller, for setups with volumes
    scheduler: subprocess.Popen[bytes] | None = None
    port: int = 0  # the scheduler's /metrics
    extender: subprocess.Popen[bytes] | None = None  # kube-scheduler's extender (EXTENDED points)
    extender_command: list[str] | None = None
    extender_port: int = 0  # its verbs, /readyz and /metrics

    @property
    def log(self) -> Path:
        return self.workdir / f"{self.spec.scheduler}.log"

    @property
    def extender_log(self) -> Path:
        return self.workdir / "extender.log"

    @property
    def extender_name(self) -> str:
        return "scorer (the extender)" if self.spec.scheduler == EXTENDER else "the stand-in extender"

    def write_config(self, port: int) -> list[str]:
        """Writes the scheduler's configuration (JSON: both read it as YAML) and returns its command line;
        scorer's is loaded here once, so a configuration it refuses is an error before anything starts."""
        assert self.plane is not None
        self.port = port
        kubeconfig = self.plane.kubeconfig
        path = self.workdir / "scheduler-config.json"
        if self.spec.scheduler in KUBE_SCHEDULERS:
            config, notes = kube_scheduler_config(self.setup, self.spec, self.config_path, kubeconfig, self.qps,
                                                  self.burst, port)
            self.point["warnings"].extend(notes)
            if self.spec.scheduler == EXTENDER:
                config["extenders"] = [extender_entry(self.write_extender_config())]
            elif self.spec.scheduler == STAND_IN:
                self.extender_port = self.free_extender_port()
                self.extender_command = stand_in_command(self.extender_port)
                config["extenders"] = [extender_entry(self.extender_port)]
            path.write_text(json.dumps(config, indent=2))
        elif self.spec.scheduler == "scorer":
            config = scorer_config(self.setup, self.spec, self.config_path, kubeconfig, self.qps, self.burst)
            path.write_text(json.dumps(config, indent=2))
            if self.config_path is not None:
                load_and_resolve(path, catalog())
        else:
            raise E2EError(f"unknown scheduler {self.spec.scheduler!r}: expected scorer, kube-scheduler, "
                           f"{EXTENDER} or {STAND_IN}")
        return scheduler_command(self.spec, path, kubeconfig, port, kube_binaries().scheduler)

    def write_extender_config(self) -> int:
        """Writes scorer's extender configuration (loaded here once, as scorer's) and the Setup's metrics
        snapshot, sets the extender's command line; returns its port."""
        assert self.plane is not None
        if self.setup.metrics is None:
            raise E2EError(f"workload {self.spec.workload}: scorer's extender reads a metrics snapshot, and this "
                           "setup has none (a workload marked extender needs a metric-driven profile)")
        config = self.workdir / "extender-config.json"
        config.write_text(json.dumps(extender_scorer_config(self.spec, self.plane.kubeconfig, self.qps, self.burst),
                                     indent=2))
        load_and_resolve(config, catalog())
        snapshot = self.workdir / "metrics-snapshot.json"
        snapshot.write_bytes(orjson.dumps(snapshot_document(self.setup.metrics)))
        self.extender_port = self.free_extender_port()
        self.extender_command = extender_command(config, self.plane.kubeconfig, self.extender_port, snapshot)
        return self.extender_port

    def free_extender_port(self) -> int:
        port = free_port()
        while port == self.port:
            port = free_port()
        return port

    @property
    def bytecode(self) -> Path:
        """The Python processes' bytecode cache (``scorer.bench.e2e_config.bytecode_cache``)."""
        return bytecode_cache()

    def start_scheduler(self, command: list[str]) -> subprocess.Popen[bytes]:
        env = python_env(self.bytecode) if command[0] == sys.executable else None
        with open(self.log, "wb") as out:
            self.scheduler = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT,
                                              stdin=subprocess.DEVNULL, cwd=self.workdir, env=env)
        return self.scheduler

    def start_extender(self) -> subprocess.Popen[bytes]:
        assert self.extender_command is not None
        with open(self.extender_log, "wb") as out:
            self.extender = subprocess.Popen(self.extender_command, stdout=out, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.workdir,
                                             env=python_env(self.bytecode))
        return self.extender

    def close(self) -> None:
        if self.scheduler is not None:
            code = end_process(self.scheduler)
            self.point["check"]["exit_code"] = code
        if self.extender is not None:  # after kube-scheduler, which would fail its pods without it
            self.point["check"]["extender_exit_code"] = end_process(self.extender)
        if self.controllers is not None:
            self.controllers.stop()
        if self.plane is not None:
            self.plane.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


def run_e2e_point(setup: Setup, spec: PointSpec, *, config_path: str | None, qps: float = 5000,
                  burst: int = 5000, timeout: float = 900) -> dict[str, Any]:
    """One end-to-end point (``spec.scheduler`` on a fresh control plane); a point that cannot be measured
    carries ``error`` (one line) with what was measured before."""
    point = empty_point(setup, spec, config_path)
    started = time.monotonic()
    run = Run(setup, spec, config_path, qps, burst, started + timeout, point)
    try:
        run.plane = ControlPlane(run.workdir / "plane", extra_args=(f"--service-cluster-ip-range={SERVICE_RANGE}",))
        command = run.write_config(free_port())  # a configuration that cannot be made fails before anything starts
        run.plane.start()
        if setup.storage:
            run.controllers = start_volume_controller(run.plane, run.workdir)
        asyncio.run(measure(run, command))
    except ScorerError as error:
        point["error"] = str(error).splitlines()[0]
    except Exception as error:  # a point that breaks is reported; the sweep's other points still run
        point["error"] = f"{type(error).__name__}: {error}".splitlines()[0]
    finally:
        if point["error"] and run.scheduler is not None:
            point["check"]["log_tail"] = log_tail(run.log)
        if point["error"] and run.extender is not None:
            point["check"]["extender_log_tail"] = log_tail(run.extender_log)
        run.close()
        point["wall_s"] = round(time.monotonic() - started, 3)
    return point


def start_volume_controller(plane: ControlPlane, workdir: Path) -> ControllerManager:
    """kube-controller-manager with only the PersistentVolume binder (what completes the bindings the
    schedulers' VolumeBinding starts, as in a real cluster), on the admin's credentials."""
    binary = find_binary("kube-controller-manager")
    if binary is None:
        raise E2EError("this workload has volumes, whose binding needs kube-controller-manager v1.20.2's "
                       "PersistentVolume controller: run 'bash scripts/build-kube.sh' as root to build it")
    return ControllerManager(binary, plane.kubeconfig, workdir / "controller-manager").start()


async def measure(run: Run, command: list[str]) -> None:
    """Loads the cluster, starts the scheduler and fills the point with what the watch, /metrics and /proc say."""
    assert run.plane is not None
    point, deadline, port = run.point, run.deadline, run.port
    objects = setup_objects(run.setup)
    if run.spec.scheduler == "scorer" or run.spec.scheduler in EXTENDED:  # Python processes: compiled first
        await asyncio.to_thread(bytecode_cache)  # (warmed once per bench run, before the first such point)
    api = Api(run.plane.url)
    try:
        point["load_s"] = await load(api, objects, deadline)
        listing = await api.get_json("/api/v1/pods?limit=1", deadline)
        watch = BindWatch(api, objects.keys, listing["metadata"]["resourceVersion"])
        watch_task = asyncio.create_task(watch.run(deadline), name="bind-watch")
        await wait_established(watch, watch_task, deadline)
        events_listing = await api.get_json("/api/v1/events?limit=1", deadline)
        events = ScheduledEventWatch(api, objects.keys, events_listing["metadata"]["resourceVersion"])
        events_task = asyncio.create_task(events.run(deadline), name="event-watch")
        await wait_established(events, events_task, deadline)
        etcd, apiserver = run.plane.processes
        pids = {"kube_apiserver": apiserver.pid, "etcd": etcd.pid, "harness": os.getpid()}
        if run.controllers is not None and run.controllers.process is not None:
            pids["kube_controller_manager"] = run.controllers.process.pid
        extender_peak: dict[str, int] = {}
        pollers: list[asyncio.Task[Any]] = []
        if run.extender_command is not None:  # the extender ready (scorer: its caches synced) before kube-scheduler
            extender = run.start_extender()
            pollers.append(asyncio.create_task(poll_rss(extender, extender_peak), name="extender-rss-poll"))
            await wait_extender_ready(api, run, deadline)
            pids["extender"] = extender.pid
        cpu_before = cpu_snapshot(pids)
        t0 = time.monotonic()
        proc = run.start_scheduler(command)
        peak: dict[str, int] = {}
        pollers.append(asyncio.create_task(poll_rss(proc, peak), name="rss-poll"))
        first_bind_cpu = asyncio.create_task(cpu_at_first_bind(watch, proc.pid), name="first-bind-cpu")
        pollers.append(first_bind_cpu)
        watch.last_bind = t0
        outcome = await wait_bound(watch, watch_task, proc, deadline, run.extender)
        if outcome in ("complete", "stalled"):  # (a scheduler that exited writes no more)
            await wait_scheduled_events(events, events_task, watch, deadline)
        point["cpu_seconds"] = cpu_split(cpu_before, cpu_snapshot({**pids, "scheduler": proc.pid}),
                                         time.monotonic() - t0)
        record_binds(point, watch, t0, outcome)
        record_events(point, events, watch, events_task)
        at_first_bind = first_bind_cpu.result() if first_bind_cpu.done() else None
        if proc.poll() is None:
            text = await record_metrics(point, api, port, len(watch.bound), deadline + 10)
            point["cpu_per_pod"] = cpu_per_pod(point["cpu_seconds"], at_first_bind, len(watch.bound), text)
            peak["VmHWM"] = max(peak.get("VmHWM", 0), proc_status(proc.pid).get("VmHWM", 0))
        else:
            point["error"] = f"{run.spec.scheduler} exited with {proc.returncode}: {log_tail(run.log)}"
        point["memory"]["peak_rss_mb"] = round(peak["VmHWM"] / 1024, 1) if peak.get("VmHWM") else None
        if run.extender is not None:
            await record_extender(point, api, run, extender_peak)
        for poller in pollers:
            poller.cancel()
        watch_task.cancel()
        events_task.cancel()
        await watch.stop()
        await asyncio.gather(watch_task, events_task, *pollers, return_exceptions=True)
        add_warnings(point)
    finally:
        await api.close()


async def load(api: Api, objects: Objects, deadline: float) -> dict[str, float]:
    """Creates the objects phase by phase; returns the seconds each phase took (not part of any figure)."""
    seconds = {}
    for phase in ("first", "workloads", "storage", "claims", "nodes", "init", "measured"):
        requests = getattr(objects, phase)
        if requests:
            seconds[phase] = round(await api.create_all(requests, deadline), 2)
        if phase == "first":  # (a pod naming a PriorityClass its admission does not know yet is refused)
            await api.wait_admitted([r.body["metadata"]["name"] for r in requests
                                     if r.body.get("kind") == "PriorityClass"], deadline)
        if phase == "claims" and any(r.body.get("kind") == "PersistentVolume" for r in objects.storage):
            started = time.monotonic()
            await wait_volumes_synced(api, deadline)
            seconds["volumes_synced"] = round(time.monotonic() - started, 2)
    return seconds


async def wait_volumes_synced(api: Api, deadline: float) -> None:
    """Waits (at most ``VOLUMES_SYNC_SECONDS``) until the PersistentVolume controller has given every new
    PersistentVolume its phase (VolumeBinding matches only Available volumes, in scorer and in
    kube-scheduler alike) and bound every claim pre-bound to a volume (``spec.volumeName``)."""
    until = min(deadline, time.monotonic() + VOLUMES_SYNC_SECONDS)
    while True:
        volumes = await api.get_json("/api/v1/persistentvolumes", deadline)
        claims = await api.get_json("/api/v1/persistentvolumeclaims", deadline)
        pending = [f"PersistentVolume {item['metadata']['name']}" for item in volumes.get("items") or ()
                   if (item.get("status") or {}).get("phase", "Pending") == "Pending"]
        pending += [f"PersistentVolumeClaim {item['metadata']['namespace']}/{item['metadata']['name']}"
                    for item in claims.get("items") or ()
                    if (item.get("spec") or {}).get("volumeName")
                    and (item.get("status") or {}).get("phase") != "Bound"]
        if not pending:
            return
        if time.monotonic() >= until:
            raise E2EError(f"{len(pending)} volume(s) or pre-bound claim(s) still Pending after "
                           f"{VOLUMES_SYNC_SECONDS:.0f} s (is kube-controller-manager's PersistentVolume controller "
                           f"running?), e.g. {pending[0]}")
        await asyncio.sleep(0.5)


async def wait_established(watch: BindWatch | ScheduledEventWatch, watch_task: asyncio.Task[None],
                           deadline: float) -> None:
    established = asyncio.create_task(watch.established.wait())
    await asyncio.wait({watch_task, established}, timeout=max(0.1, min(WATCH_READY_SECONDS,
                                                                         deadline - time.monotonic())),
                       return_when=asyncio.FIRST_COMPLETED)
    if not watch.established.is_set():
        established.cancel()
        if watch_task.done():
            watch_task.result()  # raises what stopped it
        watch_task.cancel()
        raise E2EError(f"the {watch.what} watch was not established within {WATCH_READY_SECONDS:.0f} s")


async def wait_extender_ready(api: Api, run: Run, deadline: float) -> None:
    """Waits (at most ``EXTENDER_READY_SECONDS``) for the extender's /readyz to answer 200 (scorer's: its caches
    synced)."""
    assert run.extender is not None
    limit = max(0.0, min(EXTENDER_READY_SECONDS, deadline - time.monotonic()))
    until = time.monotonic() + limit
    while await api.status(run.extender_port, "/readyz") != 200:
        if run.extender.poll() is not None:
            raise E2EError(f"{run.extender_name} exited with {run.extender.returncode} before it was ready: "
                           f"{log_tail(run.extender_log)}")
        if time.monotonic() >= until:
            raise E2EError(f"{run.extender_name} was not ready within {limit:.0f} s: {log_tail(run.extender_log)}")
        await asyncio.sleep(0.2)


async def wait_bound(watch: BindWatch, watch_task: asyncio.Task[None], proc: subprocess.Popen[bytes],
                     deadline: float, extender: subprocess.Popen[bytes] | None = None) -> str:
    """Waits until every measured pod is bound; returns "complete", "stalled", "exited" (the scheduler or
    its extender) or "deadline"."""
    while True:
        if watch.complete.is_set():
            return "complete"
        if watch_task.done():
            watch_task.result()  # a watch error ends the run with its message
            return "deadline"
        if proc.poll() is not None or (extender is not None and extender.poll() is not None):
            return "exited"
        now = time.monotonic()
        if now >= deadline:
            return "deadline"
        if now - watch.last_bind >= (STALL_SECONDS if watch.bound else FIRST_BIND_SECONDS):
            return "stalled"
        try:  # the binds are stamped by the watch: how often this loop looks changes no figure
            await asyncio.wait_for(watch.complete.wait(), timeout=min(0.5, deadline - now))
        except TimeoutError:
            pass


async def wait_scheduled_events(events: ScheduledEventWatch, events_task: asyncio.Task[None], watch: BindWatch,
                                deadline: float) -> None:
    """Waits (at most ``EVENTS_SECONDS``) until every bound pod has its ``Scheduled`` Event: the CPU figures
    count a scheduler's work until the Events of its bindings are written, whether it writes them beside
    the bindings or after them."""
    events.wait_for(watch.bound)
    limit = max(0.0, min(EVENTS_SECONDS, deadline - time.monotonic()))
    if events.complete.is_set() or events_task.done() or limit <= 0:
        return
    complete = asyncio.create_task(events.complete.wait())
    await asyncio.wait({events_task, complete}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    complete.cancel()


def record_events(point: dict[str, Any], events: ScheduledEventWatch, watch: BindWatch,
                  events_task: asyncio.Task[None] | None = None) -> None:
    """``events``: how many bound pods had their ``Scheduled`` Event when the CPU was read, and how long
    after the last bind the last of them came; a warning when some had none (and why the watch ended)."""
    times = [events.seen[key] for key in watch.bound if key in events.seen]
    point["events"] = {"scheduled": len(times), "bound": len(watch.bound),
                       "last_after_last_bind_s": round(max(times) - watch.last_bind, 3) if times else None}
    missing = len(watch.bound) - len(times)
    if missing:
        point["warnings"].append(f"{missing} of {len(watch.bound)} bound pods had no Scheduled Event within "
                                 f"{EVENTS_SECONDS:.0f} s after the last bind: the CPU was read without them")
    if events_task is not None and events_task.done() and not events_task.cancelled() and events_task.exception():
        point["warnings"].append(f"the Event watch ended: {events_task.exception()}")


def record_binds(point: dict[str, Any], watch: BindWatch, t0: float, outcome: str) -> None:
    times = sorted(t for t, _ in watch.bound.values())
    point["bound"] = len(times)
    point["unscheduled"] = point["pods"] - len(times)
    point["throughput"] = throughput(times, t0)
    point["check"].update({"bound": len(times), "outcome": outcome, "rebinds": watch.rebinds,
                           "victims_removed": watch.victims,
                           "nodes_used": len({node for _, node in watch.bound.values()})})
    if outcome == "stalled":
        point["warnings"].append(f"no pod bound for {STALL_SECONDS if times else FIRST_BIND_SECONDS:.0f} s: "
                                 f"{point['unscheduled']} left unscheduled")
    elif outcome == "deadline":
        point["error"] = f"deadline reached with {len(times)} of {point['pods']} pods bound"


async def cpu_at_first_bind(watch: BindWatch, pid: int) -> float:
    """The scheduler's CPU seconds when the watch shows its first bind (start-up and initial LISTs done)."""
    await watch.first_bound.wait()
    return cpu_seconds(pid)


async def record_metrics(point: dict[str, Any], api: Api, port: int, bound: int, deadline: float) -> str | None:
    """Fills the point's cycle and extension-point figures from the scheduler's /metrics; returns its text."""
    text = await scrape(api, port, bound, deadline)
    if text is None:
        point["warnings"].append("the scheduler's /metrics did not answer")
        return None
    point["cycle_ms"] = cycle_ms(text)
    point["attempt_ms"] = summary_ms(text, ATTEMPT)
    point["extension_points_ms"] = extension_points_ms(text)
    point["plugins_ms"] = plugins_ms(text)
    point["startup_s"] = startup_s(text)
    return text


async def record_extender(point: dict[str, Any], api: Api, run: Run, peak: dict[str, int]) -> None:
    """The extender's side of an EXTENDED point: its request counts and latency from its /metrics, its peak RSS."""
    assert run.extender is not None
    figures = point["extender"]
    if run.extender.poll() is not None:
        point["error"] = point["error"] or (f"{run.extender_name} exited with {run.extender.returncode}: "
                                            f"{log_tail(run.extender_log)}")
        return
    text = await api.metrics(run.extender_port)
    if text is None:
        point["warnings"].append(f"the /metrics of {run.extender_name} did not answer")
    else:
        figures.update(extender_figures(text))
    hwm = max(peak.get("VmHWM", 0), proc_status(run.extender.pid).get("VmHWM", 0))
    figures["peak_rss_mb"] = round(hwm / 1024, 1) if hwm else None


def add_warnings(point: dict[str, Any]) -> None:
    cpu = point.get("cpu_seconds") or {}
    if cpu.get("wall") and cpu.get("other", 0) > 0.25 * cpu["wall"]:
        point["warnings"].append(f"other work used {cpu['other']} CPU seconds of the {cpu['wall']} s measured: "
                                 "the figures are noisy")
