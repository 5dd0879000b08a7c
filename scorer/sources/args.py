"""Args shared by metric-driven plugins: where the data comes from and what to do when it is bad.

A plugin's own ``<Name>Args`` class has an ``address`` (the Prometheus URL)
plus two nested objects of these types::

    source:                      # how the query runs
      refreshInterval: 30s       # one bulk query per interval, in the background
      queryTimeout: 10s
      nodeMapping: {by: auto, label: node}
      caFile: ""                 # CA bundle for https (a readable file)
      bearerTokenFile: ""        # a readable file, re-read on every query (rotated tokens)
      insecureSkipVerify: false
    policy:                      # what a node whose data is not usable gets
      maxAge: null               # a value older than this is stale; default 3 x refreshInterval
      onMissing: neutral         # neutral (score 50) | min (0) | max (100) | filter
      inFlight:
        enabled: true            # add estimated load of pods placed since the last sample
        settleTime: 60s          # how long after placement a pod's load takes to show in the metric
        ttl: 5m                  # forget a placement after this long, whatever the samples say

Checked when the configuration is loaded (``scorer config validate`` and every
command), each error with its field path:

* ``caFile`` and ``bearerTokenFile`` must name readable files, whatever the run:
  a configuration that names a missing CA bundle is wrong even where it is only
  simulated with a metrics snapshot (which never reads them), as kube-scheduler
  will not start on a kubeconfig it cannot read: ``config validate`` passing
  means the configuration loads. To simulate a production configuration on
  another machine, point them at local copies.
* ``settleTime`` must not be longer than ``ttl``: a placement would be
  forgotten before its load is expected to show in the metric.
* ``maxAge`` must be at least ``refreshInterval`` (``policy_timing_errors``):
  otherwise every value goes stale between two refreshes, and the plugin
  spends part of every interval failing open. (An error rather than a
  warning: no setting makes that useful.)
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Literal
from urllib.parse import urlparse

import attrs

from scorer.inputs.duration import format_duration
from scorer.sources.mapping import MAPPING_MODES, NodeMapping

ON_MISSING: tuple[str, ...] = ("neutral", "min", "max", "filter")
MIN_REFRESH_INTERVAL = timedelta(seconds=1)


@attrs.frozen(slots=True, kw_only=True)
class NodeMappingArgs:
    """``source.nodeMapping``: how series find their node (see ``scorer.sources.mapping``)."""

    by: Literal["auto", "label", "instance", "uname"] = "auto"
    label: str = "node"

    def validate(self) -> list[tuple[str, str]]:
        errors = []
        if self.by not in MAPPING_MODES:
            errors.append(("by", f"must be one of {', '.join(MAPPING_MODES)}"))
        if self.by == "label" and not self.label:
            errors.append(("label", "must name the label that holds the node name"))
        return errors

    def mapping(self) -> NodeMapping:
        return NodeMapping(self.by, self.label)


@attrs.frozen(slots=True, kw_only=True)
class SourceArgs:
    refresh_interval: timedelta = timedelta(seconds=30)
    query_timeout: timedelta = timedelta(seconds=10)
    node_mapping: NodeMappingArgs = NodeMappingArgs()
    ca_file: str = ""
    bearer_token_file: str = ""
    insecure_skip_verify: bool = False

    def validate(self) -> list[tuple[str, str]]:
        errors = []
        if self.refresh_interval < MIN_REFRESH_INTERVAL:
            errors.append(("refreshInterval", "must be at least 1s"))
        if self.query_timeout <= timedelta(0):
            errors.append(("queryTimeout", "must be greater than 0"))
        if self.insecure_skip_verify and self.ca_file:
            errors.append(("insecureSkipVerify", "cannot be combined with caFile"))
        return errors + self.file_errors()

    def file_errors(self) -> list[tuple[str, str]]:
        """``caFile`` / ``bearerTokenFile`` naming something that is not a readable file."""
        errors = []
        for key, path in (("caFile", self.ca_file), ("bearerTokenFile", self.bearer_token_file)):
            if not path:
                continue
            if not os.path.isfile(path):
                problem = f"{path!r} is not a file" if os.path.exists(path) else f"file {path!r} does not exist"
                errors.append((key, problem))
            elif not os.access(path, os.R_OK):
                errors.append((key, f"file {path!r} is not readable (permission denied)"))
        return errors


@attrs.frozen(slots=True, kw_only=True)
class InFlightArgs:
    enabled: bool = True
    settle_time: timedelta = timedelta(seconds=60)
    ttl: timedelta = timedelta(minutes=5)

    def validate(self) -> list[tuple[str, str]]:
        errors = []
        if self.settle_time < timedelta(0):
            errors.append(("settleTime", "must not be negative"))
        if self.ttl <= timedelta(0):
            errors.append(("ttl", "must be greater than 0"))
        elif self.settle_time > self.ttl:
            errors.append(("settleTime", f"must not be longer than ttl ({format_duration(self.ttl)}): a placement "
                                         "would be forgotten before its load is expected to show in the metric"))
        return errors


@attrs.frozen(slots=True, kw_only=True)
class DataPolicyArgs:
    max_age: timedelta | None = None
    on_missing: Literal["neutral", "min", "max", "filter"] = "neutral"
    in_flight: InFlightArgs = InFlightArgs()

    def validate(self) -> list[tuple[str, str]]:
        errors = []
        if self.max_age is not None and self.max_age <= timedelta(0):
            errors.append(("maxAge", "must be greater than 0"))
        if self.on_missing not in ON_MISSING:
            errors.append(("onMissing", f"must be one of {', '.join(ON_MISSING)}"))
        return errors

    def max_age_seconds(self, source: SourceArgs) -> float:
        """``maxAge``, or three refresh intervals when unset (as Koordinator's 180 s for a 60 s report)."""
        if self.max_age is not None:
            return self.max_age.total_seconds()
        return 3 * source.refresh_interval.total_seconds()


def policy_timing_errors(source: SourceArgs, policy: DataPolicyArgs) -> list[tuple[str, str]]:
    """Settings of ``source`` and ``policy`` that contradict each other (paths relative to the plugin's args,
    which hold both as ``source`` and ``policy``)."""
    if policy.max_age is not None and timedelta(0) < policy.max_age < source.refresh_interval:
        interval = format_duration(source.refresh_interval)
        return [("policy.maxAge", f"must be at least source.refreshInterval ({interval}): every value would "
                                  "go stale between two refreshes")]
    return []


def address_errors(address: str, key: str = "address") -> list[tuple[str, str]]:
    """A Prometheus URL must be http(s)://host[:port][/path]."""
    if not address:
        return []
    problem = f"{address!r} is not a URL; expected http://host:port or https://host:port"
    try:
        parsed = urlparse(address)
        parsed.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:  # an unbalanced IPv6 bracket, a bad port
        return [(key, f"{problem} ({exc})")]
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return [(key, problem)]
    return []
