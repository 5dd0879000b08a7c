"""The plugin kit (issue 21): ``scorer.plugin`` is all a plugin distribution imports, the contrib
plugins keep to it, the plugin API version a distribution declares is checked before it registers,
and the metric snippets of the docs run as written."""

from __future__ import annotations

import ast
import re
import textwrap
import types
from pathlib import Path

import numpy as np
import pytest
import scorer_loadaware
import scorer_networkaware
import scorer_networktraffic
from pluginkit import kit_violations

import scorer.plugin
import scorer.sources
from scorer import registry as registry_module
from scorer.framework import events
from scorer.hookspecs import API_DECLARATION, PLUGIN_API_VERSION
from scorer.plugin import (
    DataPolicyArgs,
    InFlightArgs,
    NodeBatch,
    NodeMappingArgs,
    RowMemo,
    SourceArgs,
    fill_query,
    hookimpl,
    metric_reader,
)
from scorer.testing import build_registry, make_cache, make_handle, make_node, make_pod, make_source_hub, run_plugin

REPO = Path(__file__).resolve().parents[1]
CONTRIB = REPO / "contrib_plugins"
# -- contrib plugins import only the kit ------------------------------------------------------------


CONTRIB_FILES = sorted(p for p in CONTRIB.rglob("*.py")
                       if not any(part in ("build", "__pycache__") or part.endswith(".egg-info")
                                  for part in p.relative_to(CONTRIB).parts))


def test_every_contrib_plugin_is_checked():
    names = {p.relative_to(CONTRIB).as_posix() for p in CONTRIB_FILES}
    for plugin in ("loadaware", "networkaware", "networktraffic"):
        assert {f"{plugin}/scorer_{plugin}/__init__.py", f"{plugin}/scorer_{plugin}/plugin.py",
                f"{plugin}/tests/test_{plugin}.py"} <= names


@pytest.mark.parametrize("path", CONTRIB_FILES, ids=lambda p: p.relative_to(CONTRIB).as_posix())
def test_contrib_plugins_import_only_the_kit(path):
    found = kit_violations(path, CONTRIB)
    assert not found, "a contrib plugin imports scorer's internals:\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("where", "source", "expected"),
    [
        ("p/scorer_p/plugin.py", "from scorer.plugin import Status\nimport numpy\nimport scorer_p.plugin\n", []),
        ("p/scorer_p/plugin.py", "from scorer.testing import make_pod\n", ["imports scorer.testing"]),
        ("p/tests/test_p.py", "from scorer.testing import make_pod\nfrom scorer import plugin\n", []),
        ("p/scorer_p/plugin.py", "from scorer.framework import Status\n", ["imports scorer.framework"]),
        ("p/scorer_p/plugin.py", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from scorer.model import Pod\n", ["imports scorer.model"]),
        ("p/scorer_p/plugin.py", "def f():\n    import scorer.sources.query\n", ["imports scorer.sources.query"]),
        ("p/tests/test_p.py", "from scorer import cli, testing\n", ["imports scorer.cli"]),
        ("p/scorer_p/plugin.py", "import scorer\n", ["imports scorer "]),
    ],
)
def test_the_kit_check_finds(tmp_path, where, source, expected):
    path = tmp_path / where
    path.parent.mkdir(parents=True)
    path.write_text(source)
    found = kit_violations(path, tmp_path)
    assert len(found) == len(expected)
    for line, text in zip(found, expected, strict=True):
        assert text in line


def test_the_kit_exports_what_the_contrib_plugins_use():
    exported = {name for name in vars(scorer.plugin) if not name.startswith("_")}
    used = {alias.name for path in CONTRIB_FILES
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.module == "scorer.plugin" for alias in node.names}
    assert {"hookimpl", "PluginRegistry", "NodeBatch", "metric_reader", "fill_query"} <= used <= exported
    for name in exported:  # each named in the module's docstring; the events' resources and actions as a group
        if not (name.isupper() and getattr(events, name, None) == getattr(scorer.plugin, name)):
            assert f"``{name}``" in (scorer.plugin.__doc__ or ""), name
    assert scorer.plugin.PLUGIN_API_VERSION == PLUGIN_API_VERSION == "1.0"


@pytest.mark.parametrize("module", [scorer_loadaware, scorer_networkaware, scorer_networktraffic])
def test_each_contrib_plugin_declares_the_plugin_api(module):
    assert getattr(module, API_DECLARATION) == PLUGIN_API_VERSION
    assert not build_registry(autoload=False, modules=[module]).failures


# -- the plugin API version a distribution declares -------------------------------------------------


