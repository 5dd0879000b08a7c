"""Logging for the service: one line per event, as text (default) or JSON (``--log-format json``).

A record that carries an exception keeps it on its line: the traceback's
newlines are written as ``\\n`` in text, and as a ``exception`` string field
in JSON, so a log collector never splits one event into several.
"""

from __future__ import annotations

import datetime
import logging
import sys
from typing import TextIO

import orjson

FORMATS = ("text", "json")


def _timestamp(record: logging.LogRecord) -> str:
    stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """``2026-11-24T07:50:00.123Z INFO scorer.scheduler message`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_timestamp(record)} {record.levelname} {record.name} {record.getMessage()}"
        if record.exc_info:
            line += " | " + self.formatException(record.exc_info)
        return _one_line(line)


class JsonFormatter(logging.Formatter):
    """``{"time": ..., "level": ..., "logger": ..., "message": ..., "exception": ...}`` on one line."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": _timestamp(record), "level": record.levelname, "logger": record.name,
                 "message": record.getMessage()}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


def _one_line(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\r", "\\r").replace("\n", "\\n")


def configure(log_format: str = "text", *, level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Route every logger through one handler on ``stream`` (standard error) in ``log_format``."""
    if log_format not in FORMATS:
        raise ValueError(f"log format must be one of {', '.join(FORMATS)}, got {log_format!r}")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # a line per probe would drown the rest
