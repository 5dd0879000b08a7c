"""Strict conversion between decoded YAML/JSON data and attrs classes.

This is how ``pluginConfig[].args`` become typed objects, for built-in and
third-party plugins alike, and how scorer decodes its own configuration.

Contract for a plugin's args class
----------------------------------
A plugin registers an ``args_type``; conventionally an attrs class named
``<PluginName>Args``. ``structure(args_type, data, path, kind="<PluginName>Args")``
turns the ``args`` mapping of the configuration into an instance:

* **Fields and names.** Every attrs field is a key; its JSON name is the
  camelCase form of the field name (``scoring_strategy`` ->
  ``scoringStrategy``). Override it with
  ``attrs.field(metadata={"json": "enableHTTPS"})``. Keys that match no field
  are errors: ``<path>.<key>: unknown field``.
* **Defaults.** An omitted key, or an explicit ``null``, takes the field's
  default; a field without a default is required
  (``<path>.<key>: Required value``). Give every field a default that is
  kube's default for it.
* **Types** (checked strictly; ``true`` is not an int, ``1`` is not a
  string, an int is accepted where a float is expected): ``bool``, ``int``,
  ``float``, ``str``, ``bytes`` (a base64 string), ``datetime.timedelta``
  (a Go duration string such as ``"1m30s"``), ``typing.Literal[...]`` of
  strings, ``enum.Enum`` subclasses (by value), nested attrs classes,
  ``tuple[X, ...]`` and ``list[X]``, ``dict[str, X]`` / ``Mapping[str, X]``,
  ``X | None`` and ``typing.Any`` (passed through as plain data). Integers
  must fit in 64 bits, or 32 with ``metadata={"bits": 32}``. Annotations are
  resolved with ``typing.get_type_hints``, so the class must be defined at
  module level.
* **Defaulting beyond field defaults** (for example "an empty list means cpu
  and memory"): use an attrs ``converter=`` on the field (it also applies
  when the class is built in Python), or define a classmethod
  ``defaulted(cls, **fields) -> Self``. When present, the converter calls it
  instead of the constructor, passing only the keys that were present in
  the data, so it can tell "absent" from "given as zero" (kube's pointer
  fields). ``TypeError``/``ValueError`` raised by the constructor or
  ``defaulted`` become errors at the object's path.
* **Validation.** An optional method ``validate(self) -> list[tuple[str, str]]``
  returns ``(relative path, message)`` pairs: ``""`` is the object itself,
  ``"resources[0].weight"`` a nested field (None or an empty list: no
  problem). It runs after defaulting, on
  every attrs object in the tree (a nested class validates itself, its
  parent only checks what spans several fields). Messages should say what
  was expected: ``must be in 1..100``. A ``validate`` that raises, or returns
  anything but such pairs, is reported as an error at the object's path
  naming the plugin (``owner``), as is a constructor that raises anything
  but TypeError/ValueError.
* **Checked at registration.** ``args_type_problems(cls)`` lists what keeps
  a class from being converted (not an attrs class, a field type outside the
  list above, annotations that cannot be resolved, a ``validate`` that takes
  arguments); the plugin registry refuses such a plugin
  (``scorer.registry``), so these never surface while a configuration is read.
* **Header.** At the top level ``apiVersion`` (any string) and ``kind`` are
  accepted when ``kind`` equals the expected ``<PluginName>Args``.

``unstructure(instance)`` is the inverse for printing: camelCase keys,
``None`` fields omitted, empty collections omitted when that is also the
field's default, durations and bytes back in their string forms.
"""

from __future__ import annotations

import base64
import binascii
import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any, Literal, TypeVar

import attrs

from scorer.errors import ConfigError
from scorer.inputs.describe import describe_value, join_path, quote
from scorer.inputs.duration import format_duration, parse_duration

T = TypeVar("T")

_FAILED: Any = object()  # sentinel: conversion failed, the error is recorded
_INT_BITS = 64
_HEADER_KEYS = ("apiVersion", "kind")


