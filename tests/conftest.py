"""Shared fixtures. Each test gets a fresh plugin registry (never a global one)."""

from __future__ import annotations

import pytest

from scorer.registry import build_registry


@pytest.fixture
def registry():
    """Built-in plugins only: tests must not depend on what else is installed."""
    return build_registry(autoload=False)


@pytest.fixture
def catalog(registry):
    return registry.catalog()
