"""``scorer plugin new``: a plugin distribution that works as written, to start a plugin from.

``new_plugin(name, kind, parent)`` writes ``parent/NAME/`` from the templates
in ``scorer/data/plugin-template/`` (``common/`` for every kind, then the
kind's own plugin module and tests):

* ``pyproject.toml``: the distribution ``scorer-NAME``, its entry point
  ``NAME_`` (hyphens as underscores) in the group ``scorer``;
* ``scorer_NAME_/__init__.py``: ``SCORER_PLUGIN_API`` (this scorer's
  ``PLUGIN_API_VERSION``) and the hook ``scorer_register_plugins``;
* ``scorer_NAME_/plugin.py``: the plugin, in the shape every plugin of
  scorer has (``NAME``, an args class with ``validate``, the plugin class,
  helpers, ``factory``, ``register``), importing only ``scorer.plugin``;
* ``tests/test_NAME_.py``: its tests, importing only ``scorer.plugin`` and
  ``scorer.testing``;
* ``scheduler-config.yaml``: kube-scheduler's default profile with the
  plugin added, with args for scorer's demo cluster (where it changes
  placements); ``README.md``.

Kinds: ``score`` prefers nodes with a label value, ``filter`` keeps pods off
nodes with a label value, ``metric`` scores nodes by a Prometheus metric
(idle CPU) read through the plugin kit's metric reader. The plugin's name is
NAME in CamelCase (``prefer-fast-net``: ``PreferFastNet``). A NAME that is
not lowercase words joined by hyphens, whose plugin or entry point an
installed distribution (or scorer itself) already has, or whose directory
exists, is refused with an ``InputError`` saying why.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Collection
from importlib import resources
from pathlib import Path
from string import Template

import attrs

from scorer import __version__
from scorer.errors import InputError
from scorer.hookspecs import PLUGIN_API_VERSION

KINDS = ("score", "filter", "metric")
NAME_PATTERN = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
NAME_MAX = 40
NAME_RULE = ("lowercase letters and digits in words joined by single hyphens, starting with a letter "
             f"(at most {NAME_MAX} characters), e.g. prefer-fast-net")
TEMPLATES = "plugin-template"


@attrs.frozen(slots=True)
class PluginNames:
    """What NAME names: the distribution, its package and entry point, and the plugin."""

    name: str  # prefer-fast-net: the directory
    distribution: str  # scorer-prefer-fast-net
    package: str  # scorer_prefer_fast_net
    entry_point: str  # prefer_fast_net
    plugin: str  # PreferFastNet


@attrs.frozen(slots=True)
class _Kind:
    """What differs between the kinds besides the plugin module and its tests."""

    summary: str  # after "PLUGIN is a KIND plugin for scorer: "
    details: str  # the README's paragraph on the demo cluster
    config_args: str  # the args in scheduler-config.yaml, as YAML
    weight: int | None  # the profile's weight of the plugin (None: it does not score)


_KINDS = {
    "score": _Kind(
        summary="pods prefer nodes whose label `label` has the value `value`",
        details=("On scorer's demo cluster, node-b1 and node-b2 carry `network-topology=high-speed`: "
                 "pods that kube-scheduler's defaults place on node-a2 go to node-b1."),
        config_args="label: network-topology\nvalue: high-speed\nmatchScore: 100",
        weight=2,
    ),
    "filter": _Kind(
        summary="keeps pods off nodes whose label `label` has the value `value`",
        details=("On scorer's demo cluster, node-a1, node-a2 and gpu-1 are in "
                 "`topology.kubernetes.io/zone=zone-a`: pods that kube-scheduler's defaults place on "
                 "node-a2 go elsewhere."),
        config_args="label: topology.kubernetes.io/zone\nvalue: zone-a",
        weight=None,
    ),
    "metric": _Kind(
        summary="pods prefer nodes with idle CPU, as Prometheus measures it",
        details=("It reads the metric `cpu_utilization` (the query's result, a fraction per node) through "
                 "scorer's metric reader. `scorer simulate` reads the metrics snapshot of the demo cluster "
                 "instead of Prometheus: pods that kube-scheduler's defaults place on node-b1 (62% busy) go to "
                 "node-a2 (24%)."),
        config_args=("address: http://prometheus.monitoring:9090   # not read by scorer simulate\n"
                     "source:\n  refreshInterval: 30s\npolicy:\n  onMissing: neutral"),
        weight=2,
    ),
}
#: The metric kind's reading (a MetricsSnapshot's name for it: the demo cluster's is this one).
METRIC = "cpu_utilization"


def plugin_names(name: str) -> PluginNames:
    """The names NAME gives, or an InputError saying what a NAME must be."""
    if not NAME_PATTERN.fullmatch(name) or len(name) > NAME_MAX:
        raise InputError(f"plugin name {name!r}: expected {NAME_RULE}; it names the distribution scorer-NAME, "
                         "its package scorer_NAME and the plugin (prefer-fast-net: PreferFastNet)")
    if name == "scorer" or name.startswith("scorer-"):
        raise InputError(f"plugin name {name!r}: leave out the 'scorer-' prefix, the distribution is named "
                         "scorer-NAME")
    words = name.split("-")
    return PluginNames(name=name, distribution=f"scorer-{name}", package="scorer_" + "_".join(words),
                       entry_point="_".join(words), plugin="".join(word.capitalize() for word in words))


def new_plugin(name: str, kind: str, parent: str | os.PathLike[str], *, taken_plugins: Collection[str] = (),
               taken_entry_points: Collection[str] = ()) -> list[Path]:
    """Write the distribution ``parent/NAME/`` of a ``kind`` plugin; returns the files written.

    ``taken_plugins`` and ``taken_entry_points`` (what scorer and the installed distributions
    already register) refuse a NAME that would clash with them. Nothing is written unless all
    is: the files go to a temporary directory beside the target, renamed at the end."""
    if kind not in _KINDS:
        raise InputError(f"--kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    names = plugin_names(name)
    if names.plugin in taken_plugins:
        raise InputError(f"plugin name {name!r}: a plugin named {names.plugin} is already registered (by scorer "
                         "or an installed distribution: see scorer plugins); choose another NAME")
    if names.entry_point in taken_entry_points:
        raise InputError(f"plugin name {name!r}: an installed distribution already has the entry point "
                         f"{names.entry_point} in the group scorer; choose another NAME")
    parent = Path(parent)
    target = parent / name
    if target.exists() or target.is_symlink():
        raise InputError(f"{target}: already exists; choose another NAME or --dir")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=parent))
    except OSError as exc:
        raise InputError(f"{parent}: cannot create the plugin here: {exc.strerror or exc}") from None
    try:
        files = _render(names, kind)
        for relative, text in files.items():
            path = scratch / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        scratch.chmod(0o777 & ~_umask())
        os.rename(scratch, target)  # fails if the target appeared meanwhile (a directory, not empty)
    except OSError as exc:
        shutil.rmtree(scratch, ignore_errors=True)
        raise InputError(f"{target}: cannot write the plugin: {exc.strerror or exc}") from None
    return [target / relative for relative in files]


def _render(names: PluginNames, kind: str) -> dict[str, str]:
    """Every file of the distribution, relative to its directory, in the order a reader meets them."""
    spec = _KINDS[kind]
    values = {
        **attrs.asdict(names), "kind": kind, "api": PLUGIN_API_VERSION, "scorer_version": __version__,
        "metric": METRIC, "summary": spec.summary, "details": spec.details,
        "config_args": spec.config_args,
        "weight_line": "" if spec.weight is None else f"        weight: {spec.weight}\n",
    }
    config_values = values | {"config_args": _indent(spec.config_args, 6)}
    test_file = f"tests/test_{names.entry_point}.py"
    return {
        "README.md": _template("common/README.md.tmpl", values),
        "pyproject.toml": _template("common/pyproject.toml.tmpl", values),
        "scheduler-config.yaml": _template("common/scheduler-config.yaml.tmpl", config_values),
        f"{names.package}/__init__.py": _template("common/__init__.py.tmpl", values),
        f"{names.package}/plugin.py": _template(f"{kind}/plugin.py.tmpl", values),
        test_file: _template(f"{kind}/test_plugin.py.tmpl", values),
    }


def _template(relative: str, values: dict[str, str]) -> str:
    text = resources.files("scorer.data").joinpath(TEMPLATES, relative).read_text(encoding="utf-8")
    return Template(text).substitute(values)


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


def _umask() -> int:
    """The process's umask (mkdtemp makes its directory 0700; the plugin's is as mkdir would make it)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask
