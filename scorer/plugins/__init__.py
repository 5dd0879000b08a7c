"""Built-in plugins: kube-scheduler's plugins that scorer implements, one module each.

A plugin too large for one module is a folder whose ``plugin`` module is that
module (``podtopologyspread``, ``interpodaffinity``; ``noderesources`` holds two
plugins, ``fit`` and ``balanced_allocation``); the folder's other modules hold
its args or indexes. Each plugin module has the same shape (``NAME``, its args class, state keys, the
plugin class, helpers, ``factory`` and ``register`` at the bottom); the
plugin registry (``scorer.registry``) registers them through the same hook
as third-party plugins. ``helper`` holds what several plugins share.
"""