def distribution(name: str, **declared: object) -> types.ModuleType:
    """An entry-point module registering plugin ``name`` (a per-node score), with ``declared`` as its
    module-level names (``SCORER_PLUGIN_API=...``)."""
    module = types.ModuleType(name)

    class Plugin:
        def score(self, state, pod, node):
            return 0

    @hookimpl
    def scorer_register_plugins(registry):
        registry.register(name, lambda args, handle: Plugin(), plugin_type=Plugin)

    module.scorer_register_plugins = scorer_register_plugins
    for key, value in declared.items():
        setattr(module, key, value)
    return module


@pytest.mark.parametrize(
    ("provided", "declared", "reason"),
    [
        ("1.0", None, ""),  # written before the API had versions: 1.0
        ("1.0", "1.0", ""),
        ("1.3", "1.1", ""),  # an older minor: what it uses is still there
        ("1.3", "1.3", ""),
        ("1.0", "1.1", "built for plugin API 1.1 (SCORER_PLUGIN_API), but scorer {v} provides plugin API 1.0: "
                       "upgrade scorer to a release that provides plugin API 1.1"),
        ("1.0", "2.0", "built for plugin API 2.0 (SCORER_PLUGIN_API), but scorer {v} provides plugin API 1.0: "
                       "install a release of tier built for plugin API 1.x"),
        ("2.1", "1.0", "built for plugin API 1.0 (SCORER_PLUGIN_API), but scorer {v} provides plugin API 2.1: "
                       "install a release of tier built for plugin API 2.x"),
        ("1.0", 1.0, 'SCORER_PLUGIN_API must be the plugin API version it was built for, "MAJOR.MINOR" such as '
                     '"1.0", got 1.0'),
        ("1.0", "1", 'SCORER_PLUGIN_API must be the plugin API version it was built for, "MAJOR.MINOR" such as '
                     "\"1.0\", got '1'"),
        ("1.0", "v1.0", 'got \'v1.0\''),
    ],
)
def test_a_distribution_for_another_plugin_api_is_refused(monkeypatch, provided, declared, reason):
    monkeypatch.setattr(registry_module, "PLUGIN_API_VERSION", provided)
    module = distribution("tier") if declared is None else distribution("tier", SCORER_PLUGIN_API=declared)
    built = build_registry(autoload=False, modules=[module, distribution("other", SCORER_PLUGIN_API=provided)])
    assert "other" in built.plugins  # the others load as if it were not installed
    if not reason:
        assert "tier" in built.plugins and not built.failures
        return
    [failure] = built.failures
    assert "tier" not in built.plugins and failure.plugins == ()  # refused before its hook ran
    assert failure.entry_point == failure.distribution == "tier"
    assert reason.format(v=scorer.__version__) in failure.error
    assert failure.describe().startswith("tier (entry point tier) failed to load: ")


# -- query templates ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mapping", "by"),
    [
        (NodeMappingArgs(), "node, kubernetes_node, nodename, instance"),
        (NodeMappingArgs(by="label", label="host"), "host"),
        (NodeMappingArgs(by="instance"), "instance"),
        (NodeMappingArgs(by="uname"), "instance"),  # joined with node_uname_info on instance
    ],
)
def test_fill_query_fills_by_from_the_node_mapping(mapping, by):
    template = 'sum by ({by}) (rate(bytes_total{device=~"{device}", mode="x{1,2}"}[{range}]))'
    filled = fill_query(template, SourceArgs(node_mapping=mapping), device="eth0", range="60s")
    assert filled == f'sum by ({by}) (rate(bytes_total{{device=~"eth0", mode="x{{1,2}}"}}[60s]))'
    assert fill_query("avg by ({by}) (m)", SourceArgs(node_mapping=mapping)) == f"avg by ({by}) (m)"


# -- the metric reader keeps what a plugin derives -----------------------------------------------------


def test_row_memo_computes_a_new_key_on_the_batch_and_keeps_a_repeated_one():
    names = [f"n{i}" for i in range(6)]
    hub = make_source_hub({"m": {n: float(i) for i, n in enumerate(names)}})
    reader = metric_reader(make_handle(hub), "P", "m", address="", query="m", source=SourceArgs(),
                           policy=DataPolicyArgs())
    cache = make_cache([make_node(n) for n in names])
    calls = []

    def compute(reading, nodes, key):
        calls.append(len(nodes))
        return (reading.values * key,)

    memo = RowMemo(reader, compute)
    batch = NodeBatch(cache.table, cache.table.rows()[1:4])
    for key, size in ((2.0, 3), (2.0, 6), (2.0, None), (3.0, 3), (2.0, 3), (2.0, None)):
        (out,) = memo.get(reader.read(batch), batch, key)
        assert out.tolist() == [key * v for v in (1.0, 2.0, 3.0)]
        assert calls.pop() == size if size is not None else not calls  # None: from the rows kept


