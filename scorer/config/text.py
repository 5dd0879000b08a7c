"""Reading a configuration file or text strictly: one document, no duplicate keys.

kube-scheduler decodes its file with a strict codec, where a key given twice
in the same mapping is an error. The text goes through scorer's one guarded
reader (``scorer.inputs.reader``, with the configuration limits), which
finds repeated keys and unrepresentable numbers; they are reported here with
their field paths, together with keys that are not strings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from scorer.errors import ConfigError, ReadError
from scorer.inputs.describe import describe_value, join_path
from scorer.inputs.reader import CONFIG_LIMITS, parse_documents, read_text, single_document


def read_file(path: str | os.PathLike[str], errors: list[tuple[str, str]] | None = None) -> Any:
    """Decode a YAML or JSON (by ``.json`` extension) file; ConfigError naming the file.

    With ``errors``, duplicate keys are appended there instead of raised.
    """
    name = os.fspath(path)
    try:
        text = read_text(name, limits=CONFIG_LIMITS)
    except ReadError as error:
        raise ConfigError([("", error.detail)], name) from None
    return parse_text(text, name, as_json=name.lower().endswith(".json"), errors=errors)


def parse_text(
    text: str,
    source: str = "<input>",
    *,
    as_json: bool = False,
    errors: list[tuple[str, str]] | None = None,
) -> Any:
    """Decode YAML (or JSON) text into plain dicts and lists; duplicate keys are errors.

    Syntax errors raise ConfigError. Duplicate keys (the last value is kept)
    and numbers that cannot be represented are appended to ``errors`` when
    given, else raised.
    """
    try:
        documents = parse_documents(
            text, source, limits=CONFIG_LIMITS, syntax="json" if as_json else "yaml", strict=False
        )
        document = single_document(documents, source)
    except ReadError as error:
        raise ConfigError([("", error.detail)], source) from None
    if document is None:
        raise ConfigError([("", "the configuration is empty")], source)
    problems = list(document.problems)
    data = _plain(document.data, "", problems)
    if errors is not None:
        errors.extend(problems)
    elif problems:
        raise ConfigError(problems, source)
    return data


def _plain(data: Any, path: str, errors: list[tuple[str, str]]) -> Any:
    """Plain dicts/lists (a copy: YAML aliases share objects); keys that are
    not strings are reported with their paths and dropped."""
    if isinstance(data, Mapping):
        out = {}
        for key, value in data.items():
            if not isinstance(key, str):
                errors.append((path, f"keys must be strings, got {describe_value(key)}"))
                continue
            out[key] = _plain(value, join_path(path, key), errors)
        return out
    if isinstance(data, list):
        return [_plain(item, f"{path}[{i}]", errors) for i, item in enumerate(data)]
    return data
