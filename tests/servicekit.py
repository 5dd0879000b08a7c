"""Helpers of the service tests against the real API server: objects, and `scorer run` as a process.

``Cluster`` creates and reads objects through a ``kubekit.ControlPlane`` (threads of
bounded urllib requests: creating 1,000 pods takes a few seconds). ``ScorerProcess`` runs
``python -m scorer run`` with a config and a kubeconfig, logs to a file, and reads its
HTTP endpoints; every wait is bounded and says what it waited for when it gives up.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from faultproxy import Fault, FaultProxy
from kubekit import ControlPlane, free_port
from prometheus_client.parser import text_string_to_metric_families


def node_manifest(name: str, *, cpu: str = "4", memory: str = "16Gi", pods: int = 110,
                  labels: dict[str, str] | None = None) -> dict[str, Any]:
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "status": {"capacity": alloc, "allocatable": alloc,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod_manifest(name: str, *, scheduler: str, namespace: str = "default", cpu: str = "100m",
                 memory: str = "64Mi", labels: dict[str, str] | None = None,
                 spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"schedulerName": scheduler,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                                     "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
                     **(spec or {})}}


class Cluster:
    """Objects of a control plane, through bounded requests."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane

    def call(self, method: str, path: str, body: Any = None, *, ok: Iterable[int] = (200, 201)) -> Any:
        status, data = self.plane.request(method, path, None if body is None else json.dumps(body).encode())
        if status not in tuple(ok):
            raise AssertionError(f"{method} {path}: HTTP {status}: {data[:300]!r}")
        return json.loads(data) if data else None

    def create_all(self, objects: list[dict[str, Any]], *, threads: int = 16) -> None:
        def create(obj: dict[str, Any]) -> None:
            if obj["kind"] == "Node":
                self.call("POST", "/api/v1/nodes", obj)
            else:
                self.call("POST", f"/api/v1/namespaces/{obj['metadata']['namespace']}/pods", obj)

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, objects))

    def create_priority_class(self, name: str, value: int) -> None:
        """Create PriorityClass ``name`` (kept if it exists) and wait until the API server's admission knows it:
        its Priority plugin reads PriorityClasses from an informer, so a pod naming a class created a moment ago
        can be refused (403 "no PriorityClass with name ... was found"). A dry-run pod says when it is not."""
        self.call("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                  {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                   "value": value}, ok=(200, 201, 409))
        probe = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "priority-probe"},
                            "spec": {"priorityClassName": name, "containers": [{"name": "c", "image": "probe"}]}})
        wait_until(lambda: self.plane.request("POST", "/api/v1/namespaces/default/pods?dryRun=All",
                                              probe.encode())[0] == 201,
                   30, f"PriorityClass {name} known to the API server's admission")

    def delete_all_nodes(self) -> None:
        self.call("DELETE", "/api/v1/nodes", ok=(200,))

    def delete_pods(self, namespace: str) -> None:
        self.call("DELETE", f"/api/v1/namespaces/{namespace}/pods?gracePeriodSeconds=0", ok=(200,))

    def ensure_namespace(self, name: str) -> None:
        self.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": name}}, ok=(201, 409))

    def pods(self, namespace: str) -> dict[str, dict[str, Any]]:
        return {item["metadata"]["name"]: item
                for item in self.call("GET", f"/api/v1/namespaces/{namespace}/pods")["items"]}

    def bound(self, namespace: str) -> dict[str, str]:
        """Pod name -> node name, for the pods of ``namespace`` that are bound."""
        return {name: pod["spec"]["nodeName"] for name, pod in self.pods(namespace).items()
                if pod["spec"].get("nodeName")}

    def events(self, namespace: str, pod: str) -> list[dict[str, Any]]:
        """The pod's Events, as events.k8s.io/v1 shows them (core v1 Events too: one store, two views)."""
        return [item for item in self.call("GET", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events")["items"]
                if (item.get("regarding") or {}).get("name") == pod]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def scheduler_config(path: Path, scheduler: str, *, leader_elect: bool = False, lease: str = "scorer",
                     namespace: str = "default", lease_duration: str = "4s", renew_deadline: str = "3s",
                     retry_period: str = "500ms", extra: dict[str, Any] | None = None) -> Path:
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "clientConnection": {"qps": 500, "burst": 1000},
              "leaderElection": {"leaderElect": leader_elect, "resourceName": lease,
                                 "resourceNamespace": namespace, "leaseDuration": lease_duration,
                                 "renewDeadline": renew_deadline, "retryPeriod": retry_period},
              "profiles": [{"schedulerName": scheduler}]}
    config.update(extra or {})
    path.write_text(yaml.safe_dump(config))
    return path


