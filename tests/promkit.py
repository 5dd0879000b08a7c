"""Test kit for running tests against a REAL Prometheus server.

Three pieces, all listening on 127.0.0.1 only and all stoppable (and context managers):

* :class:`Exporter` - a per-node metrics endpoint built with ``prometheus_client`` whose gauges and
  counters a test sets directly (thread-safe).
* :class:`PrometheusServer` - the real ``prometheus`` binary in a subprocess, scraping given targets,
  restartable on the same port and data dir.
* :class:`DelayProxy` - an HTTP proxy in front of any upstream (usually Prometheus) that delays each
  request by a settable amount, to test timeouts.

Every wait in here is bounded both in time and in number of iterations.
The fixtures that use this (``prometheus_bin``, ``exporter``, ``prometheus``) live in ``conftest.py``.
"""

from __future__ import annotations

import atexit
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

LOCALHOST = "127.0.0.1"

INSTALL_HINT = "run `bash scripts/test.sh` as root, or `apt-get install prometheus` (Debian)"


# --------------------------------------------------------------------------------------------------
# small helpers


def prometheus_binary() -> str:
    """Path of the ``prometheus`` binary: ``$SCORER_PROMETHEUS_BIN``, else ``prometheus`` on PATH.

    When there is none the calling test is skipped, or failed when ``CI=true`` (CI must not silently
    skip the tests that use a real server).
    """
    env = os.environ.get("SCORER_PROMETHEUS_BIN")
    if env:
        if os.path.isfile(env) and os.access(env, os.X_OK):
            return env
        problem = f"SCORER_PROMETHEUS_BIN={env!r} is not an executable file"
    else:
        found = shutil.which("prometheus")
        if found:
            return found
        problem = "no `prometheus` binary on PATH and SCORER_PROMETHEUS_BIN is unset"
    if os.environ.get("CI") == "true":
        pytest.fail(f"Prometheus is required under CI=true but {problem}: {INSTALL_HINT}", pytrace=False)
    pytest.skip(f"Prometheus not installed: {INSTALL_HINT}")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers that cannot bind port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOCALHOST, 0))
        return int(s.getsockname()[1])


def _series_key(labels: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in labels.items()))


def _family_name(name: str) -> str:
    return name[: -len("_total")] if name.endswith("_total") else name


# --------------------------------------------------------------------------------------------------
# Exporter


class _Counter:
    """A counter that grows linearly: value(t) = base + rate * (t - since)."""

    __slots__ = ("base", "rate", "since")

    def __init__(self, base: float, rate: float, since: float) -> None:
        self.base = base
        self.rate = rate
        self.since = since

    def value(self, now: float) -> float:
        return self.base + self.rate * max(0.0, now - self.since)


class _ExporterCollector(Collector):
    def __init__(self, exporter: Exporter) -> None:
        self._exporter = exporter

    def collect(self) -> Iterable[Metric]:
        return self._exporter._collect()


