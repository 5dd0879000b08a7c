"""Reading what users give scorer: files and the values inside them.

- ``reader``: the one guarded reader of YAML and JSON inputs (limits,
  strictness, UTF-8), used for cluster files, configurations and snapshots;
  ``yamlguards``: its nesting-depth and alias guards.
- ``describe``: how values and field paths are named in error messages.
- ``numbers``: the API's integer ranges and Go's integer parsing.
- ``duration``: Go duration strings.

The lowest layer of scorer, with ``scorer.errors`` and ``scorer.quantity``:
it imports nothing else of scorer.
"""
