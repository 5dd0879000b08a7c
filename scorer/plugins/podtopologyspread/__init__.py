"""PodTopologySpread: spread a pod's group evenly over topology domains (kube's ``podtopologyspread``).

One folder, three modules:

* ``plugin``: the plugin, its PreFilter/Filter/PreScore/Score formulas (module docstring);
* ``args``: ``PodTopologySpreadArgs`` (``defaultConstraints``, ``defaultingType``) and kube's validation;
* ``common``: a pod's constraints (its own, or the defaults with the selector of its owners), the
  nodes each constraint counts, and the matching pods per node read from the cache's ``PodIndex``.
"""

from scorer.plugins.podtopologyspread.args import (
    DEFAULTING_TYPES,
    LIST_DEFAULTING,
    SYSTEM_DEFAULT_CONSTRAINTS,
    SYSTEM_DEFAULTING,
    PodTopologySpreadArgs,
)
from scorer.plugins.podtopologyspread.plugin import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    NAME,
    PodTopologySpread,
    factory,
    register,
)

__all__ = [
    "DEFAULTING_TYPES",
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "LIST_DEFAULTING",
    "NAME",
    "SYSTEM_DEFAULTING",
    "SYSTEM_DEFAULT_CONSTRAINTS",
    "PodTopologySpread",
    "PodTopologySpreadArgs",
    "factory",
    "register",
]
