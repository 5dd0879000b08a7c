"""Metrics sources for metric-driven plugins: Prometheus (bulk, in the background) or a static snapshot.

A plugin gets the hub from its handle and asks it for a source and a reader::

    from scorer.sources import MetricReader, hub_of

    hub = hub_of(handle)
    source = hub.source(plugin=NAME, metric="cpu_utilization", address=args.address,
                        query=QUERY, source_args=args.source)
    reader = MetricReader(hub, NAME, "cpu_utilization", source, args.policy, args.source)
    ...
    reading = reader.read(nodes)          # once per cycle: values, ages, states, in-flight pods

Nothing here does I/O inside a scheduling cycle.
"""

from scorer.sources.args import DataPolicyArgs, InFlightArgs, NodeMappingArgs, SourceArgs, address_errors
from scorer.sources.data import ERROR_KINDS, SourceData
from scorer.sources.hub import EXTRAS_KEY, MetricsHub, hub_of
from scorer.sources.mapping import NodeIndex, NodeMapping
from scorer.sources.reader import (
    FRESH,
    MISSING,
    NEUTRAL_SCORE,
    STALE,
    STATE_NAMES,
    WARMING_UP,
    MetricReader,
    Reading,
)
from scorer.sources.source import MetricsSource, PrometheusSource, PrometheusSpec, StaticSource
from scorer.sources.static import MetricsSnapshot, load_snapshot, snapshot_from_documents

__all__ = [
    "ERROR_KINDS",
    "EXTRAS_KEY",
    "FRESH",
    "MISSING",
    "NEUTRAL_SCORE",
    "STALE",
    "STATE_NAMES",
    "WARMING_UP",
    "DataPolicyArgs",
    "InFlightArgs",
    "MetricReader",
    "MetricsHub",
    "MetricsSnapshot",
    "MetricsSource",
    "NodeIndex",
    "NodeMapping",
    "NodeMappingArgs",
    "PrometheusSource",
    "PrometheusSpec",
    "Reading",
    "SourceArgs",
    "SourceData",
    "StaticSource",
    "address_errors",
    "hub_of",
    "load_snapshot",
    "snapshot_from_documents",
]
