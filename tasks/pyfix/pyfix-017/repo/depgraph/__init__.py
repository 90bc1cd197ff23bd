"""Dependency resolution."""

from .resolver import CycleError, dependents, install_order, resolve

__all__ = ["CycleError", "dependents", "install_order", "resolve"]
