"""Plugin registry: pluggy manager built by a factory, built-ins, entry points,
duplicates, autoload switch, broken entry points, and the hook contract."""

from __future__ import annotations

import importlib.metadata
import inspect

from scorer import hookspecs
from scorer.hookspecs import hookimpl
from scorer.registry import build_registry, extension_points_of

BUILTINS = {"PrioritySort", "NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit",
            "DefaultBinder"}


class Module:
    def __init__(self, name, *plugins):
        self.__name__ = name
        self.plugins = plugins

    @hookimpl
    def scorer_register_plugins(self, registry):
        for plugin_name, cls in self.plugins:
            registry.register(plugin_name, lambda args, handle, cls=cls: cls(), plugin_type=cls)


class ScoreOnly:
    name = "ScoreOnly"

    def score(self, state, pod, node):
        return 0


def test_builtins_are_registered_with_their_points(registry):
    assert BUILTINS <= set(registry.plugins)
    fit = registry.plugins["NodeResourcesFit"]
    assert fit.extension_points == {"preFilter", "filter", "preScore", "score"}
    assert fit.args_type is not None and fit.args_type.__name__ == "NodeResourcesFitArgs"
    assert registry.plugins["PrioritySort"].extension_points == {"queueSort"}
    assert registry.plugins["DefaultBinder"].extension_points == {"bind"}
    assert fit.source == "scorer"


def test_each_call_builds_a_fresh_registry():
    assert build_registry(autoload=False) is not build_registry(autoload=False)
    first = build_registry(autoload=False, modules=[Module("m1", ("ScoreOnly", ScoreOnly))])
    assert "ScoreOnly" in first.plugins
    assert "ScoreOnly" not in build_registry(autoload=False).plugins


def test_a_clashing_name_fails_the_later_distribution_and_names_both():
    registry = build_registry(autoload=False, modules=[Module("dist_one", ("ScoreOnly", ScoreOnly)),
                                                       Module("dist_two", ("ScoreOnly", ScoreOnly))])
    assert registry.plugins["ScoreOnly"].source == "dist_one"
    [failure] = registry.failures
    assert (failure.entry_point, failure.distribution, failure.plugins) == ("dist_two", "dist_two", ("ScoreOnly",))
    assert failure.error == ("plugin 'ScoreOnly' is already registered by dist_one: plugin names are unique; "
                             "rename yours")
    # A built-in's name: the distribution fails, the built-in stays.
    registry = build_registry(autoload=False, modules=[Module("mine", ("NodeName", ScoreOnly))])
    assert registry.plugins["NodeName"].source == "scorer"
    assert "already registered by scorer " in registry.failures[0].error


def test_plugin_without_extension_points_is_rejected():
    class Nothing:
        name = "Nothing"

    registry = build_registry(autoload=False, modules=[Module("m", ("ScoreOnly", ScoreOnly), ("Nothing", Nothing))])
    assert "ScoreOnly" not in registry.plugins  # all or nothing: the distribution's other plugin goes too
    [failure] = registry.failures
    assert failure.plugins == ("ScoreOnly", "Nothing")
    assert "plugin 'Nothing' implements no extension point: pass plugin_type=" in failure.error


def test_extension_points_of():
    assert extension_points_of(ScoreOnly) == {"score"}


class FakeDist:
    name = "broken-dist"
    version = "9.9"


class FakeEntryPoint:
    def __init__(self, name, target):
        self.name = name
        self.value = f"{name}_module"
        self.dist = FakeDist()
        self._target = target

    def load(self):
        if isinstance(self._target, Exception):
            raise self._target
        return self._target


def test_entry_points_are_loaded_one_by_one_and_failures_recorded(monkeypatch):
    good = Module("good_ep", ("ScoreOnly", ScoreOnly))
    eps = [FakeEntryPoint("broken", ImportError("no module named nowhere")), FakeEntryPoint("good", good)]

    def fake_entry_points(group):
        assert group == "scorer"
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    registry = build_registry(autoload=True)
    assert "ScoreOnly" in registry.plugins
    assert registry.plugins["ScoreOnly"].source == "broken-dist"  # FakeDist names both
    assert registry.plugins["ScoreOnly"].version == "9.9"
    [failure] = registry.failures
    assert failure.entry_point == "broken"
    assert failure.error == "cannot import broken_module: ImportError: no module named nowhere"
    # Blocked entry points are not loaded; autoload off loads none.
    assert "ScoreOnly" not in build_registry(autoload=True, blocked=["good"]).plugins
    assert "ScoreOnly" not in build_registry(autoload=False).plugins
    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")
    assert "ScoreOnly" not in build_registry().plugins


def test_every_hook_is_documented_and_tested():
    hooks = [name for name, obj in inspect.getmembers(hookspecs, inspect.isfunction)
             if name.startswith("scorer_")]
    assert hooks, "no hooks found"
    tested = {"scorer_register_plugins"}  # exercised by every test in this file
    for name in hooks:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert "When:" in doc and "Params:" in doc and "Returns:" in doc, f"{name} lacks a full docstring"
        assert name in tested, f"hook {name} has no test"
