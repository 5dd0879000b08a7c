"""What a metrics source holds: one immutable reading, replaced as a whole.

A reading maps node names to a value and the time that value was sampled.
"No value" is the absence of a key, never 0: a failed fetch or a node the
query did not return keeps the node's last good value with its original
sample time (it ages out under the plugin's data policy), or has no entry.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

#: The kinds of failure a source counts (label ``kind`` of
#: ``scorer_metrics_source_errors_total``). A bounded set.
ERROR_KINDS: tuple[str, ...] = (
    "timeout",  # the query did not answer within queryTimeout
    "connection",  # Prometheus unreachable (refused, DNS, reset)
    "tls",  # certificate or handshake failure
    "auth",  # 401 / 403
    "bad_query",  # Prometheus rejected the PromQL (400 / 422)
    "http",  # any other non-200 status
    "bad_response",  # not an instant vector, or unparsable
    "empty_result",  # the query returned no series at all
)


@attrs.frozen(slots=True)
class SourceData:
    """One reading of a source.

    ``values`` and ``sample_times`` (unix seconds) have the same keys: the
    nodes with a value. ``last_success`` is when the last successful fetch
    completed (None: never, the source is warming up); ``last_error`` and
    ``last_error_kind`` describe the latest fetch if it failed (None after a
    success). ``series`` counts the series of the last successful result,
    ``unmatched`` lists (at most 10) label sets that mapped to no node.
    ``generation`` increases with every change of ``values``.
    """

    values: Mapping[str, float] = attrs.Factory(dict)
    sample_times: Mapping[str, float] = attrs.Factory(dict)
    generation: int = 0
    last_success: float | None = None
    last_attempt: float | None = None
    last_error: str | None = None
    last_error_kind: str | None = None
    series: int = 0
    unmatched: tuple[str, ...] = ()
    unmatched_count: int = 0

    @property
    def warming_up(self) -> bool:
        return self.last_success is None

    @property
    def healthy(self) -> bool:
        """The latest fetch succeeded."""
        return self.last_success is not None and self.last_error is None
