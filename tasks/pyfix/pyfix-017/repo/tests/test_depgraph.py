import pytest

from depgraph import CycleError, dependents, install_order

GRAPH = {"app": ["web", "db"], "web": ["http"], "db": [], "http": []}


def test_install_order_dependencies_first():
    assert install_order(GRAPH, ["app"]) == ["http", "web", "db", "app"]


def test_install_order_multiple_targets_no_repeats():
    assert install_order(GRAPH, ["web", "app"]) == ["http", "web", "db", "app"]


def test_dependents():
    assert dependents(GRAPH, "http") == {"web", "app"}
    assert dependents(GRAPH, "app") == set()
