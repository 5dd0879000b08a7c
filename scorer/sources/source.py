"""Metrics sources: a static snapshot, or a Prometheus query refreshed in the background.

A source never does I/O for a scheduling cycle. ``PrometheusSource.run``
refreshes on its own task: one instant query for all nodes every
``interval``, in a worker thread (prometheus-api-client is synchronous),
mapping each series to a node. Plugins read ``source.data``, an immutable
``SourceData`` swapped in whole after each refresh.

Failure rules (documented in the contrib plugins' READMEs):
* a failed refresh (timeout, connection, TLS, HTTP error, bad PromQL, bad
  response) keeps every value with its original sample time, records the
  error, and retries after a backoff (1 s doubling, at most ``interval``);
* an empty result is a failure of kind ``empty_result``: a query that
  returns nothing usually means a broken exporter or relabelling, not zero
  load, so the last values are kept;
* a node missing from a successful result keeps its last value and time;
* NaN or infinite values are dropped (the node has no new value).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

import attrs

from scorer.model import Node
from scorer.sources.data import ERROR_KINDS, SourceData
from scorer.sources.mapping import NodeIndex, NodeMapping
from scorer.tasks import Supervisor

log = logging.getLogger("scorer.sources")

COMBINE_MODES: tuple[str, ...] = ("sum", "max", "mean")
MAX_UNMATCHED_SHOWN = 10


class MetricsSource(Protocol):
    name: str

    @property
    def data(self) -> SourceData: ...

    def describe(self) -> str: ...


class StaticSource:
    """Fixed values (a metrics snapshot file): for simulate, explain, tests and the bench.

    Its "series" are the snapshot's node names; ``match_nodes`` records those
    that name no node of the cluster, as a Prometheus source records the
    series that map to no node (``SourceData.unmatched``).
    """

    def __init__(self, name: str, values: Mapping[str, float], sample_times: Mapping[str, float],
                 loaded_at: float, origin: str = "snapshot") -> None:
        self.name = name
        self.origin = origin
        self._data = SourceData(values=dict(values), sample_times=dict(sample_times), generation=1,
                                last_success=loaded_at, last_attempt=loaded_at, series=len(values))
        self._ages = {node: loaded_at - t for node, t in sample_times.items()}  # as the snapshot gives them

    def resample(self, now: float) -> None:
        """The same values sampled again at ``now``, each as old as the snapshot says (a snapshot read
        by a long-running scheduler stays as fresh as written instead of ageing since it was loaded)."""
        data = self._data
        self._data = attrs.evolve(data, sample_times={node: now - age for node, age in self._ages.items()},
                                  generation=data.generation + 1, last_success=now, last_attempt=now)

    @property
    def data(self) -> SourceData:
        return self._data

    def describe(self) -> str:
        return f"metric {self.name!r} of {self.origin}"

    def match_nodes(self, node_names: Collection[str]) -> None:
        """Record the snapshot's node names that are not in ``node_names`` (the values stay as they are)."""
        known = node_names if isinstance(node_names, (set, frozenset)) else set(node_names)
        unmatched = sorted(name for name in self._data.values if name not in known)
        self._data = attrs.evolve(self._data, unmatched=tuple(unmatched[:MAX_UNMATCHED_SHOWN]),
                                  unmatched_count=len(unmatched))


@attrs.frozen(slots=True)
class PrometheusSpec:
    """Everything that makes two plugins' queries the same source (it is the sharing key)."""

    url: str
    query: str
    mapping: NodeMapping = NodeMapping()
    combine: str = "sum"
    interval: float = 30.0
    timeout: float = 10.0
    ca_file: str = ""
    bearer_token_file: str = ""
    insecure_skip_verify: bool = False

    @property
    def promql(self) -> str:
        return self.mapping.wrap(self.query)


class FetchError(Exception):
    def __init__(self, kind: str, message: str) -> None:
        if kind not in ERROR_KINDS:  # the kind is a label value: a bounded set
            raise ValueError(f"unknown fetch error kind {kind!r}")
        super().__init__(message)
        self.kind = kind