class Exporter:
    """A per-node test exporter: ``prometheus_client`` serving a custom collector on its own collector registry.

    Started on construction on 127.0.0.1 and an ephemeral port. Series of one metric name may have
    different label sets. Labels are published as given (use ``honor_labels`` in Prometheus to keep
    ``instance``/``job`` labels set here).
    """

    def __init__(self, *, help_text: str = "scorer test metric") -> None:
        self._help = help_text
        self._lock = threading.Lock()
        self._gauges: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self._counters: dict[str, dict[tuple[tuple[str, str], ...], _Counter]] = {}
        self._scrapes = 0
        self.collector_registry = CollectorRegistry(auto_describe=False)
        self.collector_registry.register(_ExporterCollector(self))
        # Port 0: the OS picks a free port, no race with other processes.
        self._server, self._thread = start_http_server(0, addr=LOCALHOST, registry=self.collector_registry)
        self.port: int = int(self._server.server_address[1])
        self._stopped = False

    # -- addresses
    @property
    def target(self) -> str:
        """``host:port`` as a Prometheus static target."""
        return f"{LOCALHOST}:{self.port}"

    @property
    def url(self) -> str:
        """URL of the metrics page."""
        return f"http://{self.target}/metrics"

    @property
    def scrapes(self) -> int:
        """How many times the metrics were collected (each scrape or fetch of the page)."""
        with self._lock:
            return self._scrapes

    # -- series
    def set_gauge(self, name: str, labels: Mapping[str, str], value: float) -> None:
        with self._lock:
            if name in self._counters or _family_name(name) in self._counters:
                raise ValueError(f"{name!r} is already a counter")
            self._gauges.setdefault(name, {})[_series_key(labels)] = float(value)

    def set_counter_rate(self, name: str, labels: Mapping[str, str], per_second: float) -> None:
        """A counter series growing by ``per_second`` from now on (its value so far is kept).

        ``name`` may be given with or without ``_total``; the series is exposed as ``<name>_total``
        of a counter family ``<name>``, so ``rate(<name>_total[...])`` works in PromQL.
        """
        if per_second < 0:
            raise ValueError("a counter cannot decrease")
        family = _family_name(name)
        now = time.monotonic()
        with self._lock:
            if family in self._gauges or f"{family}_total" in self._gauges:
                raise ValueError(f"{name!r} is already a gauge")
            series = self._counters.setdefault(family, {})
            key = _series_key(labels)
            old = series.get(key)
            base = old.value(now) if old is not None else 0.0
            series[key] = _Counter(base, float(per_second), now)

    def remove(self, name: str, labels: Mapping[str, str]) -> None:
        """Remove one series (gauge or counter; a no-op if absent)."""
        key = _series_key(labels)
        with self._lock:
            for store, metric in ((self._gauges, name), (self._counters, _family_name(name))):
                series = store.get(metric)
                if series is not None:
                    series.pop(key, None)
                    if not series:
                        del store[metric]

    def clear(self) -> None:
        """Remove every series."""
        with self._lock:
            self._gauges.clear()
            self._counters.clear()

    def _collect(self) -> Iterator[Metric]:
        now = time.monotonic()
        with self._lock:
            self._scrapes += 1
            gauges = {n: dict(s) for n, s in self._gauges.items()}
            counters = {n: {k: c.value(now) for k, c in s.items()} for n, s in self._counters.items()}
        for name, series in sorted(gauges.items()):
            metric = Metric(name, self._help, "gauge")
            for key, value in series.items():
                metric.add_sample(name, dict(key), value)
            yield metric
        for family, series in sorted(counters.items()):
            metric = Metric(family, self._help, "counter")
            for key, value in series.items():
                metric.add_sample(f"{family}_total", dict(key), value)
            yield metric

    # -- lifecycle
    def stop(self) -> None:
        """Stop serving (idempotent). Prometheus then sees the target down."""
        if self._stopped:
            return
        self._stopped = True
        _shutdown_socketserver(self._server, self._thread, self.port)

    def __enter__(self) -> Exporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _shutdown_socketserver(server: Any, thread: threading.Thread, port: int) -> None:
    """``server.shutdown()`` + ``server_close()``, without waiting out the 0.5 s poll interval.

    ``serve_forever`` only notices the shutdown request when its select() returns, so we poke the
    listening socket with empty connections until it has stopped (bounded).
    """
    stopper = threading.Thread(target=server.shutdown, name="promkit-shutdown", daemon=True)
    stopper.start()
    for _ in range(40):  # at most ~2 s, usually one poke
        stopper.join(0.02)
        if not stopper.is_alive():
            break
        try:
            with socket.create_connection((LOCALHOST, port), timeout=0.2):
                pass
        except OSError:
            pass
    stopper.join(5)
    server.server_close()
    thread.join(5)


# --------------------------------------------------------------------------------------------------
# Prometheus


_LIVE_PROCESSES: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    """Safety net: no prometheus outlives the test run, even if a test forgot stop()."""
    for proc in list(_LIVE_PROCESSES):
        if proc.poll() is None:
            proc.kill()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


class PrometheusError(RuntimeError):
    """Prometheus could not start, or a query failed."""


