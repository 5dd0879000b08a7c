"""Field readers of the decoders (``scorer.model.decode``): each reads one field of an API object's dict
and raises ``FieldError`` with the field's path; the ``*_from_dict`` functions add the object's name and
raise ``ModelError``.
"""

from __future__ import annotations

import datetime
import types
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

from scorer.errors import QuantityError
from scorer.inputs.describe import expected, join_path, quote
from scorer.inputs.numbers import int_range_error
from scorer.model.objects import OwnerReference
from scorer.quantity import resource_value

_EMPTY: Mapping[str, Any] = types.MappingProxyType({})
_V = TypeVar("_V")


class FieldError(Exception):
    """A malformed field: ``path`` (``spec.priority``) and what is wrong with it.

    Raised by the parse helpers; ``*_from_dict`` turn it into a ``ModelError``
    naming the object.
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(path, message)
        self.path = path
        self.message = message


def _mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        return _EMPTY
    if type(value) is dict or isinstance(value, Mapping):
        return value
    raise FieldError(join_path(path, key), expected("an object", value))


def _optional_mapping(obj: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
    value = obj.get(key)
    if value is None or type(value) is dict or isinstance(value, Mapping):
        return value
    raise FieldError(join_path(path, key), expected("an object", value))


def _list(obj: Mapping[str, Any], key: str, path: str) -> Sequence[Any]:
    value = obj.get(key)
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return value
    raise FieldError(join_path(path, key), expected("a list", value))


def _mappings(obj: Mapping[str, Any], key: str, path: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(path, item) for each entry of a list of mappings."""
    items = _list(obj, key, path)
    if not items:
        return []
    base = join_path(path, key)
    result = []
    for index, item in enumerate(items):
        item_path = f"{base}[{index}]"
        if type(item) is not dict and not isinstance(item, Mapping):
            raise FieldError(item_path, expected("an object", item))
        result.append((item_path, item))
    return result


def _str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = obj.get(key)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    raise FieldError(join_path(path, key), expected("a string", value))


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    return _str(obj, key, path) or None


def _required_str(obj: Mapping[str, Any], key: str, path: str) -> str:
    value = _str(obj, key, path)
    if not value:
        raise FieldError(join_path(path, key), "required")
    return value


def _choice(
    obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...], what: str = "value"
) -> str:
    """A required string out of ``allowed`` (``what`` names it in the error: value, operator)."""
    value = _str(obj, key, path)
    if value in allowed:
        return value
    choices = ", ".join(allowed)
    if not value:
        raise FieldError(join_path(path, key), f"required, expected one of {choices}")
    raise FieldError(join_path(path, key), f"unknown {what} {quote(value)}, expected one of {choices}")


def _optional_choice(
    obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]
) -> str | None:
    return _choice(obj, key, path, allowed) if obj.get(key) is not None else None


