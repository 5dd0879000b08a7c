"""Metric inputs for metric-driven plugins: Prometheus (bulk, in the background) or a static snapshot.

The ``SourceHub`` owns the sources: plugins asking for the same query share
one. A plugin gets the hub from its handle (``handle.sources``), asks it for a
source, and reads it once per cycle through a ``MetricReader``
(``scorer.plugins.helper.metricreader``), which applies the plugin's data policy::

    from scorer.plugins.helper.metricreader import MetricReader, source_hub

    hub = source_hub(handle)
    source = hub.source(plugin=NAME, metric="cpu_utilization", address=args.address,
                        query=QUERY, source_args=args.source)
    reader = MetricReader(hub, NAME, "cpu_utilization", source, args.policy, args.source)
    ...
    reading = reader.read(nodes)          # once per cycle: values, ages, states, in-flight pods

A plugin's args hold ``address``, ``source: SourceArgs`` and ``policy:
DataPolicyArgs``; its ``validate()`` adds ``address_errors``,
``policy_timing_errors`` and, for a query users may write,
``template_errors`` (``scorer.sources.query``: placeholders such as
``{by}``, filled with ``fill_template``).

This package sits below the framework: it knows nodes and pods, not plugins.
Nothing here does I/O inside a scheduling cycle.
"""

from scorer.sources.args import (
    DataPolicyArgs,
    InFlightArgs,
    NodeMappingArgs,
    SourceArgs,
    address_errors,
    policy_timing_errors,
)
from scorer.sources.data import ERROR_KINDS, SourceData
from scorer.sources.hub import SourceHub
from scorer.sources.mapping import NodeIndex, NodeMapping
from scorer.sources.query import fill_template, promql_duration, template_errors
from scorer.sources.source import MetricsSource, PrometheusSource, PrometheusSpec, StaticSource
from scorer.sources.static import MetricsSnapshot, load_snapshot, snapshot_from_documents

__all__ = [
    "ERROR_KINDS",
    "DataPolicyArgs",
    "InFlightArgs",
    "SourceHub",
    "MetricsSnapshot",
    "MetricsSource",
    "NodeIndex",
    "NodeMapping",
    "NodeMappingArgs",
    "PrometheusSource",
    "PrometheusSpec",
    "SourceArgs",
    "SourceData",
    "StaticSource",
    "address_errors",
    "fill_template",
    "load_snapshot",
    "policy_timing_errors",
    "promql_duration",
    "snapshot_from_documents",
    "template_errors",
]
