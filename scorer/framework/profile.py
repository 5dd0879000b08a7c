"""What the framework needs of a profile: the shape ``Framework`` is built from.

``scorer.config.ResolvedProfile`` has this shape (the configuration layer is
above the framework, so the framework names the shape instead of importing
the class); so does any object a test or a tool builds by hand.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class FrameworkProfile(Protocol):
    """One profile, resolved: the plugins of each extension point, in order, and their args."""

    @property
    def scheduler_name(self) -> str:
        """The profile's ``schedulerName``."""

    @property
    def percentage_of_nodes_to_score(self) -> int | None:
        """The profile's own percentage; None means the global one applies."""

    @property
    def points(self) -> Mapping[str, Sequence[str]]:
        """Extension point key (``filter``, ``score`` ...) -> plugin names to run there, in order."""

    @property
    def weights(self) -> Mapping[str, int]:
        """Score weight of every plugin of ``points["score"]``."""

    @property
    def args(self) -> Mapping[str, Any]:
        """Args of every plugin that runs anywhere (converted args, raw mapping, or None)."""
