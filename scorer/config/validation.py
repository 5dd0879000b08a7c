"""Small validation helpers shared by the configuration and plugin args.

Messages follow k8s.io/apimachinery's ``validation.IsQualifiedName`` and
``field.Error`` wording, so errors read like kube-scheduler's.
"""

from __future__ import annotations

import re

from scorer.inputs.describe import join_path, quote

__all__ = ["extended_resource_name_errors", "join_path", "qualified_name_errors", "quote"]

_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_NAME_MAX = 63
_PREFIX_MAX = 253


def qualified_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a qualified name (``[prefix/]name``, as label keys); [] if it is."""
    parts = value.split("/")
    errors: list[str] = []
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        elif len(prefix) > _PREFIX_MAX:
            errors.append(f"prefix part must be no more than {_PREFIX_MAX} characters")
        elif not _DNS1123_SUBDOMAIN.match(prefix):
            errors.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character"
            )
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character, with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _NAME_MAX:
        errors.append(f"name part must be no more than {_NAME_MAX} characters")
    elif not _NAME.match(name):
        errors.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName', 'my.name' or '123-abc')"
        )
    return errors


def extended_resource_name_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid extended resource name (``example.com/gpu``); [] if it is."""
    errors = qualified_name_errors(value)
    if errors:
        return errors
    native = "/" not in value or "kubernetes.io/" in value
    if native or value.startswith("requests.") or qualified_name_errors("requests." + value):
        return ["is an invalid extended resource name"]
    return []
