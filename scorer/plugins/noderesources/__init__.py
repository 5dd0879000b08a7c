"""NodeResourcesFit and its scoring strategies."""