def classify(exc: BaseException) -> FetchError:
    """A failure of prometheus-api-client / requests as one of ``ERROR_KINDS``."""
    if isinstance(exc, FetchError):
        return exc
    import requests
    import urllib3
    from prometheus_api_client.exceptions import PrometheusApiClientException

    if isinstance(exc, requests.exceptions.Timeout):
        return FetchError("timeout", f"no answer within the query timeout ({exc.__class__.__name__})")
    if isinstance(exc, requests.exceptions.SSLError):
        return FetchError("tls", f"TLS error: {_short(exc)}")
    if isinstance(exc, requests.exceptions.ConnectionError):
        # With retries off, urllib3 wraps a read timeout in MaxRetryError and requests
        # re-raises that as a ConnectionError: look at the underlying reason.
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        # (NewConnectionError subclasses ConnectTimeoutError in urllib3: a refusal is not a timeout.)
        if isinstance(reason, urllib3.exceptions.TimeoutError) and not isinstance(
                reason, urllib3.exceptions.NewConnectionError):
            return FetchError("timeout", f"no answer within the query timeout ({reason.__class__.__name__})")
        return FetchError("connection", f"cannot connect: {_short(exc)}")
    if isinstance(exc, PrometheusApiClientException):
        text = str(exc)
        match = re.search(r"HTTP Status Code (\d+)", text)
        status = int(match.group(1)) if match else 0
        detail = _prometheus_error(text)
        if status in (400, 422):
            return FetchError("bad_query", f"Prometheus rejected the query (HTTP {status}): {detail}")
        if status in (401, 403):
            return FetchError("auth", f"not authorized (HTTP {status}): {detail}")
        return FetchError("http", f"HTTP {status or '?'}: {detail}")
    if isinstance(exc, requests.exceptions.RequestException):
        return FetchError("connection", f"request failed: {_short(exc)}")
    if isinstance(exc, (ValueError, KeyError, TypeError)):
        return FetchError("bad_response", f"unexpected response: {_short(exc)}")
    return FetchError("http", f"{exc.__class__.__name__}: {_short(exc)}")


