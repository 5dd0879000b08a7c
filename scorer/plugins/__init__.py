"""Built-in plugins: kube-scheduler's plugins that scorer implements, one module each.

Each module has the same shape (``NAME``, its args class, state keys, the
plugin class, helpers, ``factory`` and ``register`` at the bottom); the
plugin registry (``scorer.registry``) registers them through the same hook
as third-party plugins. ``helper`` holds what several plugins share.
"""
