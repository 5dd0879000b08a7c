"""InterPodAffinity: pods placed by the pods already there (kube's ``interpodaffinity``).

One folder, three modules:

* ``plugin``: the plugin, its Args, its Filter and Score formulas (module docstring);
* ``terms``: a pod's affinity terms parsed as kube does (namespaces,
  ``namespaceSelector``, ``matchLabelKeys``, selector validation);
* ``index``: the ``ExistingTerms`` index of the existing pods' terms (a
  ``PodIndex`` extension) and ``TopologyCounts``, counts per topology value.
"""

from scorer.plugins.interpodaffinity.plugin import (
    ERR_REASON_AFFINITY,
    ERR_REASON_ANTI_AFFINITY,
    ERR_REASON_EXISTING_ANTI_AFFINITY,
    NAME,
    InterPodAffinity,
    InterPodAffinityArgs,
    factory,
    register,
)

__all__ = [
    "ERR_REASON_AFFINITY",
    "ERR_REASON_ANTI_AFFINITY",
    "ERR_REASON_EXISTING_ANTI_AFFINITY",
    "NAME",
    "InterPodAffinity",
    "InterPodAffinityArgs",
    "factory",
    "register",
]
