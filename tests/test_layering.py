"""The layering rule of ``scorer/`` (README "Layout"), checked statically, and imports in isolation.

Layers, from the bottom; a module may import only from its own layer or below:

 0. ``scorer`` (the package ``__init__``, which holds only the version), ``scorer.errors``, ``scorer.inputs``,
    ``scorer.quantity``, ``scorer.metrics``, ``scorer.logsummary``, ``scorer.tasks``, ``scorer.exposition``,
    ``scorer.codecache``, ``scorer.codecache_slot``, ``scorer.startup``
 1. ``scorer.model``
 2. ``scorer.state``
 3. ``scorer.cache``
 4. ``scorer.sources``
 5. ``scorer.framework``
 6. ``scorer.plugins``
 7. ``scorer.config``, ``scorer.queue``
 8. ``scorer.cycle``, ``scorer.scheduler``, ``scorer.binding``, ``scorer.cluster``, ``scorer.kube``,
    ``scorer.eventhandlers``, ``scorer.hookspecs``, ``scorer.registry``, ``scorer.plugin``
 9. ``scorer.assembly``, ``scorer.simulate``, ``scorer.explain``, ``scorer.testing``, ``scorer.cli``,
    ``scorer.service``, ``scorer.extender``, ``scorer.__main__``, ``scorer.data``, ``scorer.bench``,
    ``scorer.scaffold``

Besides, ``scorer.config`` never imports ``scorer.plugins`` (a plugin's args type reaches the
configuration through the catalog: ``PluginInfo.args_type``).

A name covers its submodules (``scorer.plugins`` covers ``scorer.plugins.helper.normalize``), except
``scorer``, which means the package ``__init__`` only (``from scorer import __version__`` is an import
from layer 0). Every import counts: top-level, under ``if TYPE_CHECKING:``, inside ``try``. An import of a
scorer module inside a function or a class body (a lazy import, the usual way to hide a cycle) is a
violation whatever its layer, but for the pairs ``DEFERRED`` names (a start-up cost kept off the other
commands, not a cycle). A module of ``scorer/`` that the rule does not name fails until it is
added to the rule, here and in the README.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "scorer"

LAYERS: dict[str, int] = {
    # The package itself (its __init__ holds only the version) is imported before any of its modules.
    "scorer": 0,
    "scorer.errors": 0, "scorer.inputs": 0, "scorer.quantity": 0, "scorer.metrics": 0, "scorer.logsummary": 0,
    "scorer.tasks": 0, "scorer.exposition": 0, "scorer.codecache": 0, "scorer.codecache_slot": 0,
    "scorer.startup": 0,
    "scorer.model": 1,
    "scorer.state": 2,
    "scorer.cache": 3,
    "scorer.sources": 4,
    "scorer.framework": 5,
    "scorer.plugins": 6,
    "scorer.config": 7, "scorer.queue": 7,
    "scorer.cycle": 8, "scorer.scheduler": 8, "scorer.binding": 8, "scorer.cluster": 8, "scorer.kube": 8,
    "scorer.eventhandlers": 8, "scorer.hookspecs": 8, "scorer.registry": 8, "scorer.plugin": 8,
    "scorer.assembly": 9, "scorer.simulate": 9, "scorer.explain": 9, "scorer.testing": 9, "scorer.cli": 9,
    "scorer.service": 9, "scorer.extender": 9, "scorer.__main__": 9, "scorer.data": 9, "scorer.bench": 9,
    "scorer.scaffold": 9,
}
# (importer, imported): forbidden although the layers allow it.
FORBIDDEN: tuple[tuple[str, str], ...] = (("scorer.config", "scorer.plugins"),)
# (importer, imported): imported inside a function on purpose, where the layers allow it anyway: the bench
# loads when ``scorer bench`` runs, so that ``scorer run``'s start (and every other command's) does not load
# its modules.
DEFERRED: tuple[tuple[str, str], ...] = (("scorer.cli", "scorer.bench.command"),)


def module_name(path: Path) -> str:
    parts = ("scorer", *path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES: dict[str, Path] = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def layer_of(module: str) -> int | None:
    """The layer of the longest rule name covering ``module`` (``scorer`` alone covers only itself)."""
    if module == "scorer":
        return LAYERS["scorer"]
    best = None
    for prefix, layer in LAYERS.items():
        if prefix != "scorer" and (module == prefix or module.startswith(prefix + ".")):
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, layer)
    return None if best is None else best[1]


def imported_modules(module: str, path: Path) -> list[tuple[int, str, bool]]:
    """(line, scorer module imported, inside a function or class) for every import of a scorer module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[tuple[int, str, bool]] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef)
            if isinstance(child, ast.Import):
                found.extend((child.lineno, alias.name, inner) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    package = module.split(".") if is_package else module.split(".")[:-1]
                    package = package[: len(package) - (child.level - 1)]
                    base = ".".join([*package, base] if base else package)
                for alias in child.names:
                    target = f"{base}.{alias.name}"
                    found.append((child.lineno, target if target in MODULES else base, inner))
            visit(child, inner)

    visit(tree, False)
    return [(line, target, nested) for line, target, nested in found
            if target == "scorer" or target.startswith("scorer.")]


def violations(module: str, path: Path) -> list[str]:
    """``file:line: what`` for every import of ``module`` (at ``path``) that breaks the rule."""
    own = layer_of(module)
    where = path.relative_to(ROOT.parent) if path.is_relative_to(ROOT.parent) else path
    if own is None:
        return [f"{where}: module {module} is in no layer: add it to the layering rule "
                "(tests/test_layering.py and the README's Layout section)"]
    out = []
    for line, target, nested in imported_modules(module, path):
        layer = layer_of(target)
        if nested and (module, target) not in DEFERRED:
            out.append(f"{where}:{line}: lazy import of {target} inside a function or class")
        elif layer is None:
            out.append(f"{where}:{line}: imports {target}, which is in no layer")
        elif layer > own:
            out.append(f"{where}:{line}: {module} (layer {own}) imports {target} (layer {layer})")
        elif any(_covers(a, module) and _covers(b, target) for a, b in FORBIDDEN):
            out.append(f"{where}:{line}: {module} imports {target}: {module.split('.')[1]} must not import "
                       f"{target.split('.')[1]}")
    return out


def _covers(prefix: str, module: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_every_module_found():
    assert {"scorer", "scorer.cli", "scorer.__main__", "scorer.errors", "scorer.framework.runtime"} <= set(MODULES)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_layering_rule(module):
    found = violations(module, MODULES[module])
    assert not found, "layering rule broken:\n" + "\n".join(found)


def _check(source: str, tmp_path: Path, module: str = "scorer.plugins.example") -> list[str]:
    """Violations (without their ``file:line:``) of a made-up module holding ``source``."""
    path = tmp_path / "example.py"
    path.write_text(source)
    return [v.split(": ", 1)[1] for v in violations(module, path)]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from scorer.framework import Status\nimport scorer.model\nfrom scorer.plugins.helper import normalize\n",
         []),
        ("from scorer.config.validation import check\n",
         ["scorer.plugins.example (layer 6) imports scorer.config.validation (layer 7)"]),
        ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from scorer.queue import SchedulingQueue\n",
         ["scorer.plugins.example (layer 6) imports scorer.queue (layer 7)"]),
        ("def f():\n    from scorer.errors import InputError\n",
         ["lazy import of scorer.errors inside a function or class"]),
        ("import re\ndef f():\n    import json\n", []),
        ("from scorer.cli import main\n", ["scorer.plugins.example (layer 6) imports scorer.cli (layer 9)"]),
        ("from scorer import plugins, cli\n", ["scorer.plugins.example (layer 6) imports scorer.cli (layer 9)"]),
        ("from . import helper\nfrom ..config import load\n",
         ["scorer.plugins.example (layer 6) imports scorer.config.load (layer 7)"]),
        ("from scorer.nowhere import x\n", ["imports scorer.nowhere, which is in no layer"]),
    ],
)
def test_checker_finds(source, expected, tmp_path):
    for name in ("scorer.cli", "scorer.config.load", "scorer.plugins.helper"):
        assert name in MODULES  # the made-up module's imports resolve against the real tree
    assert _check(source, tmp_path) == expected


