"""kube-scheduler's configuration file (KubeSchedulerConfiguration), read as kube-scheduler does.

``load_config`` decodes strictly, applies the defaults of the file's API
version (v1, v1beta3, v1beta2, v1beta1) and validates; ``resolve_config``
turns each profile into the ordered plugin lists, weights and args the
framework runs; ``load_and_resolve`` does both in one pass and reports every
problem at once; ``effective_config`` and ``describe_resolved`` print them.
Plugin args are converted by ``structure`` (see ``scorer.config.convert``
for the contract args classes follow).
"""

from scorer.config import types
from scorer.config.convert import structure, structure_into, unstructure
from scorer.config.defaults import KUBE_PLUGINS, REMOVED_PLUGINS, default_plugins
from scorer.config.load import (
    decode_config,
    load_and_resolve,
    load_config,
    load_config_text,
    merge_plugin_set,
)
from scorer.config.render import describe_resolved, effective_config, validate_file
from scorer.config.resolve import resolve_config, resolve_profile
from scorer.config.types import *  # noqa: F403  (the names of types.__all__, re-exported below)
from scorer.inputs.duration import format_duration, parse_duration

__all__ = [
    "KUBE_PLUGINS",
    "REMOVED_PLUGINS",
    "decode_config",
    "default_plugins",
    "describe_resolved",
    "effective_config",
    "format_duration",
    "load_and_resolve",
    "load_config",
    "load_config_text",
    "merge_plugin_set",
    "parse_duration",
    "resolve_config",
    "resolve_profile",
    "structure",
    "structure_into",
    "unstructure",
    "validate_file",
]
__all__ += types.__all__