def _short(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _prometheus_error(text: str) -> str:
    """The ``error`` field of Prometheus' JSON error body inside the client's message."""
    match = re.search(r"\((b?)(['\"])(.*)\2\)\s*$", text, re.S)
    if match:
        body = match.group(3)
        try:
            decoded = json.loads(body.encode().decode("unicode_escape")) if body.startswith("{") else None
        except (ValueError, UnicodeDecodeError):
            decoded = None
        if isinstance(decoded, dict) and decoded.get("error"):
            return str(decoded["error"])[:300]
        return body[:300]
    return text[:300]


def parse_vector(result: Any, mapping: NodeMapping, index: NodeIndex, combine: str
                 ) -> tuple[dict[str, float], dict[str, float], int, list[str]]:
    """An instant-vector result -> (values, sample_times, series, unmatched label sets).

    Several series of one node are combined (``sum``, ``max`` or ``mean``);
    the node's sample time is the newest of them.
    """
    if not isinstance(result, list):
        raise FetchError("bad_response", f"expected an instant vector (a list of series), got {type(result).__name__}")
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    times: dict[str, float] = {}
    unmatched: list[str] = []
    for item in result:
        if not isinstance(item, dict) or "value" not in item:
            kind = "a range vector" if isinstance(item, dict) and "values" in item else "not a series"
            raise FetchError("bad_response", f"expected an instant vector, got {kind}")
        labels = item.get("metric") or {}
        ts, raw = item["value"]
        value = float(raw)
        node = mapping.node_of(labels, index)
        if node is None:
            unmatched.append(_labels_text(labels))
            continue
        if not math.isfinite(value):
            continue
        if node in sums:
            if combine == "max":
                sums[node] = max(sums[node], value)
            else:
                sums[node] += value
            counts[node] += 1
            times[node] = max(times[node], float(ts))
        else:
            sums[node] = value
            counts[node] = 1
            times[node] = float(ts)
    if combine == "mean":
        sums = {n: v / counts[n] for n, v in sums.items()}
    return sums, times, len(result), unmatched


def _labels_text(labels: Mapping[str, str]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


class PrometheusSource:
    """One bulk PromQL instant query, refreshed every ``spec.interval`` on a background task."""

    def __init__(self, name: str, spec: PrometheusSpec, nodes: Callable[[], Sequence[Node]],
                 telemetry: Any = None, clock: Callable[[], float] = time.time) -> None:
        self.name = name
        self.spec = spec
        self._nodes = nodes
        self._telemetry = telemetry
        self._clock = clock
        self._data = SourceData()
        self._client: Any = None
        self._task: asyncio.Task[None] | None = None
        # The restarts of a crashed refresh loop: 1 s doubling to 60 s, no jitter, never reset.
        self._supervisor = Supervisor(log=log, jitter=0.0, healthy_run=math.inf)
        self.fetching = False

    @property
    def data(self) -> SourceData:
        return self._data

    def describe(self) -> str:
        return f"{self.spec.promql} on {self.spec.url} every {self.spec.interval:g}s"

    # -- one fetch (worker thread) ------------------------------------------------
    def _connect(self) -> Any:
        if self._client is None:
            import requests
            from prometheus_api_client import PrometheusConnect
            from urllib3.util.retry import Retry

            session = requests.Session()
            session.verify = self.spec.ca_file or not self.spec.insecure_skip_verify
            if self.spec.insecure_skip_verify:
                log.warning("metrics source %s: insecureSkipVerify is set: %s's certificate is not checked",
                            self.name, self.spec.url)
            # No client-side retries: the refresh loop retries with backoff and counts each failure.
            self._client = PrometheusConnect(url=self.spec.url, session=session, retry=Retry(total=0),
                                             timeout=self.spec.timeout)
        headers = None
        if self.spec.bearer_token_file:
            # Read on every fetch: mounted service-account tokens rotate.
            with open(self.spec.bearer_token_file, encoding="utf-8") as f:
                headers = {"Authorization": f"Bearer {f.read().strip()}"}
        self._client.headers = headers
        return self._client

    def fetch(self, nodes: Sequence[Node]) -> SourceData:
        """Run the query once and return the new reading (never raises)."""
        started = self._clock()
        previous = self._data
        try:
            if self._telemetry is not None:
                self._telemetry.queries.labels(self.name).inc()
            client = self._connect()
            result = client.custom_query(self.spec.promql)
            values, times, series, unmatched = parse_vector(result, self.spec.mapping, NodeIndex(nodes),
                                                            self.spec.combine)
            if series == 0:
                raise FetchError("empty_result", "the query returned no series")
        except Exception as exc:  # noqa: BLE001 - every failure is classified and kept, never raised
            error = classify(exc)
            if self._telemetry is not None:
                self._telemetry.errors.labels(self.name, error.kind).inc()
            log.warning("metrics source %s: refresh failed (%s): %s", self.name, error.kind, error)
            return attrs.evolve(previous, last_attempt=started, last_error=str(error), last_error_kind=error.kind)
        finally:
            if self._telemetry is not None:
                self._telemetry.refresh_duration.labels(self.name).observe(max(0.0, self._clock() - started))
        known = {node.name for node in nodes}
        merged_values = {n: v for n, v in previous.values.items() if n in known}
        merged_times = {n: t for n, t in previous.sample_times.items() if n in known}
        merged_values.update(values)
        merged_times.update(times)
        if unmatched:
            log.info("metrics source %s: %d series matched no node, e.g. %s", self.name, len(unmatched), unmatched[0])
        return SourceData(values=merged_values, sample_times=merged_times, generation=previous.generation + 1,
                          last_success=self._clock(), last_attempt=started, series=series,
                          unmatched=tuple(unmatched[:MAX_UNMATCHED_SHOWN]), unmatched_count=len(unmatched))

    # -- the refresh task ---------------------------------------------------------
    async def refresh(self) -> SourceData:
        """One refresh in a worker thread; the new reading replaces the old one."""
        nodes = list(self._nodes())  # read in the loop thread, where the cache changes
        self.fetching = True
        try:
            self._data = await asyncio.to_thread(self.fetch, nodes)
        finally:
            self.fetching = False
        return self._data

    async def run(self) -> None:
        """Refresh forever: every ``interval`` after a success, with backoff after a failure."""
        backoff = 1.0
        while True:
            data = await self.refresh()
            if data.last_error is None:
                backoff = 1.0
                delay = self.spec.interval
            else:
                delay = min(backoff, self.spec.interval)
                backoff = min(backoff * 2, self.spec.interval)
            # Jitter so sources sharing a Prometheus do not query in lockstep.
            await asyncio.sleep(delay * random.uniform(0.9, 1.0))

    def start(self) -> asyncio.Task[None]:
        """The refresh task ``metrics-source:<name>``: a bug in the loop itself is logged with the task's
        name and the loop restarts (1 s doubling to 60 s)."""
        if self._task is None or self._task.done():
            self._task = self._supervisor.start(f"metrics-source:{self.name}", self.run, restart=True)
        return self._task

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            await self._supervisor.stop(task.get_name())
        if self._client is not None and not self.fetching:  # a fetch still in its thread keeps its session
            self._client.close()
            self._client = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()