def test_checker_finds_config_importing_plugins(tmp_path):
    found = _check("from scorer.plugins.helper import normalize\nfrom scorer.framework import Status\n", tmp_path,
                   module="scorer.config.example")
    assert found == ["scorer.config.example imports scorer.plugins.helper.normalize: config must not import plugins"]


def test_checker_reports_module_outside_the_rule(tmp_path):
    found = _check("", tmp_path, module="scorer.newthing")
    assert found == ["module scorer.newthing is in no layer: add it to the layering rule "
                     "(tests/test_layering.py and the README's Layout section)"]


ISOLATED_IMPORTS = """
import importlib, io, sys
failed = []
for name in sys.argv[1:]:
    for key in [k for k in sys.modules if k == "scorer" or k.startswith("scorer.")]:
        del sys.modules[key]
    argv, stdout = sys.argv, sys.stdout
    try:
        sys.argv, sys.stdout = ["scorer", "--version"], io.StringIO()
        importlib.import_module(name)
    except BaseException as exc:
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
    finally:
        sys.argv, sys.stdout = argv, stdout
print("\\n".join(failed))
"""


@pytest.mark.slow
def test_every_module_imports_in_isolation():
    """Each module imported first, in a fresh set of scorer modules: no module depends on import order."""
    proc = subprocess.run([sys.executable, "-c", ISOLATED_IMPORTS, *sorted(MODULES)], capture_output=True,
                          text=True, timeout=300, cwd=ROOT.parent)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", "modules that fail to import first:\n" + proc.stdout
