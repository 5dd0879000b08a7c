"""Error types that reach users.

Every error caused by bad input names the input (file, object, field) and
what was expected, so the CLI can print it on one line without a traceback.
"""

from __future__ import annotations

import os

#: Set to anything but "" or "0": the CLI prints the traceback of an internal error, and a plugin
#: that raises has its traceback logged (``scorer.framework.plugincalls``).
DEBUG_ENV = "SCORER_DEBUG"


def debug_enabled() -> bool:
    """Whether ``SCORER_DEBUG`` asks for tracebacks."""
    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


class ScorerError(Exception):
    """Base class of every error scorer raises on purpose."""


class InputError(ScorerError):
    """Bad user input: a config file, a manifest, an API object, a request."""


class ReadError(InputError):
    """A YAML or JSON input that cannot be read (``scorer.inputs.reader``):
    missing, too large, not UTF-8, malformed, nested or aliased past a limit,
    or with a duplicate key or a number that cannot be represented.

    ``source`` names the input (a file name); ``detail`` is the message
    without it, for callers that prefix the source themselves.
    """

    def __init__(self, source: str, detail: str, *, origin: str = "") -> None:
        self.source = source
        self.detail = detail
        where = origin or source
        super().__init__(f"{where}: {detail}" if where else detail)


class QuantityError(InputError):
    """A Kubernetes resource quantity that cannot be parsed."""


class ModelError(InputError):
    """A Kubernetes object (Pod, Node, Namespace) that is malformed.

    The message names the object (``Pod default/web``) and the field path
    (``spec.containers[0].resources.requests.cpu``).
    """


class ConfigError(InputError):
    """An invalid KubeSchedulerConfiguration; holds every field error found."""

    def __init__(self, errors: list[tuple[str, str]], source: str = "") -> None:
        self.errors = list(errors)
        self.source = source
        prefix = f"{source}: " if source else ""
        lines = [f"{prefix}{path}: {msg}" if path else f"{prefix}{msg}" for path, msg in self.errors]
        super().__init__("\n".join(lines))


class BindConflict(ScorerError):
    """The cluster refused a binding for good: the pod is gone or was re-created (the API's 404, or
    a UID precondition failure), or it is already bound or being deleted (409).

    Raised by a ``Binder`` (``scorer.cluster.interface``); defined here, at the bottom of the
    layers, so the DefaultBinder plugin can tell it from other failures. The binding cycle
    forgets the pod and does not retry it: the cluster source shows what became of it.
    """


class UpdateConflict(ScorerError):
    """The cluster refused an update for good: the object is gone, or it changed since it was
    read (its resourceVersion precondition failed: the API's 404 or 409).

    Raised by a ``VolumeWriter`` (``scorer.cluster.interface``) for a PersistentVolume or
    PersistentVolumeClaim; the caller re-reads the object (from its cache) rather than retrying
    the same write. Other exceptions mean failures worth retrying.
    """


class PluginError(ScorerError):
    """A plugin that cannot be registered or built (duplicate name, bad factory)."""