def test_per_table_and_in_flight_load_are_kept_by_the_reader():
    clock = [1_000_000.0]
    hub = make_source_hub({"m": {"a": 1.0, "b": 3.0}}, clock=lambda: clock[0])
    pods = {"p1": 2.0, "p2": 5.0}
    reader = metric_reader(make_handle(hub), "P", "m", address="", query="m", source=SourceArgs(),
                           policy=DataPolicyArgs(in_flight=InFlightArgs()), pod_estimate=lambda pod: pods[pod.name])
    cache = make_cache([make_node("a"), make_node("b")])
    seen = []

    def largest(reading, nodes):
        seen.append(nodes.names)
        return float(np.nanmax(reading.values))

    one = NodeBatch(cache.table, cache.table.rows()[:1])
    assert reader.read(one).per_table(largest) == 3.0
    assert reader.read(one).per_table(largest) == 3.0
    assert seen == [["a", "b"]]  # once per reading, over every node
    hub.in_flight.placed(make_pod("p1"), "a", at=clock[0])
    hub.in_flight.placed(make_pod("p2"), "a", at=clock[0])
    every = NodeBatch(cache.table, cache.table.rows())
    assert reader.read(every).in_flight_load().tolist() == [7.0, 0.0]
    plain = metric_reader(make_handle(hub), "Q", "m", address="", query="m", source=SourceArgs(),
                          policy=DataPolicyArgs())
    with pytest.raises(ValueError, match="pod_estimate"):
        plain.read(every).in_flight_load()


# -- the docs' metric snippets run as written -----------------------------------------------------------

AUTO_BY = "node, kubernetes_node, nodename, instance"


def contrib_readme_snippet() -> tuple[str, str]:
    """The Metrics snippet of contrib_plugins/README.md: (what runs in ``__init__``, in ``score_batch``)."""
    text = (CONTRIB / "README.md").read_text(encoding="utf-8")
    [block] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "metric_reader(" in b]
    code = textwrap.dedent(block)
    init, score = code.split("# MyPlugin.score_batch(self, state, pod, nodes):\n")
    assert "# MyPlugin.__init__(self, args, handle):" in init
    return init, score


def snippet_args() -> types.SimpleNamespace:
    return types.SimpleNamespace(address="http://prom.test:9090", source=SourceArgs(), policy=DataPolicyArgs())


def test_the_contrib_readme_metric_snippet_fills_by_and_scores():
    init, score = contrib_readme_snippet()

    class MyPlugin:
        name = "MyPlugin"

        def __init__(self, args, handle):
            exec(init, {}, {"self": self, "args": args, "handle": handle, "NAME": self.name})

        def score_batch(self, state, pod, nodes):
            def my_scores(reading):  # busier nodes score lower
                return (100 - np.nan_to_num(reading.values) * 100).astype(np.int64)

            scope = {"self": self, "state": state, "pod": pod, "nodes": nodes, "my_scores": my_scores}
            exec(score, {}, scope)
            return scope["scores"]

    prometheus = MyPlugin(snippet_args(), make_handle())
    assert prometheus.reader.source.spec.promql == f"avg by ({AUTO_BY}) (my_metric)"
    snapshot = MyPlugin(snippet_args(), make_handle(make_source_hub({"my_metric": {"a": 0.2, "b": 0.9}})))
    run = run_plugin(snapshot, make_pod("p"), [make_node("a"), make_node("b"), make_node("c")])
    assert run.raw_scores == {"a": 80, "b": 10, "c": 50}  # c has no value: the policy's neutral score


def test_the_sources_docstring_snippet_fills_by_and_reads():
    doc = scorer.sources.__doc__ or ""
    block = doc.split("policy; plugins import both through ``scorer.plugin``::\n", 1)[1].split("\n\n", 2)
    code = textwrap.dedent(block[0] + "\n\n" + block[1])
    assert "fill_query(" in code and "reader.read(nodes)" in code
    cache = make_cache([make_node("a"), make_node("b")])
    scope = {"handle": make_handle(make_source_hub({"cpu_utilization": {"a": 0.5}})), "args": snippet_args(),
             "NAME": "MyPlugin", "nodes": NodeBatch(cache.table, cache.table.rows())}
    exec(code, {}, scope)
    assert scope["reading"].values.tolist()[0] == 0.5 and np.isnan(scope["reading"].values[1])
    prometheus = scope | {"handle": make_handle()}
    exec(code, {}, prometheus)
    assert prometheus["reader"].source.spec.promql == f"avg by ({AUTO_BY}) (cpu_utilization)"

