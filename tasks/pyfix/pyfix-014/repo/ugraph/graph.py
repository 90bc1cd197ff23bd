"""An undirected graph with optional edge weights."""

from __future__ import annotations

from typing import Hashable, Iterator

Node = Hashable


class Edge:
    """An undirected edge. ``Edge(u, v)`` and ``Edge(v, u)`` are the same edge.

    The weight is payload and takes no part in equality.
    """

    __slots__ = ("u", "v", "weight")

    def __init__(self, u: Node, v: Node, weight: float = 1) -> None:
        self.u = u
        self.v = v
        self.weight = weight

    def endpoints(self) -> frozenset:
        return frozenset((self.u, self.v))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Edge):
            return NotImplemented
        return self.endpoints() == other.endpoints()

    def __hash__(self) -> int:
        return hash((self.u, self.v))

    def __repr__(self) -> str:
        return f"Edge({self.u!r}, {self.v!r}, weight={self.weight!r})"


class Graph:
    def __init__(self) -> None:
        self._adj: dict[Node, dict[Node, float]] = {}
        self._edges: set[Edge] = set()

    def add_node(self, node: Node) -> None:
        self._adj.setdefault(node, {})

    def add_edge(self, u: Node, v: Node, weight: float = 1) -> bool:
        """Add the edge ``u -- v``. Returns False if it was already present."""
        edge = Edge(u, v, weight)
        if edge in self._edges:
            return False
        self._edges.add(edge)
        self.add_node(u)
        self.add_node(v)
        self._adj[u][v] = weight
        self._adj[v][u] = weight
        return True

    def remove_edge(self, u: Node, v: Node) -> None:
        self._edges.remove(Edge(u, v))
        del self._adj[u][v]
        self._adj[v].pop(u, None)

    def has_edge(self, u: Node, v: Node) -> bool:
        return Edge(u, v) in self._edges

    def neighbors(self, node: Node) -> dict[Node, float]:
        return dict(self._adj[node])

    def degree(self, node: Node) -> int:
        return len(self._adj[node])

    def nodes(self) -> list[Node]:
        return list(self._adj)

    def edges(self) -> Iterator[Edge]:
        return iter(self._edges)

    def edge_count(self) -> int:
        return len(self._edges)

    def connected_component(self, start: Node) -> set[Node]:
        seen = {start}
        stack = [start]
        while stack:
            for nxt in self._adj[stack.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append(nxt)
        return seen
