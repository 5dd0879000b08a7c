"""Kubernetes name validators, with k8s.io/apimachinery's wording.

``qualified_name_errors`` is ``validation.IsQualifiedName`` (label keys,
resource names); ``label_value_errors`` is ``validation.IsValidLabelValue``;
``extended_resource_name_errors`` is the API's check of an
extended resource name (``example.com/gpu``). Both return the reasons a
value is invalid, [] when it is valid. The configuration and the plugins'
args use them, so they live below both.
"""

from __future__ import annotations

import re

from scorer.inputs.describe import quote

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_NAME_MAX = 63
_LABEL_VALUE_MAX = 63
_PREFIX_MAX = 253


def dns_subdomain_error(value: str) -> str | None:
    """Why ``value`` is not a DNS subdomain (RFC 1123, at most 253 characters: the names of nodes and most
    objects), in k8s.io/apimachinery's words; None when it is one. A long value is shown shortened."""
    shown = quote(value)
    if not value:
        return "required"
    if len(value) > _PREFIX_MAX:
        return f"{shown} ({len(value)} characters): must be no more than {_PREFIX_MAX} characters"
    if _DNS1123_SUBDOMAIN.fullmatch(value) is None:
        return (f"{shown}: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
                "'-' or '.', and must start and end with an alphanumeric character")
    return None


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a qualified name (``[prefix/]name``, as label keys); [] if it is."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        errors += _part_errors(
            "prefix",
            prefix,
            _PREFIX_MAX,
            _DNS1123_SUBDOMAIN,
            malformed="a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character",
        )
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character, with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    errors += _part_errors(
        "name",
        name,
        _NAME_MAX,
        _NAME,
        malformed="must consist of alphanumeric characters, '-', '_' or '.', and must start "
        "and end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')",
    )
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value (empty, or a name of at most 63 characters); [] if it is."""
    if not value:
        return []
    if len(value) > _LABEL_VALUE_MAX:
        return [f"must be no more than {_LABEL_VALUE_MAX} characters"]
    if not _NAME.match(value):
        return [
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
            "or '.', and must start and end with an alphanumeric character"
        ]
    return []


def _part_errors(part: str, value: str, max_length: int, pattern: re.Pattern[str], malformed: str) -> list[str]:
    """The first thing wrong with the ``part`` ("prefix", "name") of a qualified name."""
    if not value:
        return [f"{part} part must be non-empty"]
    if len(value) > max_length:
        return [f"{part} part must be no more than {max_length} characters"]
    if not pattern.fullmatch(value):
        return [f"{part} part {malformed}"]
    return []


def extended_resource_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid extended resource name (``example.com/gpu``); [] if it is."""
    errors = qualified_name_errors(value)
    if errors:
        return errors
    native = "/" not in value or "kubernetes.io/" in value
    if native or value.startswith("requests.") or qualified_name_errors("requests." + value):
        return ["is an invalid extended resource name"]
    return []
