"""Data shipped with scorer (the demo cluster)."""