class ScorerProcess:
    """``python -m scorer run`` on a free 127.0.0.1 port; output in ``workdir/<name>.log``.

    ``scorer`` and ``env`` run another installation's instead (a virtual environment's ``scorer`` and
    its environment: ``venvkit.FreshVenv``)."""

    def __init__(self, workdir: Path, config: Path, kubeconfig: Path | str, *, name: str = "scorer",
                 extra_args: Iterable[str] = (), scorer: Sequence[str] = (sys.executable, "-m", "scorer"),
                 env: Mapping[str, str] | None = None) -> None:
        self.port = free_port()
        self.log_path = workdir / f"{name}.log"
        argv = [*scorer, "run", "--config", str(config), "--kubeconfig", str(kubeconfig),
                "--bind-address", "127.0.0.1", "--port", str(self.port), *extra_args]
        log = open(self.log_path, "wb")  # noqa: SIM115 - the process holds it
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"})
        log.close()

    def get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=timeout) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as error:
            return int(error.code), error.read().decode()

    def probe(self, path: str) -> int | None:
        """The status of ``path``, or None while nothing answers."""
        try:
            return self.get(path, timeout=2.0)[0]
        except (OSError, urllib.error.URLError):
            return None

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_until(lambda: self.exited() or self.probe("/readyz") == 200, timeout, f"/readyz of {self.log_path.name}")
        if self.exited():
            raise AssertionError(f"scorer exited with {self.proc.returncode}: {self.log()[-2000:]}")

    def metric(self, name: str, labels: dict[str, str] | None = None) -> float:
        """The sum of the /metrics samples of ``name`` whose labels include ``labels`` (0 when none)."""
        return sum(value for sample_labels, value in self.samples(name) if
                   (labels or {}).items() <= sample_labels.items())

    def samples(self, name: str) -> list[tuple[dict[str, str], float]]:
        _, text = self.get("/metrics")
        found = []
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name:
                    found.append((dict(sample.labels), float(sample.value)))
        return found

    def exited(self) -> bool:
        return self.proc.poll() is not None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float = 20.0) -> int:
        if not self.exited():
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        if not self.exited():
            self.proc.kill()
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        """Best-effort end (for fixtures): SIGTERM, then SIGKILL."""
        try:
            self.terminate(timeout=20)
        except subprocess.TimeoutExpired:
            self.kill()


class ThreadedFaultProxy:
    """A ``faultproxy.FaultProxy`` on an event loop of its own thread, for tests that wait synchronously
    on a ``scorer run`` process (the proxy keeps serving while they sleep). ``add``/``clear``/
    ``drop_streams`` run on the proxy's loop."""

    def __init__(self, upstream: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="fault-proxy", daemon=True)
        self.thread.start()
        self.proxy = FaultProxy(upstream)
        self._call(self.proxy.start())
        self.url = self.proxy.url

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def _sync(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        async def call() -> Any:
            return func(*args, **kwargs)
        return self._call(call())

    def add(self, **rule: Any) -> Fault:
        return self._sync(self.proxy.add, **rule)

    def clear(self) -> None:
        self._sync(self.proxy.clear)

    def drop_streams(self) -> int:
        return self._sync(self.proxy.drop_streams)

    def write_kubeconfig(self, path: Path) -> Path:
        return self.proxy.write_kubeconfig(path)

    def close(self) -> None:
        self._call(self.proxy.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key (``tls.crt``, ``tls.key`` in ``directory``), made
    with openssl; the calling test is skipped when openssl is not installed."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed: cannot make a test certificate")
    cert, key = directory / "tls.crt", directory / "tls.key"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    return cert, key
