"""Hostile clients against ``scorer run --extender-profile ... --no-scheduling`` and a real kube-apiserver.

The extender's HTTP endpoint is where anyone who reaches the Service can send anything. ``run_hostile``
(the test's driver, and ``python tests/test_fault_hostile.py``'s, which prints the figures) sends, after a
warm-up of the same traffic on a smaller scale:

* five prioritize requests of 1,000 node names of 50,000 characters (400: not node names), and valid
  large requests (10,000 new names, three times: answered, the names kept within their byte budget);
* eight concurrent requests announcing a 200 MB body: four send none, four stream it (413 from the
  Content-Length, nothing read), while the process' resident memory (``VmRSS``) is sampled; then eight
  concurrent bodies of 100 MB, under the limit (each read whole and refused, 400, or refused as soon as
  the bodies read at once pass 256 MiB, 503);
* 1,000 connections that send nothing, or a request cut off before its end (closed by the server
  after its HTTP timeout, 15 s);
* a 100 KB URL and a 100 KB header (400, one log line without a traceback), and pods of the wrong
  JSON types (``spec: "x"``, ``containers: {}``) reusing a valid pod's uid and resourceVersion (400).

Every wait is bounded; every answer is kept in the ``HostileReport`` the test reads.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import orjson
import pytest
from kubekit import ControlPlane
from servicekit import Cluster, ScorerProcess, node_manifest
from test_extender_kube import PROFILE, SCORER_CONFIG

from scorer.extender.http import MAX_BODIES_READING
from scorer.service.options import DEFAULT_HTTP_TIMEOUT

pytestmark = [pytest.mark.kube, pytest.mark.slow]

NODES = tuple(f"node-{i}" for i in range(20))
SNAPSHOT = ("apiVersion: scorer.dev/v1alpha1\nkind: MetricsSnapshot\nmetrics:\n"
            f"  cpu_utilization: {{{', '.join(f'{n}: 0.{10 + i}' for i, n in enumerate(NODES))}}}\n"
            f"  network_receive_bytes_per_second: {{{', '.join(f'{n}: 1.0e+5' for n in NODES)}}}\n")
CLOSE_MARGIN = 10.0  # seconds past the timeout the idle connections are given to be closed
ANNOUNCED = 200_000_000
LARGE = 100_000_000  # under the extender's 128 MiB limit
RSS_MARGIN_KB = 50 * 1024  # the bar: within 50 MB of the start, after the hostile requests
CHUNK = b"x" * (1 << 20)


def rss_kb(pid: int, field: str = "VmRSS") -> int:
    """A process' ``VmRSS`` (or ``VmHWM``, its peak) in kB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@contextmanager
def rss_peak(pid: int, samples: list[int]) -> Iterator[None]:
    """Samples ``pid``'s VmRSS every 20 ms into ``samples`` while the block runs (at most 10 minutes)."""
    stop = threading.Event()

    def sample() -> None:
        deadline = time.monotonic() + 600
        while not stop.is_set() and time.monotonic() < deadline:
            samples.append(rss_kb(pid))
            stop.wait(0.02)

    thread = threading.Thread(target=sample, name="rss-sampler", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=5)


def api_pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "7"},
            "spec": spec or {"containers": [{"name": "c", "resources": {"requests": {"cpu": "100m"}}}]}}


