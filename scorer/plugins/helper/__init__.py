"""Helpers shared by built-in plugins."""
