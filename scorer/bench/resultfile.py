"""The bench's result file, ``result.json``: written by ``write_result``, read back (``--compare``'s
baseline) by ``read_result``, which checks that it has the fields the report reads; a file that is
not a ``scorer-bench/v1`` result is a ``ResultFileError`` naming the file and the field."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import orjson

from scorer.errors import InputError
from scorer.inputs.describe import expected, quote
from scorer.inputs.reader import Limits, MiB, read_documents

FORMAT = "scorer-bench/v1"
RESULT_FILE = "result.json"
RESULT_LIMITS = Limits(max_bytes=256 * MiB)


class ResultFileError(InputError):
    """A result file (``--compare BASELINE.json``, or ``--out``'s ``result.json`` and plots) that cannot
    be read or written, or that is not a ``scorer-bench/v1`` result; names the file and the field."""



def write_result(result: dict[str, Any], out_dir: str | os.PathLike[str]) -> Path:
    """Write ``result.json`` (indented; NaN and infinities become null) into ``out_dir``, creating it."""
    directory = Path(out_dir)
    path = directory / RESULT_FILE
    data = orjson.dumps(result, default=_json_default,
                        option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE)
    partial = directory / f".{RESULT_FILE}.partial"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        partial.replace(path)
    except OSError as error:
        raise ResultFileError(f"{directory}: cannot write {RESULT_FILE}: {error.strerror or error}") from None
    return path


def _json_default(value: Any) -> Any:
    """What orjson does not write itself: attrs instances (a loaded workload) as dicts, paths as text."""
    if attrs.has(type(value)):
        return attrs.asdict(value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"cannot write {type(value).__name__} to {RESULT_FILE}")


def read_result(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A result file written by ``write_result``; ``ResultFileError`` (or the reader's ``ReadError``)
    naming the file and the field when it is not a ``scorer-bench/v1`` result."""
    source = os.fspath(path)
    documents = read_documents(source, limits=RESULT_LIMITS, syntax="json")
    data = documents[0].data if documents else None
    check_result(data, source)
    assert isinstance(data, dict)
    return data


_POINT_FIELDS: dict[str, tuple[str, ...]] = {
    "cycle_ms": ("p50", "p90", "p99", "max", "mean"),
    "throughput": ("pods_per_second", "p50", "p90", "p99"),
    "memory": ("peak_rss_mb", "base_rss_mb", "bytes_per_node", "bytes_per_pod"),
    "cpu_per_pod": ("ms", "ms_after_first_bind", "cycle_share", "start_up_s", "extender_ms"),
}
_POINT_LISTS = (("cycle_ms", "blocks_p50"), ("throughput", "samples"))


def check_result(data: Any, source: str) -> None:
    """Raise ``ResultFileError`` unless ``data`` has the fields of a result that this module reads."""
    if not isinstance(data, dict):
        raise ResultFileError(f"{source}: not a scorer bench result: {expected('a JSON object', data)}")
    if data.get("format") != FORMAT:
        raise ResultFileError(f"{source}: not a scorer bench result: format is {quote(data.get('format'))}, "
                              f"expected {quote(FORMAT)}")
    points = data.get("points")
    if not isinstance(points, list):
        raise ResultFileError(f"{source}: points: {expected('a list', points)}")
    for index, point in enumerate(points):
        _check_point(point, f"{source}: points[{index}]")


def _check_point(point: Any, where: str) -> None:
    if not isinstance(point, dict):
        raise ResultFileError(f"{where}: {expected('an object', point)}")
    for field in ("workload", "mode", "scheduler", "profile"):
        if not isinstance(point.get(field), str):
            raise ResultFileError(f"{where}.{field}: {expected('a string', point.get(field))}")
    for field in ("nodes", "percentage"):
        value = point.get(field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ResultFileError(f"{where}.{field}: {expected('a whole number', value)}")
    for field in ("init_pods", "pods", "bound", "unscheduled"):
        _check_number(point.get(field), f"{where}.{field}")
    if not (point.get("error") is None or isinstance(point.get("error"), str)):
        raise ResultFileError(f"{where}.error: {expected('a string or null', point.get('error'))}")
    for section, keys in _POINT_FIELDS.items():
        values = point.get(section)
        if values is None:
            continue
        if not isinstance(values, dict):
            raise ResultFileError(f"{where}.{section}: {expected('an object or null', values)}")
        for key in keys:
            _check_number(values.get(key), f"{where}.{section}.{key}")
    for section, key in _POINT_LISTS:
        raw = point.get(section, {}).get(key) if isinstance(point.get(section), dict) else None
        if raw is not None and not isinstance(raw, list):
            raise ResultFileError(f"{where}.{section}.{key}: {expected('a list of numbers', raw)}")
        for index, value in enumerate(raw or []):
            _check_number(value, f"{where}.{section}.{key}[{index}]")
    extender = point.get("extender")
    if extender is not None and not isinstance(extender, dict):
        raise ResultFileError(f"{where}.extender: {expected('an object or null', extender)}")
    means = point.get("extension_points_ms")
    if means is not None and not isinstance(means, dict):
        raise ResultFileError(f"{where}.extension_points_ms: {expected('an object or null', means)}")
    for name, figures in (means or {}).items():
        if not isinstance(figures, dict):
            raise ResultFileError(f"{where}.extension_points_ms.{name}: {expected('an object', figures)}")
        _check_number(figures.get("mean"), f"{where}.extension_points_ms.{name}.mean")


def _check_number(value: Any, where: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ResultFileError(f"{where}: {expected('a number or null', value)}")
