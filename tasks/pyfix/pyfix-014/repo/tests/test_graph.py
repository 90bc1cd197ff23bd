from ugraph import Edge, Graph


def test_edge_equality_ignores_direction_and_weight():
    assert Edge("a", "b", 1) == Edge("b", "a", 5)


def test_add_and_query():
    g = Graph()
    assert g.add_edge("a", "b", weight=2)
    assert not g.add_edge("a", "b")
    assert g.has_edge("a", "b")
    assert g.neighbors("b") == {"a": 2}
    assert g.edge_count() == 1


def test_component():
    g = Graph()
    g.add_edge(1, 2)
    g.add_edge(2, 3)
    g.add_node(9)
    assert g.connected_component(1) == {1, 2, 3}
    assert g.connected_component(9) == {9}
