"""VolumeBinding: PersistentVolumeClaims bound, matched or provisioned for the node, and bound
in PreBind (kube's ``volumebinding``, reference §10.6).

One folder, three modules:

* ``plugin``: the plugin (PreFilter, Filter, Reserve/Unreserve, PreBind; module docstring);
* ``args``: ``VolumeBindingArgs`` (``bindTimeoutSeconds``; ``shape`` refused, its gate is off);
* ``binder``: kube's volume binder: claim classification, FindPodVolumes vectorized over a node
  batch (static PV selection, provisioning and capacity checks), assume/revert, binding checks.
"""

from scorer.plugins.volumebinding.args import DEFAULT_BIND_TIMEOUT_SECONDS, VolumeBindingArgs
from scorer.plugins.volumebinding.binder import (
    ERR_REASON_BIND_CONFLICT,
    ERR_REASON_NODE_CONFLICT,
    ERR_REASON_NOT_ENOUGH_SPACE,
    ERR_REASON_PV_NOT_EXIST,
    ERR_UNBOUND_IMMEDIATE,
    PodClaims,
    PodVolumes,
    StaticBinding,
)
from scorer.plugins.volumebinding.plugin import NAME, VolumeBinding, factory, register, volume_decisions

__all__ = [
    "DEFAULT_BIND_TIMEOUT_SECONDS",
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_NOT_ENOUGH_SPACE",
    "ERR_REASON_PV_NOT_EXIST",
    "ERR_UNBOUND_IMMEDIATE",
    "NAME",
    "PodClaims",
    "PodVolumes",
    "StaticBinding",
    "VolumeBinding",
    "VolumeBindingArgs",
    "factory",
    "register",
    "volume_decisions",
]