def camel_case(name: str) -> str:
    """``scoring_strategy`` -> ``scoringStrategy``."""
    head, *rest = name.strip("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def json_name(attribute: attrs.Attribute) -> str:  # type: ignore[type-arg]
    """The configuration key of an attrs field."""
    return attribute.metadata.get("json") or camel_case(attribute.name)


def structure(cls: type[T], data: Any, path: str = "", *, kind: str | None = None, owner: str = "") -> T:
    """Convert ``data`` to an instance of the attrs class ``cls``, strictly.

    Raises ConfigError listing every problem, each with its path below ``path``.
    ``owner`` names whose class it is (``plugin "X" (dist 1.0)``) in the errors
    that are the class's own bugs (a ``validate`` that raises).
    """
    errors: list[tuple[str, str]] = []
    result = structure_into(cls, data, path, errors, kind=kind, owner=owner)
    if errors or result is None:
        raise ConfigError(errors or [(path, "cannot be converted")])
    return result


def structure_into(
    cls: type[T], data: Any, path: str, errors: list[tuple[str, str]], *, kind: str | None = None,
    owner: str = "",
) -> T | None:
    """Like ``structure`` but append problems to ``errors``; None if no object could be built.

    An object may be returned together with errors (its ``validate`` failed).
    """
    result = _Converter(errors, owner).object(cls, data, path, kind=kind)
    return None if result is _FAILED else result


_SCALARS = (bool, int, float, str, bytes, timedelta)
_SUPPORTED = ("bool, int, float, str, bytes, datetime.timedelta, Literal[...], an Enum, an attrs class, "
              "tuple[X, ...], list[X], dict[str, X], X | None, Any")


def args_type_problems(cls: Any) -> list[str]:
    """What keeps ``structure`` from converting into ``cls`` (empty: nothing), each problem
    naming the field and what is supported; nested attrs classes are checked too."""
    if not (isinstance(cls, type) and attrs.has(cls)):
        return [f"{_type_name(cls)} is not an attrs class (decorate it with @attrs.frozen)"]
    problems: list[str] = []
    _check_class(cls, cls.__qualname__, problems, set())
    return problems


def _check_class(cls: type, where: str, problems: list[str], seen: set[type]) -> None:
    if cls in seen:
        return
    seen.add(cls)
    try:
        fields = _fields_of(cls)
    except Exception as exc:  # NameError: a forward reference the module does not define
        problems.append(f"{where}: its annotations cannot be resolved ({type(exc).__name__}: {exc}); define the "
                        "class and the types it names at module level")
        return
    for attribute, tp in fields.values():
        _check_type(tp, f"{where}.{attribute.name}", problems, seen)
    validate = getattr(cls, "validate", None)
    if validate is not None and "validate" not in attrs.fields_dict(cls) and not _validate_callable(cls, validate):
        problems.append(f"{where}.validate must be a method taking no arguments (it returns a list of "
                        "(path, message) pairs)")


def _validate_callable(cls: type, validate: Any) -> bool:
    """Whether ``instance.validate()`` can be called (``validate``, looked up on ``cls``): callable,
    no argument but ``self``."""
    if not callable(validate):
        return False
    # A function in the class body is bound to the instance: ``self`` is passed.
    arguments = (None,) if inspect.isfunction(inspect.getattr_static(cls, "validate")) else ()
    try:
        inspect.signature(validate).bind(*arguments)
    except TypeError:
        return False
    except ValueError:  # no signature to read: it is called, and its result checked, when args are read
        return True
    return True


def _check_type(tp: Any, where: str, problems: list[str], seen: set[type]) -> None:
    """Every type ``_Converter.value`` accepts passes; anything else is a problem at ``where``."""
    if tp is Any or tp is object or tp in _SCALARS:
        return
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Union or origin is types.UnionType:
        options = [arg for arg in args if arg is not type(None)]
        if len(options) != 1:
            problems.append(f"{where}: {_type_name(tp)}: unions other than X | None are not supported")
            return
        _check_type(options[0], where, problems, seen)
    elif origin is Literal:
        return
    elif origin in (tuple, list, Sequence):
        if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
            problems.append(f"{where}: {_type_name(tp)}: only tuple[X, ...] is supported")
            return
        _check_type(args[0] if args else Any, f"{where}[]", problems, seen)
    elif origin in (dict, Mapping):
        key_type, item_type = args or (str, Any)
        if key_type is not str:
            problems.append(f"{where}: {_type_name(tp)}: only str keys are supported")
            return
        _check_type(item_type, f"{where}[]", problems, seen)
    elif isinstance(tp, type) and attrs.has(tp):
        _check_class(tp, where, problems, seen)
    elif not (isinstance(tp, type) and issubclass(tp, enum.Enum)):
        problems.append(f"{where}: unsupported field type {_type_name(tp)} (supported: {_SUPPORTED})")


def _type_name(tp: Any) -> str:
    return tp.__qualname__ if isinstance(tp, type) and not typing.get_args(tp) else repr(tp)


def unstructure(value: Any) -> Any:
    """Plain data (dicts with camelCase keys, lists, scalars) for an attrs instance or a value."""
    if attrs.has(type(value)):
        out: dict[str, Any] = {}
        for attribute in attrs.fields(type(value)):
            item = getattr(value, attribute.name)
            if item is None:
                continue
            if isinstance(item, (tuple, list, dict)) and not item and _default_is_empty(attribute):
                continue
            out[json_name(attribute)] = unstructure(item)
        return out
    if isinstance(value, Mapping):
        return {str(key): unstructure(item) for key, item in value.items()}
    if isinstance(value, (tuple, list)):
        return [unstructure(item) for item in value]
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, enum.Enum):
        return value.value
    return value


