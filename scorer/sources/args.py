"""Args shared by metric-driven plugins: where the data comes from and what to do when it is bad.

A plugin's own ``<Name>Args`` class has an ``address`` (the Prometheus URL)
plus two nested objects of these types::

    source:                      # how the query runs
      refreshInterval: 30s       # one bulk query per interval, in the background
      queryTimeout: 10s
      nodeMapping: {by: auto, label: node}
      caFile: ""                 # CA bundle for https (must exist when Prometheus is queried)
      bearerTokenFile: ""        # re-read on every query (rotated tokens)
      insecureSkipVerify: false
    policy:                      # what a node whose data is not usable gets
      maxAge: null               # a value older than this is stale; default 3 x refreshInterval
      onMissing: neutral         # neutral (score 50) | min (0) | max (100) | filter
      inFlight:
        enabled: true            # add estimated load of pods placed since the last sample
        settleTime: 60s          # how long after placement a pod's load takes to show in the metric
        ttl: 5m                  # forget a placement after this long, whatever the samples say
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal
from urllib.parse import urlparse

import attrs

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


def address_errors(address: str, key: str = "address") -> list[tuple[str, str]]:
    """A Prometheus URL must be http(s)://host[:port][/path]."""
    if not address:
        return []
    parsed = urlparse(address)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        return [(key, f"{address!r} is not a URL; expected http://host:port or https://host:port")]
    return []
