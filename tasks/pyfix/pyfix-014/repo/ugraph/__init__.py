"""Undirected graph."""

from .graph import Edge, Graph

__all__ = ["Edge", "Graph"]