def _optional_int(
    obj: Mapping[str, Any],
    key: str,
    path: str,
    bits: int = 64,
    low: int | None = None,
    high: int | None = None,
) -> int | None:
    """An integer that fits the API's ``bits``-bit type (narrowed to [low, high])."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise FieldError(join_path(path, key), expected("an integer", value))
    problem = int_range_error(value, bits, low, high)
    if problem is not None:
        raise FieldError(join_path(path, key), f"{quote(value)} {problem}")
    return value


def _int_in_range(obj: Mapping[str, Any], key: str, path: str, low: int, high: int) -> int:
    """A required integer in [low, high]."""
    value = _optional_int(obj, key, path)
    if value is None:
        raise FieldError(join_path(path, key), f"required, expected an integer {low}-{high}")
    if not low <= value <= high:
        raise FieldError(join_path(path, key), f"{value} out of range, expected {low}-{high}")
    return value


def _bool(obj: Mapping[str, Any], key: str, path: str) -> bool:
    value = obj.get(key)
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    raise FieldError(join_path(path, key), expected("a boolean (true or false)", value))


def _str_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
    """A map of strings (labels, annotations, nodeSelector). A null value is ""
    as in Go."""
    value = obj.get(key)
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise FieldError(join_path(path, key), expected("a map of strings", value))
    result = dict(value)
    for name, item in result.items():
        if not isinstance(name, str):
            raise FieldError(join_path(path, key), expected("string keys", name))
        if not isinstance(item, str):
            if item is None:
                result[name] = ""
                continue
            raise FieldError(join_path(join_path(path, key), name), expected("a string", item))
    return result


def _str_tuple(obj: Mapping[str, Any], key: str, path: str) -> tuple[str, ...]:
    items = _list(obj, key, path)
    for index, item in enumerate(items):
        if not isinstance(item, str):
            raise FieldError(f"{join_path(path, key)}[{index}]", expected("a string", item))
    return tuple(items)


# Resource maps already decoded, by their items: every node of a cluster repeats the same few
# quantities ("4", "32Gi", "110"), every pod of a workload its containers'. Only maps of strings are
# kept: a string equals no number, so 1, 1.0 and True (a malformed quantity) never find each other's
# entry (``_flat_key`` makes that distinction for other values, at a higher cost).
_RESOURCE_MAPS: dict[Hashable, dict[str, int]] = {}
# Decoded values kept at most per cache (``_remember``), against input made of ever new values.
DECODED_CACHE_SIZE = 1024


def _flat_key(value: object) -> Hashable | None:
    """A key for a cache of decoded values: equal for two values only when both are lists of dicts with
    equal keys in the same order and equal values of the same types (1, 1.0 and True are equal in
    Python, not here; keys need no such care: a decoder reads string keys only, and a string equals no
    other type). None for anything else, or when a value is a list or an object (unhashable): those
    take the careful decode, which no cache stands in for."""
    if type(value) is not list or not all(type(item) is dict for item in value):
        return None
    key = tuple((tuple(item), tuple(item.values()), tuple(map(type, item.values()))) for item in value)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _remember(cache: dict[Hashable, _V], key: Hashable | None, value: _V) -> _V:
    """``value``, kept in ``cache`` under ``key`` (unless None); a full cache is emptied first."""
    if key is not None:
        if len(cache) >= DECODED_CACHE_SIZE:
            cache.clear()
        cache[key] = value
    return value


def _resource_map(obj: Mapping[str, Any], key: str, path: str) -> dict[str, int]:
    """Resource name -> canonical integer; quantities must not be negative."""
    value = obj.get(key)
    if value is None:
        return {}
    if type(value) is dict:
        try:
            decoded = _RESOURCE_MAPS.get(tuple(value.items()))
        except TypeError:  # an unhashable (malformed) quantity
            decoded = None
        if decoded is not None:
            return dict(decoded)  # a copy: callers add defaults to it
    elif not isinstance(value, Mapping):
        raise FieldError(
            join_path(path, key), expected('a map of resource name to quantity like "500m"', value)
        )
    result: dict[str, int] = {}
    for name, quantity in value.items():
        if not isinstance(name, str) or not name:
            raise FieldError(join_path(path, key), expected("resource names as keys", name))
        try:
            amount = resource_value(name, quantity)
        except QuantityError as error:
            raise FieldError(join_path(join_path(path, key), name), str(error)) from None
        if amount < 0:
            raise FieldError(
                join_path(join_path(path, key), name), f"must not be negative, got {quote(quantity)}"
            )
        result[name] = amount
    if type(value) is dict and all(type(quantity) is str for quantity in value.values()):
        _remember(_RESOURCE_MAPS, tuple(value.items()), dict(result))
    return result


def _timestamp(obj: Mapping[str, Any], key: str, path: str) -> str:
    """An RFC 3339 string; YAML turns unquoted timestamps into datetimes."""
    value = obj.get(key)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None and value.utcoffset() == datetime.timedelta(0):
            return value.replace(tzinfo=None).isoformat() + "Z"
        return value.isoformat()
    if isinstance(value, datetime.date):
        return value.isoformat()
    return _str(obj, key, path)


def _owner_reference(obj: Mapping[str, Any], path: str) -> OwnerReference:
    return OwnerReference(
        api_version=_str(obj, "apiVersion", path),
        kind=_required_str(obj, "kind", path),
        name=_required_str(obj, "name", path),
        uid=_str(obj, "uid", path),
        controller=_bool(obj, "controller", path),
    )
