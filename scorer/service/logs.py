"""Logging for the service: one line per event, as text (default) or JSON (``--log-format json``).

A record that carries an exception keeps it on its line: the traceback's
newlines are written as ``\\n`` in text, and as a ``exception`` string field
in JSON, so a log collector never splits one event into several.

A request that is not valid HTTP (a 100 KB URL or header, a bad request line)
is the client's fault, answered 400 by aiohttp, which logs each one as an
ERROR with a traceback on ``aiohttp.server``. ``ClientErrors``, a filter on
that logger, writes it instead as one WARNING line without a traceback on
``scorer.http``, through a ``RepeatLog``: the first of a kind (the parser's
error, such as ``LineTooLong``) at once, its repeats within 30 s as one counted
line (``flush()`` writes the last count on shutdown). Other records of
``aiohttp.server`` (a handler's bug: 500) keep their traceback.
"""

from __future__ import annotations

import datetime
import logging
import sys
from typing import TextIO

import orjson
from aiohttp.http_exceptions import HttpProcessingError

from scorer.logsummary import RepeatLog

FORMATS = ("text", "json")
SERVER_LOGGER = "aiohttp.server"
#: A client error's message (the parser's, with the start of the bad line) is cut to this many characters.
MAX_CLIENT_ERROR = 200


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


class ClientErrors(logging.Filter):
    """On ``aiohttp.server``: a request aiohttp could not parse (``HttpProcessingError``) becomes one WARNING
    line on ``scorer.http`` without a traceback, its repeats counted (``repeats``); other records pass."""

    def __init__(self, repeats: RepeatLog | None = None) -> None:
        super().__init__()
        self.repeats = repeats if repeats is not None else RepeatLog(logging.getLogger("scorer.http"))

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if not isinstance(error, HttpProcessingError):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        remote = args[0] if args else "an unknown client"  # ("Error handling request from %s", remote)
        message = str(error.message)
        if len(message) > MAX_CLIENT_ERROR:
            message = message[:MAX_CLIENT_ERROR - 3] + "..."
        self.repeats.warning(f"bad HTTP request: {type(error).__name__}", "bad HTTP request from %s, answered %d: %s",
                             remote, error.code, message)
        return False


def _client_error_filters() -> list[ClientErrors]:
    return [f for f in logging.getLogger(SERVER_LOGGER).filters if isinstance(f, ClientErrors)]


def flush() -> None:
    """Write the client errors' repeat counts not yet written (on shutdown)."""
    for found in _client_error_filters():
        found.repeats.flush()


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
    server = logging.getLogger(SERVER_LOGGER)
    for old_filter in _client_error_filters():
        server.removeFilter(old_filter)
    server.addFilter(ClientErrors())
