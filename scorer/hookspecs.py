"""The plugin contract: the pluggy hooks a plugin distribution implements.

A distribution exposes an entry point in the group ``scorer`` whose value is
a module path: in ``pyproject.toml``, ``[project.entry-points.scorer]``
``my_plugin = "my_pkg.plugin"`` (setup.cfg: ``[options.entry_points]`` ``scorer =
my_plugin = my_pkg.plugin``).
That module implements the hooks below, marked with ``hookimpl`` (a hook this
file does not define, or none at all, and the distribution is not loaded; see
``scorer.registry``), and may say which version of the plugin API it was
built for: ``SCORER_PLUGIN_API = "1.0"`` at module level. A major version
other than ``PLUGIN_API_VERSION``'s, or a newer minor, and the distribution
is not loaded. Plugin authors import all of this from ``scorer.plugin``.
The framework then calls the registered plugin objects directly at each
extension point (see ``scorer.framework.interface`` for their methods).
"""

from __future__ import annotations

import pluggy

from scorer.framework.catalog import PluginRegistry

hookspec = pluggy.HookspecMarker("scorer")
hookimpl = pluggy.HookimplMarker("scorer")

#: Version of the plugin API ("MAJOR.MINOR"): this contract and what ``scorer.plugin`` exports. The minor
#: is bumped when something is added, the major when something a plugin uses changes or goes.
PLUGIN_API_VERSION = "1.0"
#: The module-level name under which an entry point's module declares the plugin API it was built for.
API_DECLARATION = "SCORER_PLUGIN_API"


@hookspec
def scorer_register_plugins(registry: PluginRegistry) -> None:
    """Register this distribution's plugins.

    When: once, while the plugin registry is built (``scorer.registry.build_registry``),
    before any configuration is read. Called by: the registry factory, for
    the built-ins first and then for every loaded entry point.

    Params: ``registry`` -- call ``registry.register(NAME, factory,
    args_type=NameArgs, plugin_type=Name)`` once per plugin (``plugin_type``,
    the plugin's class, tells which extension points it implements before it
    is built; it is checked against the Protocol of each of them in
    ``scorer.framework.interface``). ``factory(args, handle)`` builds
    the plugin when a profile enables it; ``args`` is an instance of
    ``args_type`` converted strictly from ``pluginConfig[].args`` (None when
    the plugin has no args type); ``handle`` gives access to the cluster
    cache and the profile.

    Returns: nothing. If it raises, or ``register`` refuses a plugin (a name
    already taken, no extension point, a method the framework cannot call, an
    args class scorer cannot convert), none of this distribution's plugins is
    registered: scorer runs without them and reports why
    (``registry.failures``, ``scorer plugins``).
    """
