"""Per-cycle scratch space shared by a pod's plugins (PreFilter -> Filter ...)."""

from __future__ import annotations

from typing import Any


class CycleState:
    """Data one plugin passes from an early extension point to a later one.

    Keys are private to the plugin that writes them (``"PreFilter" + NAME``,
    ``"PreScore" + NAME``), read through a typed getter in the plugin's module.
    Reading a missing key raises ``KeyError`` naming it. ``clone`` copies each
    value that has a ``clone()`` method (kube's StateData.Clone) and shares the
    others, which must then never be changed in place.
    """

    __slots__ = ("_data", "skip_filter_plugins", "skip_score_plugins", "narrowed_by", "record_plugin_metrics")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter_plugins: set[str] = set()
        self.skip_score_plugins: set[str] = set()
        # PreFilter plugins whose PreFilterResult narrowed the candidate nodes.
        self.narrowed_by: list[str] = []
        # Whether this cycle records per-plugin durations (drawn once per cycle, at PreFilter).
        self.record_plugin_metrics = False

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str) -> Any:
        try:
            return self._data[key]
        except KeyError:
            raise KeyError(f"cycle state has no {key!r}: its PreFilter/PreScore did not run") from None

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def clone(self) -> CycleState:
        other = CycleState()
        other._data = {key: value.clone() if hasattr(value, "clone") else value
                       for key, value in self._data.items()}
        other.skip_filter_plugins = set(self.skip_filter_plugins)
        other.skip_score_plugins = set(self.skip_score_plugins)
        other.narrowed_by = list(self.narrowed_by)
        other.record_plugin_metrics = self.record_plugin_metrics
        return other
