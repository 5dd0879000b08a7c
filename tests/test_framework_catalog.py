"""The plugin catalog: a plugin class is checked against the Protocol of every
extension point it claims when it is registered, and the framework's
Protocols are the source of the extension points' methods."""

from __future__ import annotations

import pytest

from scorer.errors import PluginError
from scorer.framework import interface
from scorer.framework.catalog import POINT_METHODS, POINT_PROTOCOLS, PluginRegistry, protocol_methods
from scorer.testing import make_handle


def register(cls, **kwargs):
    registry = PluginRegistry()
    registry.register(cls.__name__, cls, **kwargs)
    return registry.plugins[cls.__name__]


class NotCallable:
    score_batch = 5


class WrongArity:
    def filter_batch(self, state, pod):
        return None


class ReserveOnly:
    def reserve(self, state, pod, node_name):
        return None


class BadNormalize:
    def score(self, state, pod, node):
        return 0

    def normalize_score(self, scores):
        return scores


class BadEvents:
    def filter(self, state, pod, node):
        return None

    def events_to_register(self, event):
        return []


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (NotCallable, "plugin 'NotCallable': score_batch is not callable (int); "
                      "BatchScorePlugin needs score_batch(state, pod, nodes)"),
        (WrongArity, "plugin 'WrongArity': filter_batch(self, state, pod) cannot be called as "
                     "filter_batch(state, pod, nodes) (BatchFilterPlugin)"),
        (ReserveOnly, "plugin 'ReserveOnly': ReservePlugin needs unreserve(state, pod, node_name), "
                      "but unreserve is missing"),
        (BadNormalize, "plugin 'BadNormalize': normalize_score(self, scores) cannot be called as "
                       "normalize_score(state, pod, scores) (ScoreExtensions)"),
        (BadEvents, "plugin 'BadEvents': events_to_register(self, event) cannot be called as "
                    "events_to_register() (EnqueueExtensions)"),
    ],
)
def test_a_plugin_class_that_misses_its_protocol_is_refused(cls, message):
    with pytest.raises(PluginError) as error:
        register(cls)
    assert str(error.value) == message


class Flexible:
    """Static methods, defaults, *args and coroutines all accept the framework's call."""

    @staticmethod
    def filter_batch(state, pod, nodes, extra=None):
        return None

    def score(self, *args):
        return 0

    async def bind(self, state, pod, node_name):
        return None

    def reserve(self, state, pod, node_name):
        return None

    def unreserve(self, state, pod, node_name, **options):
        return None


def test_compatible_signatures_are_accepted():
    assert register(Flexible).extension_points == {"filter", "score", "bind", "reserve"}


def test_plugin_type_must_be_a_class():
    registry = PluginRegistry()
    with pytest.raises(PluginError, match="plugin_type of plugin 'X' must be a class"):
        registry.register("X", lambda args, handle: None, plugin_type=Flexible())


def test_extension_point_methods_come_from_the_protocols():
    assert POINT_METHODS["filter"] == ("filter_batch", "filter")
    assert POINT_METHODS["reserve"] == ("reserve", "unreserve")
    for point, protocols in POINT_PROTOCOLS.items():
        for protocol in protocols:
            assert getattr(protocol, "_is_runtime_protocol", False), protocol
            assert protocol_methods(protocol), (point, protocol)


def test_built_in_plugins_meet_their_protocols(registry):
    for name, info in registry.plugins.items():
        plugin = info.factory(None, make_handle())
        for point in info.extension_points:
            assert any(isinstance(plugin, p) for p in POINT_PROTOCOLS[point]), (name, point)
        # Every plugin that can reject a pod says which events may make it schedulable again.
        can_reject = info.extension_points & {"preEnqueue", "preFilter", "filter"}
        assert isinstance(plugin, interface.EnqueueExtensions) == bool(can_reject), name
