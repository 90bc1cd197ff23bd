import pytest

from depgraph import CycleError, install_order, resolve

GRAPH = {
    "app": ["web", "db"],
    "web": ["http"],
    "db": [],
    "http": [],
    "cli": ["args"],
    "args": [],
}


def test_resolve_single():
    assert resolve(GRAPH, "app") == ["http", "web", "db", "app"]


def test_resolve_calls_are_independent():
    first = resolve(GRAPH, "web")
    second = resolve(GRAPH, "cli")
    assert first == ["http", "web"]
    assert second == ["args", "cli"]
    assert resolve(GRAPH, "web") == ["http", "web"]


def test_returned_list_is_not_shared():
    a = resolve(GRAPH, "db")
    a.append("junk")
    assert resolve(GRAPH, "db") == ["db"]


def test_explicit_accumulator_still_works():
    acc = []
    resolve(GRAPH, "web", acc)
    result = resolve(GRAPH, "app", acc)
    assert result is acc
    assert acc == ["http", "web", "db", "app"]


def test_leaf_only_in_dependencies():
    assert resolve({"x": ["y"]}, "x") == ["y", "x"]


def test_cycle_detected():
    with pytest.raises(CycleError) as info:
        resolve({"a": ["b"], "b": ["c"], "c": ["a"]}, "a")
    assert info.value.path == ["a", "b", "c", "a"]


def test_no_false_cycle_after_cycle_error():
    with pytest.raises(CycleError):
        resolve({"a": ["b"], "b": ["a"]}, "a")
    assert resolve({"a": ["b"], "b": []}, "a") == ["b", "a"]


def test_install_order_unaffected_by_previous_resolve():
    resolve(GRAPH, "cli")
    assert install_order(GRAPH, ["web"]) == ["http", "web"]
