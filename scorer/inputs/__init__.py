"""Reading what users give scorer: files and the values inside them.

The lowest layer of scorer: it imports nothing else of scorer but ``scorer.errors``.
"""