def post(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: scorer\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode() + body


def status_of(answer: bytes) -> int:
    line = answer.split(b"\r\n", 1)[0].split()
    return int(line[1]) if len(line) > 1 and line[1].isdigit() else 0


def error_of(answer: bytes) -> str:
    try:
        return str(orjson.loads(answer.partition(b"\r\n\r\n")[2]).get("Error", ""))
    except (orjson.JSONDecodeError, AttributeError):
        return answer.partition(b"\r\n\r\n")[2][:200].decode(errors="replace")


async def exchange(port: int, data: bytes, timeout: float = 60.0) -> bytes:
    """``data`` sent on a connection of its own; the answer, read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        async with asyncio.timeout(timeout):
            return await reader.read()
    finally:
        writer.close()


async def announce(port: int, path: str, *, stream: bool) -> bytes:
    """A request announcing ``ANNOUNCED`` bytes: none sent, or streamed in 1 MiB chunks until the answer
    arrives (or all are sent, or the server closes); the answer's head and body as far as it came within
    30 s (a server that waits for the body answers nothing)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (f"POST {path} HTTP/1.1\r\nHost: scorer\r\nContent-Type: application/json\r\n"
            f"Content-Length: {ANNOUNCED}\r\n\r\n").encode()

    async def send() -> None:
        writer.write(head)
        for _ in range(ANNOUNCED // len(CHUNK) if stream else 0):
            writer.write(CHUNK)
            await writer.drain()

    sender = asyncio.create_task(send())
    answer = b""
    try:
        async with asyncio.timeout(30):
            while b"\r\n\r\n" not in answer or len(answer.partition(b"\r\n\r\n")[2]) < _length(answer):
                chunk = await reader.read(65536)
                if not chunk:
                    break
                answer += chunk
        return answer
    except TimeoutError:
        return answer
    finally:
        sender.cancel()
        try:
            await sender
        except (asyncio.CancelledError, ConnectionError):
            pass
        writer.close()


async def stream_body(port: int, path: str, size: int) -> bytes:
    """A request whose body of ``size`` bytes (not JSON) is streamed in 1 MiB chunks; the answer (within 60 s)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        async with asyncio.timeout(60):
            writer.write((f"POST {path} HTTP/1.1\r\nHost: scorer\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {size}\r\nConnection: close\r\n\r\n").encode())
            try:
                for start in range(0, size, len(CHUNK)):
                    writer.write(CHUNK[:size - start])
                    await writer.drain()
            except ConnectionError:  # (refused before the end: the answer is there)
                pass
            return await reader.read()
    except (TimeoutError, ConnectionError):
        return b""
    finally:
        writer.close()


def _length(answer: bytes) -> int:
    for line in answer.partition(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 1 << 62


async def idle_connections(port: int, count: int, limit: float) -> list[float | None]:
    """``count`` connections, a third silent, a third with a request line cut off, a third with headers
    cut off; the seconds each took to be closed by the server (None: still open after ``limit``)."""
    partial = (b"", b"POST /scheduler/filter HT", b"POST /scheduler/filter HTTP/1.1\r\nHost: scorer\r\nContent-Le")
    opened = []
    for i in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(partial[i % 3])
        opened.append((reader, writer, time.monotonic()))

    async def closed(reader: asyncio.StreamReader, started: float) -> float | None:
        try:
            async with asyncio.timeout(max(limit - (time.monotonic() - started), 0.1)):
                while await reader.read(4096):
                    pass
            return time.monotonic() - started
        except TimeoutError:
            return None
        except ConnectionError:
            return time.monotonic() - started

    try:
        return await asyncio.gather(*(closed(reader, started) for reader, _, started in opened))
    finally:
        for _, writer, _ in opened:
            writer.close()


@attrs.define
class HostileReport:
    """What the hostile traffic got, and the process' resident memory (kB) around it."""

    rss_start: int = 0
    rss_after: int = 0
    rss_peak_announced: int = 0  # sampled during the eight 200 MB announcements
    long_names: list[tuple[int, str]] = attrs.Factory(list)
    valid: list[tuple[int, int]] = attrs.Factory(list)  # (status, hosts answered)
    announced: list[tuple[int, str]] = attrs.Factory(list)
    large: list[tuple[int, str]] = attrs.Factory(list)  # eight bodies of 100 MB at once, under the limit
    rss_peak_large: int = 0
    idle_closed: list[float | None] = attrs.Factory(list)
    long_lines: list[int] = attrs.Factory(list)
    bad_pods: list[tuple[int, str]] = attrs.Factory(list)

    def summary(self) -> str:
        closed = [t for t in self.idle_closed if t is not None]
        return (f"RSS: start {self.rss_start / 1024:.0f} MB, after {self.rss_after / 1024:.0f} MB, "
                f"peak under 8 x 200 MB announced {self.rss_peak_announced / 1024:.0f} MB, "
                f"under 8 x 100 MB sent {self.rss_peak_large / 1024:.0f} MB; "
                f"long names {sorted({s for s, _ in self.long_names})}, valid {self.valid}, "
                f"announced {sorted(s for s, _ in self.announced)}, large {sorted(s for s, _ in self.large)}, "
                f"idle closed {len(closed)}/{len(self.idle_closed)}"
                f"{f' in at most {max(closed):.1f}s' if closed else ''}, long URL/header {self.long_lines}, "
                f"bad pods {[s for s, _ in self.bad_pods]}")


async def hostile_round(port: int, pid: int, report: HostileReport | None, *, scale: int) -> None:
    """The hostile traffic (``scale`` 1: the issue's; warm-up: a tenth or less), its answers in ``report``."""
    prioritize, filter_ = "/scheduler/prioritize", "/scheduler/filter"
    long_names = [orjson.dumps({"Pod": api_pod("web"), "NodeNames": [f"n{r}-{j}-" + "n" * 49_990
                                                                      for j in range(1_000 // scale)]})
                  for r in range(5 if scale == 1 else 1)]
    for body in long_names:
        answer = await exchange(port, post(prioritize, body))
        if report is not None:
            report.long_names.append((status_of(answer), error_of(answer)))
    del long_names
    for batch in range(3 if scale == 1 else 1):
        names = [*NODES, *(f"new-{batch}-{i}.nodes.example.com" for i in range(10_000 // scale))]
        body = orjson.dumps({"Pod": api_pod("web"), "NodeNames": names})
        for path in (filter_, prioritize):
            answer = await exchange(port, post(path, body))
            parsed = orjson.loads(answer.partition(b"\r\n\r\n")[2]) if status_of(answer) == 200 else None
            hosts = len(parsed) if isinstance(parsed, list) else len((parsed or {}).get("NodeNames") or [])
            if report is not None:
                report.valid.append((status_of(answer), hosts))
    samples: list[int] = []
    with rss_peak(pid, samples):
        answers = await asyncio.gather(*(announce(port, (filter_, prioritize)[i % 2], stream=i >= 4)
                                         for i in range(8 if scale == 1 else 2)))
    if report is not None:
        report.announced = [(status_of(answer), error_of(answer)) for answer in answers]
        report.rss_peak_announced = max(samples, default=0)
    samples = []
    with rss_peak(pid, samples):
        answers = await asyncio.gather(*(stream_body(port, (filter_, prioritize)[i % 2], LARGE)
                                         for i in range(8 if scale == 1 else 2)))
    if report is not None:
        report.large = [(status_of(answer), error_of(answer)) for answer in answers]
        report.rss_peak_large = max(samples, default=0)
    idle = asyncio.create_task(idle_connections(port, 1_000 // scale, DEFAULT_HTTP_TIMEOUT + CLOSE_MARGIN))
    long_url = b"GET /" + b"u" * 100_000 + b" HTTP/1.1\r\nHost: scorer\r\n\r\n"
    long_header = b"GET /healthz HTTP/1.1\r\nHost: scorer\r\nX-Long: " + b"h" * 100_000 + b"\r\n\r\n"
    lines = [status_of(await exchange(port, request)) for request in (long_url, long_header)]
    pods = [api_pod("web"), {**api_pod("web"), "spec": "x"}, api_pod("web", containers={})]
    bad_pods = [await exchange(port, post(filter_, orjson.dumps({"Pod": pod, "NodeNames": list(NODES)})))
                for pod in pods]
    closed = await idle
    if report is not None:
        report.long_lines = lines
        report.bad_pods = [(status_of(answer), error_of(answer)) for answer in bad_pods]
        report.idle_closed = closed


def run_hostile(workdir: Path, plane: ControlPlane) -> tuple[HostileReport, ScorerProcess]:
    """Start the extender against ``plane``; warm up; send the hostile traffic; the report and the process
    (still running: the caller stops it)."""
    Cluster(plane).create_all([node_manifest(name) for name in NODES])
    (workdir / "scorer.yaml").write_text(SCORER_CONFIG)
    (workdir / "snapshot.yaml").write_text(SNAPSHOT)
    scorer = ScorerProcess(workdir, workdir / "scorer.yaml", plane.kubeconfig, name="scorer-hostile",
                           extra_args=("--extender-profile", PROFILE, "--no-scheduling",
                                       "--metrics", str(workdir / "snapshot.yaml")))
    try:
        scorer.wait_ready()
        pid = scorer.proc.pid
        report = HostileReport()
        asyncio.run(hostile_round(scorer.port, pid, None, scale=10))
        time.sleep(1.0)
        report.rss_start = rss_kb(pid)
        asyncio.run(hostile_round(scorer.port, pid, report, scale=1))
        time.sleep(1.0)
        report.rss_after = rss_kb(pid)
    except BaseException:
        scorer.stop()
        raise
    return report, scorer


def test_hostile_clients_get_their_answers_and_the_extender_keeps_its_memory(tmp_path: Path) -> None:
    with ControlPlane(tmp_path / "plane", audit=False) as plane:
        scorer = None
        try:
            report, scorer = run_hostile(tmp_path, plane)
            print(report.summary())
            assert not scorer.exited(), scorer.log()[-3000:]
            assert scorer.get("/healthz")[0] == 200
            # 1,000 names of 50,000 characters: 400 naming the field, the name shortened
            assert len(report.long_names) == 5
            for status, error in report.long_names:
                assert status == 400 and error.startswith("NodeNames[0]: ") and "must be no more than 253" in error
                assert len(error) < 300
            # valid large requests are answered: every name, in filter (all pass) and prioritize
            assert report.valid == [(200, len(NODES) + 10_000)] * 6, report.valid
            # 200 MB announced: 413 from the Content-Length, nothing read
            assert len(report.announced) == 8
            for status, error in report.announced:
                assert status == 413 and f"(Content-Length {ANNOUNCED})" in error, (status, error)
            # 100 MB bodies at once: read (not JSON: 400) until the bodies read at once pass 256 MiB (503)
            assert len(report.large) == 8
            for status, error in report.large:
                assert (status == 400 and "is not JSON" in error) or (status == 503 and error.startswith("busy:")), \
                    (status, error)
            # idle and cut-off connections: all closed by the server within the timeout (and a margin)
            assert len(report.idle_closed) == 1_000 and None not in report.idle_closed, report.summary()
            # a 100 KB URL or header: 400
            assert report.long_lines == [400, 400]
            # wrong JSON types: 400 with the field, though the uid and resourceVersion were seen valid
            assert [status for status, _ in report.bad_pods] == [200, 400, 400]
            assert "spec: expected an object, got string \"x\"" in report.bad_pods[1][1]
            assert "spec.containers: expected a list, got object" in report.bad_pods[2][1]
            # memory: back within 50 MB of the start; the 200 MB announcements never raised it by as much, the
            # 100 MB bodies by less than twice the bytes read at once (eight of them read whole: 1.6 GB)
            assert report.rss_after - report.rss_start < RSS_MARGIN_KB, report.summary()
            assert report.rss_peak_announced - report.rss_start < RSS_MARGIN_KB, report.summary()
            assert report.rss_peak_large - report.rss_start < 2 * MAX_BODIES_READING // 1024, report.summary()
            # the log: no traceback, no ERROR line; the malformed requests one WARNING line (per kind and 30 s)
            log = scorer.log()
            assert "Traceback" not in log and " ERROR " not in log, log[-3000:]
            assert log.count("scorer.http bad HTTP request from") <= 2, log[-3000:]
            assert scorer.metric("scorer_extender_requests_total", {"result": "error"}) == 0
        finally:
            if scorer is not None:
                scorer.stop()


def main() -> None:
    """The figures (``python tests/test_fault_hostile.py``), the assertions left to the test."""
    with tempfile.TemporaryDirectory() as workdir, ControlPlane(Path(workdir) / "plane", audit=False) as plane:
        report, scorer = run_hostile(Path(workdir), plane)
        try:
            print(report.summary())
            print("log tail:", scorer.log()[-1500:])
        finally:
            scorer.stop()


if __name__ == "__main__":
    main()
