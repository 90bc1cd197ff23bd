import pytest

from ugraph import Edge, Graph


def test_equal_edges_hash_equal():
    assert hash(Edge(1, 2)) == hash(Edge(2, 1))
    assert hash(Edge("x", "y", 3)) == hash(Edge("y", "x", 7))
    assert len({Edge(1, 2), Edge(2, 1), Edge(1, 2, 9)}) == 1


def test_reverse_duplicate_not_added():
    g = Graph()
    assert g.add_edge(1, 2)
    assert not g.add_edge(2, 1)
    assert g.edge_count() == 1
    assert len(list(g.edges())) == 1


def test_has_edge_both_directions():
    g = Graph()
    g.add_edge("u", "v")
    assert g.has_edge("u", "v")
    assert g.has_edge("v", "u")
    assert not g.has_edge("u", "w")


def test_remove_edge_reverse_direction():
    g = Graph()
    g.add_edge(3, 4)
    g.remove_edge(4, 3)
    assert g.edge_count() == 0
    assert not g.has_edge(3, 4)
    assert g.degree(3) == 0 and g.degree(4) == 0


def test_edge_list_with_both_directions():
    g = Graph()
    for u, v in [(1, 2), (2, 1), (2, 3), (3, 2), (3, 1)]:
        g.add_edge(u, v)
    assert g.edge_count() == 3
    assert {e.endpoints() for e in g.edges()} == {frozenset({1, 2}), frozenset({2, 3}), frozenset({1, 3})}


def test_self_loop_and_degree():
    g = Graph()
    g.add_edge(5, 5)
    assert not g.add_edge(5, 5)
    assert g.edge_count() == 1
    assert g.has_edge(5, 5)


def test_remove_missing_edge_raises():
    g = Graph()
    g.add_edge(1, 2)
    with pytest.raises(KeyError):
        g.remove_edge(1, 3)
