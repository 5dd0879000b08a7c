"""The ``/metrics`` text as kube-scheduler prints it (Prometheus text format 0.0.4, Go's client).

prometheus_client's ``generate_latest`` differs from Go's ``expfmt`` in two ways that
dashboards notice:

* numbers: Python prints a whole-number bucket bound ``le="1.0"`` and ``1000000.0``;
  Go prints ``le="1"`` and ``1e+06`` (``strconv.FormatFloat(f, 'g', -1, 64)``). A query
  that selects ``le="1"`` (the kubernetes-mixin's, and any written against
  kube-scheduler) matches nothing on Prometheus 2.x, which compares label values as
  strings. ``go_float`` writes Go's text; ``render`` uses it for ``le``, ``quantile``
  and every sample value.
* ``*_created`` series: prometheus_client adds one per counter, histogram and summary
  (for OpenMetrics); Go's client has none. ``render`` leaves them out.

Everything else (HELP/TYPE lines, label escaping, the ``_total`` suffix of counters)
is prometheus_client's own.
"""

from __future__ import annotations

import math

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.samples import Sample

__all__ = ["CONTENT_TYPE", "go_float", "render"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
# Label values that hold a number, written as Go writes the number.
_NUMERIC_LABELS = ("le", "quantile")
_OPENMETRICS_ONLY = ("_created",)


def go_float(value: float) -> str:
    """``value`` as Go's ``strconv.FormatFloat(value, 'g', -1, 64)`` (the shortest digits that read
    back as ``value``; exponent form when the exponent is below -4 or at least 6), with the
    ``+Inf``/``-Inf``/``NaN`` spellings of the text format."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    digits, point = _shortest_digits(abs(value))
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _shortest_digits(value: float) -> tuple[str, int]:
    """The shortest decimal digits of a positive finite ``value`` (Python's ``repr`` finds the same
    ones as Go) and the position of the decimal point: ``value == 0.<digits> * 10**point``."""
    mantissa, _, exponent = f"{value!r}".partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = (whole + fraction).lstrip("0")
    point = len(whole) + (int(exponent) if exponent else 0)
    if whole == "0":  # 0.00123: the leading zeros of the fraction move the point left
        point -= len(fraction) - len(fraction.lstrip("0")) + 1
    return digits.rstrip("0") or "0", point


def render(collector: Collector) -> bytes:
    """The text of every metric ``collector`` (a registry) collects, as Go's client writes it."""
    lines: list[str] = []
    for metric in collector.collect():
        name, kind = metric.name, metric.type
        if kind == "counter":
            name += "_total"
        elif kind == "info":
            name, kind = name + "_info", "gauge"
        elif kind == "stateset":
            kind = "gauge"
        elif kind == "gaugehistogram":
            kind = "histogram"
        elif kind == "unknown":
            kind = "untyped"
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n")
        skipped = tuple(metric.name + suffix for suffix in _OPENMETRICS_ONLY)
        lines.extend(_sample_line(sample) for sample in metric.samples if sample.name not in skipped)
    return "".join(lines).encode("utf-8")


def _sample_line(sample: Sample) -> str:
    labels = ",".join(f'{key}="{_label_value(key, value)}"' for key, value in sorted(sample.labels.items()))
    timestamp = f" {int(float(sample.timestamp) * 1000):d}" if sample.timestamp is not None else ""
    return f"{sample.name}{{{labels}}} {go_float(sample.value)}{timestamp}\n" if labels else \
        f"{sample.name} {go_float(sample.value)}{timestamp}\n"


def _label_value(key: str, value: str) -> str:
    if key in _NUMERIC_LABELS:
        try:
            return go_float(float(value))
        except ValueError:
            pass
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