class PrometheusServer:
    """The real ``prometheus`` binary, scraping ``targets`` as job ``exporter``.

    Files in ``data_dir``: ``prometheus.yml`` (config), ``prometheus.log`` (its log, appended across
    restarts) and the TSDB itself (``--storage.tsdb.path=data_dir``), so a restart keeps the data.

    ``honor_labels=True`` (the default, written explicitly into the config) keeps the labels the
    exporter publishes - ``instance``, ``job``, ``node``... - as they are; with False, Prometheus
    would overwrite ``instance``/``job`` with the target's and rename the exporter's to
    ``exported_instance``/``exported_job``.

    Started on construction unless ``autostart=False``; ``stop()`` then ``start()`` restarts it on
    the same port and data dir.
    """

    def __init__(
        self,
        binary: str,
        targets: Sequence[str],
        scrape_interval: str = "1s",
        *,
        data_dir: Path,
        port: int | None = None,
        honor_labels: bool = True,
        extra_args: Sequence[str] = (),
        ready_timeout: float = 30.0,
        autostart: bool = True,
    ) -> None:
        self.binary = binary
        self.targets = list(targets)
        self.scrape_interval = scrape_interval
        self.data_dir = Path(data_dir)
        self.honor_labels = honor_labels
        self.extra_args = tuple(extra_args)
        self.ready_timeout = ready_timeout
        self._port_given = port is not None
        self.port: int = port if port is not None else free_port()
        self.config_file = self.data_dir / "prometheus.yml"
        self.log_file = self.data_dir / "prometheus.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None  # how long the last start() took until /-/ready
        if autostart:
            self.start()

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self.running and self._proc is not None else None

    def _write_config(self) -> None:
        # JSON strings are valid YAML scalars: no quoting issues.
        targets = ", ".join(json.dumps(t) for t in self.targets)
        interval = json.dumps(self.scrape_interval)
        self.config_file.write_text(
            "global:\n"
            f"  scrape_interval: {interval}\n"
            f"  evaluation_interval: {interval}\n"
            "scrape_configs:\n"
            "  - job_name: exporter\n"
            f"    honor_labels: {'true' if self.honor_labels else 'false'}\n"
            "    static_configs:\n"
            f"      - targets: [{targets}]\n"
        )

    def _command(self) -> list[str]:
        return [
            self.binary,
            f"--config.file={self.config_file}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address={LOCALHOST}:{self.port}",
            "--web.enable-lifecycle",
            "--log.level=info",
            *self.extra_args,
        ]

    def start(self) -> None:
        """Start (or restart, same port and data dir) and wait for ``/-/ready``."""
        if self.running:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        # A port picked by free_port() may be taken by someone else meanwhile: retry with another
        # one, but only on the first start (restarts must keep the port).
        attempts = 1 if self._port_given or self.start_seconds is not None else 3
        for attempt in range(attempts):
            try:
                self._start_once()
                return
            except PrometheusError as exc:
                if attempt + 1 < attempts and "address already in use" in str(exc):
                    self.port = free_port()
                    continue
                raise

    def _port_in_use(self) -> bool:
        try:
            with socket.create_connection((LOCALHOST, self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def _start_once(self) -> None:
        t0 = time.monotonic()
        # Otherwise /-/ready could be answered by whoever holds the port while ours fails to bind.
        if self._port_in_use():
            raise PrometheusError(f"cannot start prometheus: {LOCALHOST}:{self.port} address already in use")
        with open(self.log_file, "ab") as log:
            log.write(f"\n==== promkit: starting {' '.join(self._command())}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                self._command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.data_dir,
            )
        _LIVE_PROCESSES.add(self._proc)
        deadline = t0 + self.ready_timeout
        for _ in range(int(self.ready_timeout / 0.02) + 10):
            if self._proc.poll() is not None:
                code = self._proc.returncode
                _LIVE_PROCESSES.discard(self._proc)
                self._proc = None
                raise PrometheusError(f"prometheus exited with {code} before ready:\n{self.log_tail()}")
            status = self._get_status("/-/ready", timeout=1.0)
            if status == 200 and self._proc.poll() is None:
                self.start_seconds = time.monotonic() - t0
                return
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self._kill()
        raise PrometheusError(
            f"prometheus not ready at {self.url} within {self.ready_timeout:.0f}s:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, wait up to ``timeout``, then SIGKILL (idempotent)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        _LIVE_PROCESSES.discard(proc)
        self._proc = None

    def _kill(self) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait(10)
            _LIVE_PROCESSES.discard(self._proc)
        self._proc = None

    def __enter__(self) -> PrometheusServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError as exc:
            return f"(no log: {exc})"
        return "\n".join(text.splitlines()[-lines:])

    # -- HTTP
    def _get_status(self, path: str, timeout: float) -> int | None:
        try:
            with urllib.request.urlopen(self.url + path, timeout=timeout) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (OSError, http.client.HTTPException):
            return None

    def _get_json(self, path: str, params: Mapping[str, str] | None = None, timeout: float = 10.0) -> Any:
        url = self.url + path + ("?" + urllib.parse.urlencode(params) if params else "")
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                body = json.loads(resp.read())
        except urllib.error.HTTPError as exc:  # 400/422/503: the body says why
            detail = exc.read().decode(errors="replace")
            raise PrometheusError(f"GET {path} {dict(params or {})} -> {exc.code}: {detail}") from None
        if body.get("status") != "success":
            raise PrometheusError(f"GET {path} {dict(params or {})} -> {body}")
        return body["data"]

    def query(self, promql: str, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Instant query through ``/api/v1/query``: the result list (vector: one dict per series)."""
        data = self._get_json("/api/v1/query", {"query": promql}, timeout=timeout)
        if data.get("resultType") not in ("vector", "matrix"):
            raise PrometheusError(f"{promql!r} gives a {data.get('resultType')}, not an instant vector")
        return list(data["result"])

    def wait_for_series(
        self, query: str, count: int = 1, timeout: float = 20.0, interval: float = 0.1
    ) -> list[dict[str, Any]]:
        """Poll ``/api/v1/query`` until ``query`` returns at least ``count`` series; return them.

        Connection errors (e.g. while restarting) are retried; a bad query fails at once.
        Each poll counts in :meth:`query_api_calls`.
        """
        deadline = time.monotonic() + timeout
        last: Any = None
        for _ in range(int(timeout / interval) + 2):
            try:
                result = self.query(query, timeout=max(0.5, min(5.0, deadline - time.monotonic())))
            except PrometheusError as exc:
                if "bad_data" in str(exc) or "not an instant vector" in str(exc):
                    raise
                last = exc
            except (OSError, http.client.HTTPException, ValueError) as exc:
                last = exc
            else:
                if len(result) >= count:
                    return result
                last = result
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
        raise TimeoutError(
            f"{query!r}: wanted >= {count} series within {timeout}s, last got {last!r}; "
            f"targets: {self.targets_summary()}"
        )

    def targets_health(self) -> list[dict[str, Any]]:
        """``/api/v1/targets`` active targets (does not count as a query)."""
        return list(self._get_json("/api/v1/targets", {"state": "active"})["activeTargets"])

    def targets_summary(self) -> str:
        """Each active target's scrape URL, health and last error, for failure messages."""
        try:
            return repr([(t["scrapeUrl"], t["health"], t.get("lastError", "")) for t in self.targets_health()])
        except Exception as exc:  # only for an error message
            return f"(unavailable: {exc})"

    def wait_for_scrape(self, timeout: float = 20.0, interval: float = 0.1) -> None:
        """Wait until every target has been scraped successfully once (uses /api/v1/targets, so it
        does not count in :meth:`query_api_calls`). Prometheus 2.42 takes ~5 s after start for this:
        its scrape manager applies discovered targets on a fixed 5 s tick."""
        deadline = time.monotonic() + timeout
        last: Any = None
        for _ in range(int(timeout / interval) + 2):
            try:
                active = self.targets_health()
                last = [(t["scrapeUrl"], t["health"], t.get("lastError", "")) for t in active]
                up = {t["scrapeUrl"] for t in active if t["health"] == "up"}
                if len(active) >= len(self.targets) and len(up) >= len(set(self.targets)):
                    return
            except (PrometheusError, OSError, http.client.HTTPException, ValueError) as exc:
                last = exc
            if time.monotonic() >= deadline:
                break
            time.sleep(interval)
        raise TimeoutError(f"targets {self.targets} not all scraped within {timeout}s: {last!r}")

    def query_api_calls(self) -> int:
        """How many ``/api/v1/query`` requests this Prometheus has served (all status codes), from
        its own ``/metrics`` (reading which is not a query). Resets when the process restarts."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=10) as resp:
            text = resp.read().decode()
        total = 0.0
        for family in text_string_to_metric_families(text):
            if family.name != "prometheus_http_requests":
                continue
            for sample in family.samples:
                if sample.name == "prometheus_http_requests_total" and sample.labels.get("handler") == "/api/v1/query":
                    total += sample.value
        return int(total)


# --------------------------------------------------------------------------------------------------
# DelayProxy

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
}


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True
    proxy: DelayProxy

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that gave up (timeouts) close their socket: nothing to report.
        pass


class _ProxyHandler(BaseHTTPRequestHandler):
    server: _ProxyServer
    protocol_version = "HTTP/1.0"  # one request per connection: no idle keep-alive threads

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._forward()

    def do_POST(self) -> None:
        self._forward()

    def _forward(self) -> None:
        proxy = self.server.proxy
        proxy._count()
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length > 0 else None
        delay = proxy.delay
        if delay > 0 and proxy._stopping.wait(delay):
            return  # stopping: drop the request
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        upstream = urllib.parse.urlsplit(proxy.upstream_url)
        path = upstream.path.rstrip("/") + self.path
        try:
            conn = http.client.HTTPConnection(upstream.hostname or LOCALHOST, upstream.port or 80, timeout=30)
            try:
                conn.request(self.command, path, body=body, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                status, reason, resp_headers = resp.status, resp.reason, resp.getheaders()
            finally:
                conn.close()
        except (OSError, http.client.HTTPException) as exc:
            self._reply(502, "Bad Gateway", [("Content-Type", "text/plain")], f"upstream error: {exc}\n".encode())
            return
        self._reply(status, reason, [(k, v) for k, v in resp_headers if k.lower() not in _HOP_BY_HOP], data)

    def _reply(self, status: int, reason: str, headers: list[tuple[str, str]], data: bytes) -> None:
        try:
            self.send_response(status, reason)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client went away (e.g. timed out)


class DelayProxy:
    """HTTP proxy on 127.0.0.1 forwarding GET/POST to ``upstream_url`` after sleeping ``delay``.

    ``delay`` can be changed at any time (thread-safe); ``requests`` counts requests received
    (including ones that the client gave up on). Requests still sleeping when ``stop()`` is called
    are dropped at once.
    """

    def __init__(self, upstream_url: str, delay_seconds: float = 0.0) -> None:
        self.upstream_url = upstream_url.rstrip("/")
        self._lock = threading.Lock()
        self._delay = float(delay_seconds)
        self._requests = 0
        self._stopping = threading.Event()
        self._server = _ProxyServer((LOCALHOST, 0), _ProxyHandler)
        self._server.proxy = self
        self.port: int = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="promkit-proxy", daemon=True
        )
        self._thread.start()
        self._stopped = False

    @property
    def url(self) -> str:
        return f"http://{LOCALHOST}:{self.port}"

    @property
    def delay(self) -> float:
        with self._lock:
            return self._delay

    @delay.setter
    def delay(self, seconds: float) -> None:
        with self._lock:
            self._delay = float(seconds)

    @property
    def requests(self) -> int:
        with self._lock:
            return self._requests

    def _count(self) -> None:
        with self._lock:
            self._requests += 1

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._stopping.set()
        self._server.shutdown()  # poll_interval 0.05: returns quickly
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> DelayProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
