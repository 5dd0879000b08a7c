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

A metric the snapshot does not name has no data for any node (the plugins'
``onMissing`` policy applies); so does a node a metric does not list.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import yaml

from scorer.errors import InputError
from scorer.inputs.duration import parse_duration
from scorer.model import describe_value
from scorer.sources.source import StaticSource

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
    """Every ``MetricsSnapshot`` among ``documents``, merged in order (None if there is none)."""
    result: MetricsSnapshot | None = None
    for number, document in enumerate(documents, 1):
        if not is_snapshot_document(document):
            continue
        snap = parse_snapshot(document, f"{KIND} (document {number} of {origin})")
        result = snap if result is None else result.merged(snap)
    return result


def load_snapshot(path: str) -> MetricsSnapshot:
    """A metrics snapshot file (YAML or JSON, one or more ``MetricsSnapshot`` documents)."""
    try:
        with open(path, encoding="utf-8") as f:
            documents = list(yaml.safe_load_all(f))
    except OSError as exc:
        raise InputError(f"cannot read metrics snapshot {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML/JSON: {' '.join(str(exc).split())}") from None
    snap = snapshot_from_documents(documents, path)
    if snap is None:
        raise InputError(f"{path}: no document of kind {KIND} (expected kind: {KIND} with a 'metrics' mapping)")
    return snap


def parse_snapshot(document: Mapping[str, Any], origin: str) -> MetricsSnapshot:
    unknown = sorted(set(document) - {"apiVersion", "kind", "metadata", "metrics"})
    if unknown:
        raise InputError(f"{origin}: {unknown[0]}: unknown field (expected apiVersion, kind, metadata, metrics)")
    metrics_data = document.get("metrics")
    if not isinstance(metrics_data, Mapping):
        raise InputError(f"{origin}: metrics: expected a mapping of metric name to per-node values, "
                         f"got {describe_value(metrics_data)}")
    metrics: dict[str, dict[str, tuple[float, float]]] = {}
    for name, nodes in metrics_data.items():
        path = f"{origin}: metrics.{name}"
        if not isinstance(name, str) or not name:
            raise InputError(f"{origin}: metrics: metric names must be non-empty strings, got {name!r}")
        if nodes is None:
            metrics[name] = {}
            continue
        if not isinstance(nodes, Mapping):
            raise InputError(f"{path}: expected a mapping of node name to value, got {describe_value(nodes)}")
        values: dict[str, tuple[float, float]] = {}
        for node, entry in nodes.items():
            parsed = _entry(entry, f"{path}.{node}")
            if parsed is not None:
                values[str(node)] = parsed
        metrics[name] = values
    return MetricsSnapshot(metrics, origin)


def _entry(entry: Any, path: str) -> tuple[float, float] | None:
    age: Any = 0.0
    value = entry
    if isinstance(entry, Mapping):
        unknown = sorted(set(entry) - {"value", "age"})
        if unknown:
            raise InputError(f"{path}.{unknown[0]}: unknown field (expected value, age)")
        value = entry.get("value")
        age = entry.get("age", 0.0)
    if value is None:
        return None
    expected = f"{path}: expected a finite number (or null for no data), got {describe_value(value)}"
    if isinstance(value, str):
        # YAML 1.1 reads 1.2e6 (no sign in the exponent) as a string: accept numeric text.
        try:
            value = float(value)
        except ValueError:
            raise InputError(expected) from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise InputError(expected)
    return float(value), _age(age, f"{path}.age")


def _age(age: Any, path: str) -> float:
    if isinstance(age, bool):
        raise InputError(f"{path}: expected a duration such as 30s or 5m, got {describe_value(age)}")
    if isinstance(age, (int, float)):
        seconds = float(age)
    elif isinstance(age, str):
        try:
            seconds = parse_duration(age).total_seconds()
        except ValueError as exc:
            raise InputError(f"{path}: {exc}; expected a duration such as 30s or 5m") from None
    else:
        raise InputError(f"{path}: expected a duration such as 30s or 5m, got {describe_value(age)}")
    if seconds < 0 or not math.isfinite(seconds):
        raise InputError(f"{path}: must not be negative")
    return seconds
