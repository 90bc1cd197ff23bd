import copy

from layercfg import DEFAULTS, deep_merge, load


def test_load_does_not_change_defaults():
    snapshot = copy.deepcopy(DEFAULTS)
    load({"db": {"pool": {"size": 20}}, "server": {"port": 1}})
    assert DEFAULTS == snapshot


def test_override_does_not_leak_into_next_load():
    first = load({"db": {"pool": {"size": 20}}})
    second = load()
    assert first["db"]["pool"]["size"] == 20
    assert second["db"]["pool"]["size"] == 5


def test_mutating_result_does_not_touch_base():
    base = {"db": {"pool": {"size": 5}}, "features": ["a"]}
    result = deep_merge(base, {"db": {"url": "x"}})
    result["db"]["pool"]["size"] = 99
    result["features"].append("b")
    assert base == {"db": {"pool": {"size": 5}}, "features": ["a"]}


def test_mutating_result_does_not_touch_override():
    override = {"cache": {"ttl": 60, "hosts": ["h1"]}}
    result = deep_merge({"server": {}}, override)
    result["cache"]["ttl"] = 1
    result["cache"]["hosts"].append("h2")
    assert override == {"cache": {"ttl": 60, "hosts": ["h1"]}}


def test_three_layers_leave_middle_layer_untouched():
    base = {"server": {"port": 8000}}
    middle = {"db": {"pool": {"size": 10}}}
    top = {"db": {"pool": {"timeout": 5}}}
    result = deep_merge(base, middle, top)
    assert result == {"server": {"port": 8000}, "db": {"pool": {"size": 10, "timeout": 5}}}
    assert middle == {"db": {"pool": {"size": 10}}}
    assert top == {"db": {"pool": {"timeout": 5}}}


def test_merge_semantics_unchanged():
    assert deep_merge({"a": {"x": 1, "y": 1}}, {"a": {"y": 2}}, {"a": {"z": 3}}) == {
        "a": {"x": 1, "y": 2, "z": 3}
    }
    assert deep_merge() == {}
    assert deep_merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}


def test_result_is_new_object():
    base = {"a": 1}
    result = deep_merge(base)
    assert result == base
    assert result is not base