def plain(data: Any) -> Any:
    """A deep copy of decoded data as plain dicts and lists (``typing.Any`` fields get this)."""
    if isinstance(data, Mapping):
        return {key: plain(item) for key, item in data.items()}
    if isinstance(data, list):
        return [plain(item) for item in data]
    return data


def _pairs(found: Any) -> list[tuple[str, str]] | None:
    """What ``validate()`` returned as a list of ``(path, message)`` pairs (None: no problem);
    None when it is anything else (a string, a list of strings ...)."""
    if found is None:
        return []
    if isinstance(found, (str, bytes, Mapping)) or not isinstance(found, Iterable):
        return None
    pairs = list(found)
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str)):
            return None
    return pairs


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _truncated(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _default_is_empty(attribute: attrs.Attribute) -> bool:  # type: ignore[type-arg]
    default: Any = attribute.default
    if default is attrs.NOTHING:
        return False
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:
            return False
        default = default.factory()
    return default is None or (isinstance(default, (tuple, list, dict)) and not default)


@functools.cache
def _fields_of(cls: type) -> dict[str, tuple[attrs.Attribute, Any]]:  # type: ignore[type-arg]
    hints = typing.get_type_hints(cls)
    return {
        json_name(attribute): (attribute, hints.get(attribute.name, attribute.type))
        for attribute in attrs.fields(cls)
        if attribute.init
    }


class _Converter:
    def __init__(self, errors: list[tuple[str, str]], owner: str = "") -> None:
        self.errors = errors
        self.failures = 0
        self.owner = f" of {owner}" if owner else ""

    def fail(self, path: str, message: str) -> Any:
        """Record a conversion error (validation messages are appended directly)."""
        self.errors.append((path, message))
        self.failures += 1
        return _FAILED

    def object(self, cls: type, data: Any, path: str, kind: str | None = None) -> Any:
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            return self.fail(path, f"expected an object, got {describe_value(data)}")
        fields = _fields_of(cls)
        kwargs: dict[str, Any] = {}
        failures_before = self.failures
        for key, raw in data.items():
            if not isinstance(key, str):
                self.fail(path, f"keys must be strings, got {describe_value(key)}")
                continue
            key_path = join_path(path, key)
            if kind is not None and key in _HEADER_KEYS:
                if not isinstance(raw, str):
                    self.fail(key_path, f"expected a string, got {describe_value(raw)}")
                elif key == "kind" and raw != kind:
                    self.fail(key_path, f"expected {quote(kind)}, got {quote(raw)}")
                continue
            entry = fields.get(key)
            if entry is None:
                self.fail(key_path, "unknown field")
                continue
            if raw is None:  # JSON null leaves the field at its default, as in Go
                continue
            attribute, tp = entry
            value = self.value(tp, raw, key_path, attribute.metadata)
            if value is not _FAILED:
                kwargs[attribute.alias or attribute.name] = value
        for key, (attribute, _) in fields.items():
            # absent or null; a value that failed to convert is already reported
            if attribute.default is attrs.NOTHING and data.get(key) is None:
                self.fail(join_path(path, key), "Required value")
        if self.failures > failures_before:
            return _FAILED
        factory = getattr(cls, "defaulted", None) or cls
        try:
            obj = factory(**kwargs)
        except (TypeError, ValueError) as exc:
            return self.fail(path, str(exc))
        except Exception as exc:  # a bug in the args class: name it, and whose it is
            return self.fail(path, f"{cls.__qualname__}{self.owner} cannot be built: {_raised(exc)}")
        validate = getattr(obj, "validate", None)
        if callable(validate):
            self.validated(obj, validate, path)
        return obj

    def validated(self, obj: Any, validate: Any, path: str) -> None:
        """The errors ``obj.validate()`` returns, at their paths below ``path``; a ``validate`` that
        raises or returns anything but ``(path, message)`` pairs is an error naming the class and owner."""
        name = f"{type(obj).__qualname__}.validate(){self.owner}"
        try:
            found = validate()
            pairs = _pairs(found)  # (a generator's code runs here)
        except Exception as exc:
            self.fail(path, f"{name} raised {_raised(exc)}")
            return
        if pairs is None:
            self.fail(path, f"{name} returned {_truncated(found)}, expected a list of (path, message) pairs "
                            'of strings, such as [("weight", "must be in 1..100")]')
            return
        for relative, message in pairs:
            self.errors.append((join_path(path, relative), message))

    def value(self, tp: Any, data: Any, path: str, metadata: Mapping[str, Any]) -> Any:
        if tp is Any or tp is object:
            return plain(data)
        origin = typing.get_origin(tp)
        if origin is typing.Union or origin is types.UnionType:
            options = [arg for arg in typing.get_args(tp) if arg is not type(None)]
            if data is None:
                return None
            if len(options) != 1:
                raise TypeError(f"{path}: unions other than X | None are not supported ({tp})")
            return self.value(options[0], data, path, metadata)
        if origin is Literal:
            allowed = typing.get_args(tp)
            if not any(type(data) is type(option) and data == option for option in allowed):
                supported = ", ".join(quote(a) for a in allowed)
                return self.fail(
                    path, f"Unsupported value: {quote(data)}: supported values: {supported}"
                )
            return data
        if origin in (tuple, list, Sequence):
            args = typing.get_args(tp)
            if origin is tuple and (len(args) != 2 or args[1] is not Ellipsis):
                raise TypeError(f"{path}: only tuple[X, ...] is supported ({tp})")
            if not isinstance(data, list):
                return self.fail(path, f"expected a list, got {describe_value(data)}")
            item_type = args[0] if args else Any
            items = [self.value(item_type, item, f"{path}[{i}]", {}) for i, item in enumerate(data)]
            if any(item is _FAILED for item in items):
                return _FAILED
            return items if origin is list else tuple(items)
        if origin in (dict, Mapping):
            key_type, item_type = typing.get_args(tp) or (str, Any)
            if key_type is not str:
                raise TypeError(f"{path}: only str keys are supported ({tp})")
            if not isinstance(data, Mapping):
                return self.fail(path, f"expected an object, got {describe_value(data)}")
            out = {}
            for key, item in data.items():
                if not isinstance(key, str):
                    return self.fail(path, f"keys must be strings, got {describe_value(key)}")
                out[key] = self.value(item_type, item, join_path(path, key), {})
            if any(item is _FAILED for item in out.values()):
                return _FAILED
            return out
        if isinstance(tp, type) and attrs.has(tp):
            return self.object(tp, data, path)
        if isinstance(tp, type) and issubclass(tp, enum.Enum):
            try:
                return tp(data)
            except ValueError:
                supported = ", ".join(quote(member.value) for member in tp)
                return self.fail(
                    path, f"Unsupported value: {quote(data)}: supported values: {supported}"
                )
        return self.scalar(tp, data, path, metadata)

    def scalar(self, tp: Any, data: Any, path: str, metadata: Mapping[str, Any]) -> Any:
        if tp is bool:
            if isinstance(data, bool):
                return data
            return self.fail(path, f"expected a boolean, got {describe_value(data)}")
        if tp is int:
            if not isinstance(data, int) or isinstance(data, bool):
                return self.fail(path, f"expected an integer, got {describe_value(data)}")
            bits = metadata.get("bits", _INT_BITS)
            if not -(2 ** (bits - 1)) <= data < 2 ** (bits - 1):
                return self.fail(path, f"must fit in a {bits}-bit integer, got {data}")
            return data
        if tp is float:
            if isinstance(data, bool) or not isinstance(data, (int, float)):
                return self.fail(path, f"expected a number, got {describe_value(data)}")
            return float(data)
        if tp is str:
            if isinstance(data, str):
                return data
            return self.fail(path, f"expected a string, got {describe_value(data)}")
        if tp is timedelta:
            if not isinstance(data, str):
                return self.fail(
                    path, f'expected a duration string such as "1m30s", got {describe_value(data)}'
                )
            try:
                return parse_duration(data)
            except ValueError as exc:
                return self.fail(
                    path, f'{exc} (expected a duration such as "15s", "1m30s", "100ms")'
                )
        if tp is bytes:
            if not isinstance(data, str):
                return self.fail(path, f"expected a base64 string, got {describe_value(data)}")
            try:
                return base64.b64decode(re.sub(r"\s+", "", data), validate=True)
            except (binascii.Error, ValueError):
                return self.fail(path, "expected a base64 string, got invalid base64")
        raise TypeError(f"{path}: unsupported field type {tp!r}")
