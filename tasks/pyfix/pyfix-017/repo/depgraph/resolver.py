"""Depth-first dependency resolution."""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

Graph = Mapping[str, Sequence[str]]


class CycleError(ValueError):
    """The dependency graph contains a cycle."""

    def __init__(self, path: list[str]) -> None:
        super().__init__("dependency cycle: " + " -> ".join(path))
        self.path = path


def resolve(graph: Graph, target: str, resolved: list[str] = [], _stack: list[str] = []) -> list[str]:
    """Return ``target`` and everything it depends on, dependencies first.

    ``resolved`` may be passed to accumulate the order over several calls;
    packages already in it are not repeated.
    """
    if target in resolved:
        return resolved
    if target in _stack:
        raise CycleError(_stack[_stack.index(target):] + [target])
    _stack.append(target)
    for dep in graph.get(target, ()):
        resolve(graph, dep, resolved, _stack)
    _stack.pop()
    resolved.append(target)
    return resolved


def install_order(graph: Graph, targets: Iterable[str]) -> list[str]:
    """Install order for several targets, each package listed once."""
    order: list[str] = []
    for target in targets:
        resolve(graph, target, order)
    return order


def dependents(graph: Graph, package: str) -> set[str]:
    """Every package that depends on ``package``, directly or transitively."""
    reverse: dict[str, set[str]] = {}
    for pkg, deps in graph.items():
        for dep in deps:
            reverse.setdefault(dep, set()).add(pkg)
    found: set[str] = set()
    todo = [package]
    while todo:
        for parent in reverse.get(todo.pop(), ()):
            if parent not in found:
                found.add(parent)
                todo.append(parent)
    return found
