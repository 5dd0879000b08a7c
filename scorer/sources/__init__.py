"""Metric inputs for metric-driven plugins: Prometheus (bulk, in the background) or a static snapshot.

The ``SourceHub`` owns the sources: plugins asking for the same query share
one. A plugin asks the hub on its handle (``handle.sources``) for a source when
it is built and reads it once per cycle through a ``MetricReader``
(``scorer.plugins.helper.metricreader``), which applies the plugin's data
policy; plugins import both through ``scorer.plugin``::

    from scorer.plugin import fill_query, metric_reader

    reader = metric_reader(handle, NAME, "cpu_utilization", address=args.address,
                           query=fill_query("avg by ({by}) (cpu_utilization)", args.source),
                           source=args.source, policy=args.policy)
    ...
    reading = reader.read(nodes)          # once per cycle: values, ages, states, in-flight pods

A plugin's args hold ``address``, ``source: SourceArgs`` and ``policy:
DataPolicyArgs``; its ``validate()`` adds ``address_errors``,
``policy_timing_errors`` and, for a query users may write,
``template_errors`` (``scorer.sources.query``: placeholders such as
``{by}``); ``fill_query`` fills ``{by}`` from ``source.nodeMapping`` and the
plugin's own placeholders.

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
from scorer.sources.query import fill_query, fill_template, promql_duration, template_errors
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
    "fill_query",
    "fill_template",
    "load_snapshot",
    "policy_timing_errors",
    "promql_duration",
    "snapshot_from_documents",
    "template_errors",
]
