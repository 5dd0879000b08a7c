"""Metrics snapshots: fixed per-node values from a YAML or JSON document.

Used by ``scorer simulate`` / ``explain`` (``--metrics FILE``, or a
``MetricsSnapshot`` document inside the cluster file), by tests and by the
bench, so metric-driven plugins run without Prometheus::

    apiVersion: scorer.dev/v1alpha1
    kind: MetricsSnapshot
    metrics:
      network_receive_bytes_per_second:     # the metric name a plugin reads
        node-a: 1.2e6                       # sampled when the snapshot is loaded
        node-b: {value: 3.5e7, age: 5m}     # sampled 5 minutes before loading
        node-c: null                        # no data for this node

``apiVersion`` may be omitted; any other version than ``scorer.dev/v1alpha1``
is an error. Metric and node names are strings; a value is a finite number
of at least 0 (or such a number as a string: YAML reads ``1.2e6`` as text),
or null for "no data"; ``age`` is a duration (``30s``, ``5m``) or a number of
seconds. Files go through scorer's one guarded reader, so a repeated key, a
non-finite number, binary text or deep nesting is an error naming the file,
the document and the field.

A metric the snapshot does not name has no data for any node (the plugins'
``onMissing`` policy applies); so does a node a metric does not list.
Node names that match no node of the cluster are reported by the hub
(``SourceHub.source_warnings``), as for Prometheus series.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from scorer.errors import InputError
from scorer.inputs.describe import describe_value, join_path, printable, quote
from scorer.inputs.duration import parse_duration
from scorer.inputs.reader import SNAPSHOT_LIMITS, Document, read_documents
from scorer.sources.source import StaticSource

API_VERSION = "scorer.dev/v1alpha1"
KIND = "MetricsSnapshot"


@attrs.frozen(slots=True)
class MetricsSnapshot:
    """metric name -> node -> (value, age in seconds)."""

    metrics: Mapping[str, Mapping[str, tuple[float, float]]] = attrs.Factory(dict)
    origin: str = "metrics snapshot"

    def source(self, metric: str, loaded_at: float) -> StaticSource:
        values = self.metrics.get(metric, {})
        return StaticSource(metric, {n: v for n, (v, _) in values.items()},
                            {n: loaded_at - age for n, (_, age) in values.items()}, loaded_at, self.origin)

    def merged(self, other: MetricsSnapshot) -> MetricsSnapshot:
        metrics = {name: dict(nodes) for name, nodes in self.metrics.items()}
        for name, nodes in other.metrics.items():
            metrics.setdefault(name, {}).update(nodes)
        return MetricsSnapshot(metrics, f"{self.origin} + {other.origin}")


def is_snapshot_document(document: Any) -> bool:
    return isinstance(document, Mapping) and document.get("kind") == KIND


def snapshot_from_documents(documents: Iterable[Any], origin: str) -> MetricsSnapshot | None:
    """Every ``MetricsSnapshot`` among ``documents``, merged in order (None if there is none).

    ``documents`` are ``Document``s from the reader (a cluster file's
    ``LoadedObjects.others``: errors name their file and document) or decoded
    mappings, numbered in order as documents of ``origin``.
    """
    result: MetricsSnapshot | None = None
    for number, document in enumerate(documents, 1):
        if isinstance(document, Document):
            data, where = document.data, document.origin
        else:
            data, where = document, f"document {number} of {origin}"
        if not is_snapshot_document(data):
            continue
        snap = parse_snapshot(data, f"{KIND} ({where})")
        result = snap if result is None else result.merged(snap)
    return result


def load_snapshot(path: str) -> MetricsSnapshot:
    """A metrics snapshot file (YAML or JSON, one or more ``MetricsSnapshot`` documents)."""
    documents = read_documents(path, limits=SNAPSHOT_LIMITS)  # ReadError names the file
    snap = snapshot_from_documents(documents, path)
    if snap is None:
        raise InputError(f"{path}: no document of kind {KIND} (expected kind: {KIND} with a 'metrics' mapping)")
    return snap


def parse_snapshot(document: Mapping[str, Any], origin: str) -> MetricsSnapshot:
    """One ``MetricsSnapshot`` document; ``InputError`` naming ``origin`` and the field."""
    unknown = sorted(str(key) for key in set(document) - {"apiVersion", "kind", "metadata", "metrics"})
    if unknown:
        raise InputError(f"{origin}: {printable(unknown[0])}: unknown field "
                         "(expected apiVersion, kind, metadata, metrics)")
    api_version = document.get("apiVersion")
    if api_version is not None and api_version != API_VERSION:
        raise InputError(f"{origin}: apiVersion: expected {quote(API_VERSION)} (or none), "
                         f"got {describe_value(api_version)}")
    metrics_data = document.get("metrics")
    if not isinstance(metrics_data, Mapping):
        raise InputError(f"{origin}: metrics: expected a map of metric name to per-node values, "
                         f"got {describe_value(metrics_data)}")
    metrics: dict[str, dict[str, tuple[float, float]]] = {}
    for name, nodes in metrics_data.items():
        if not isinstance(name, str) or not name:
            raise InputError(f"{origin}: metrics: metric names must be non-empty strings, got {describe_value(name)}")
        path = f"{origin}: {join_path('metrics', printable(name))}"
        if nodes is None:
            metrics[name] = {}
            continue
        if not isinstance(nodes, Mapping):
            raise InputError(f"{path}: expected a map of node name to value, got {describe_value(nodes)}")
        values: dict[str, tuple[float, float]] = {}
        for node, entry in nodes.items():
            if not isinstance(node, str) or not node:
                raise InputError(f"{path}: node names must be non-empty strings, got {describe_value(node)}")
            parsed = _entry(entry, join_path(path, printable(node)))
            if parsed is not None:
                values[node] = parsed
        metrics[name] = values
    return MetricsSnapshot(metrics, origin)


def _entry(entry: Any, path: str) -> tuple[float, float] | None:
    age: Any = 0.0
    value = entry
    if isinstance(entry, Mapping):
        unknown = sorted(str(key) for key in set(entry) - {"value", "age"})
        if unknown:
            raise InputError(f"{path}.{printable(unknown[0])}: unknown field (expected value, age)")
        value = entry.get("value")
        age = entry.get("age", 0.0)
    if value is None:
        return None
    expected = f"{path}: expected a finite number of at least 0 (or null for no data), got {describe_value(value)}"
    if isinstance(value, str):
        # YAML 1.1 reads 1.2e6 (no sign in the exponent) as a string: accept numeric text.
        try:
            value = float(value)
        except ValueError:
            raise InputError(expected) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(expected)
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        raise InputError(expected) from None
    if not math.isfinite(number) or number < 0:
        raise InputError(expected)
    return number, _age(age, f"{path}.age")


def _age(age: Any, path: str) -> float:
    if isinstance(age, bool):
        raise InputError(f"{path}: expected a duration such as 30s or 5m, got {describe_value(age)}")
    if isinstance(age, (int, float)):
        try:
            seconds = float(age)
        except OverflowError:
            seconds = math.inf
    elif isinstance(age, str):
        try:
            seconds = parse_duration(age).total_seconds()
        except (ValueError, OverflowError) as exc:
            raise InputError(f"{path}: {exc}; expected a duration such as 30s or 5m") from None
    else:
        raise InputError(f"{path}: expected a duration such as 30s or 5m, got {describe_value(age)}")
    if not math.isfinite(seconds):
        raise InputError(f"{path}: expected a finite number of seconds, got {describe_value(age)}")
    if seconds < 0:
        raise InputError(f"{path}: must not be negative")
    return seconds
