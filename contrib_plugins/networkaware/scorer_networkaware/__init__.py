"""scorer-networkaware: the NetworkAware plugin (Filter + Score) for scorer.

Loaded through the ``scorer`` entry point ``networkaware``; this module carries
the ``scorer_register_plugins`` hook implementation.
"""

from scorer_networkaware.plugin import (
    ERR_REASON,
    NAME,
    NetworkAware,
    NetworkAwareArgs,
    factory,
    scorer_register_plugins,
)

__all__ = [
    "ERR_REASON",
    "NAME",
    "NetworkAware",
    "NetworkAwareArgs",
    "factory",
    "scorer_register_plugins",
]
