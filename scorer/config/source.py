"""Reading a configuration file or text strictly: one document, no duplicate keys.

kube-scheduler decodes its file with a strict codec, where a key given twice
in the same mapping is an error. PyYAML silently keeps the last value, so
the loader below records duplicates and ``parse_text`` reports them with
their field path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import yaml

from scorer.config.convert import describe
from scorer.config.validation import join_path, quote
from scorer.errors import ConfigError

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Mapping(dict):  # type: ignore[type-arg]
    """A decoded mapping that remembers keys given twice (key, line of the repeat)."""

    __slots__ = ("duplicates",)

    def __init__(self) -> None:
        super().__init__()
        self.duplicates: list[tuple[Any, int | None]] = []


class StrictLoader(_BaseLoader):  # type: ignore[misc]
    """Safe YAML loader whose mappings record duplicate keys (see ``_Mapping``)."""


def _construct_mapping(loader: Any, node: yaml.MappingNode) -> _Mapping:
    mapping = _Mapping()
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == _MERGE_TAG:
            continue  # keys from a "<<" merge may be overridden; that is not a duplicate
        key = loader.construct_object(key_node, deep=True)
        try:
            if key in seen:
                mapping.duplicates.append((key, key_node.start_mark.line + 1))
            seen.add(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                None, None, "found a mapping key that is not a string", key_node.start_mark
            ) from None
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        mapping[key] = loader.construct_object(value_node, deep=True)
    return mapping


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _json_object(pairs: list[tuple[str, Any]]) -> _Mapping:
    mapping = _Mapping()
    for key, value in pairs:
        if key in mapping:
            mapping.duplicates.append((key, None))
        mapping[key] = value
    return mapping


def read_file(path: str | os.PathLike[str], errors: list[tuple[str, str]] | None = None) -> Any:
    """Decode a YAML or JSON (by ``.json`` extension) file; ConfigError naming the file.

    With ``errors``, duplicate keys are appended there instead of raised.
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise ConfigError([("", "config file not found")], name) from None
    except IsADirectoryError:
        raise ConfigError([("", "is a directory, expected a config file")], name) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([("", f"cannot read config file: {exc}")], name) from None
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
    are appended to ``errors`` when given, else raised.
    """
    try:
        if as_json:
            data = json.loads(text, object_pairs_hook=_json_object)
        else:
            documents = list(yaml.load_all(text, Loader=StrictLoader))
            documents = [doc for doc in documents if doc is not None]
            if len(documents) > 1:
                raise ConfigError(
                    [("", f"expected one YAML document, found {len(documents)}")], source
                )
            data = documents[0] if documents else None
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [("", f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}")], source
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError([("", f"invalid YAML: {_yaml_problem(exc)}")], source) from None
    if data is None:
        raise ConfigError([("", "the configuration is empty")], source)
    duplicates: list[tuple[str, str]] = []
    data = _plain(data, "", duplicates)
    if errors is not None:
        errors.extend(duplicates)
    elif duplicates:
        raise ConfigError(duplicates, source)
    return data


def _plain(data: Any, path: str, errors: list[tuple[str, str]]) -> Any:
    """Plain dicts/lists; report duplicate and non-string keys with their paths."""
    if isinstance(data, Mapping):
        for key, line in getattr(data, "duplicates", ()):
            where = f" (again at line {line})" if line is not None else ""
            errors.append((join_path(path, str(key)), f"duplicate field {quote(key)}{where}"))
        out = {}
        for key, value in data.items():
            if not isinstance(key, str):
                errors.append((path, f"keys must be strings, got {describe(key)}"))
                continue
            out[key] = _plain(value, join_path(path, key), errors)
        return out
    if isinstance(data, list):
        return [_plain(item, f"{path}[{i}]", errors) for i, item in enumerate(data)]
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"{problem} at line {mark.line + 1} column {mark.column + 1}"
    return problem
