"""Test kit for the plugins' tests: what a plugin's ``events_to_register`` does in a queue, and which
imports of scorer a plugin distribution's files make outside the plugin kit."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from scorer.framework.events import ClusterEvent
from scorer.queue import UNSCHEDULABLE, SchedulingQueue
from scorer.testing import make_pod


def requeues(plugin: Any, event: ClusterEvent) -> bool:
    """Whether ``event`` releases a pod that ``plugin`` rejected from the unschedulable pool
    of a queue wired with the plugin's ``events_to_register`` (as the assembly wires it)."""
    queue = SchedulingQueue(
        lambda a, b: a.timestamp < b.timestamp, plugin_events={plugin.name: plugin.events_to_register()}
    )
    queue.add(make_pod("rejected"))
    info = queue.pop()
    assert info is not None
    assert queue.add_unschedulable_if_not_present(info, unschedulable_plugins=(plugin.name,)) == UNSCHEDULABLE
    return queue.move_all_to_active_or_backoff(event) == 1


KIT = {"scorer.plugin"}  # what a plugin distribution's modules may import of scorer
TEST_KIT = {"scorer.plugin", "scorer.testing"}  # and its tests


def scorer_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) for every import of scorer or a module under it, wherever it is (a function body,
    ``if TYPE_CHECKING:``); ``from scorer import plugin`` imports ``scorer.plugin``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            if node.module == "scorer":
                found.extend((node.lineno, f"scorer.{alias.name}") for alias in node.names)
            else:
                found.append((node.lineno, node.module))
    return [(line, module) for line, module in found if module == "scorer" or module.startswith("scorer.")]


def kit_violations(path: Path, root: Path) -> list[str]:
    """``file:line: imports X`` for each import of scorer outside the kit in ``path``, a file of the
    distributions under ``root`` (their tests, under a ``tests`` folder, may use ``scorer.testing``)."""
    allowed = TEST_KIT if "tests" in path.relative_to(root).parts else KIT
    return [f"{path.relative_to(root)}:{line}: imports {module} (only {', '.join(sorted(allowed))})"
            for line, module in scorer_imports(path) if module not in allowed]
