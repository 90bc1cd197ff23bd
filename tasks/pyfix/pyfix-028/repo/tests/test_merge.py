from layercfg import deep_merge, env_overrides, load


def test_nested_keys_are_merged():
    assert deep_merge({"a": {"x": 1}}, {"a": {"y": 2}}) == {"a": {"x": 1, "y": 2}}


def test_later_layer_wins_for_scalars_and_lists():
    assert deep_merge({"a": 1, "l": [1]}, {"a": 2, "l": [2]}) == {"a": 2, "l": [2]}


def test_dict_replaced_by_scalar():
    assert deep_merge({"a": {"x": 1}}, {"a": None}) == {"a": None}


def test_env_overrides():
    env = {"APP__DB__POOL__SIZE": "10", "APP__SERVER__HOST": "0.0.0.0", "HOME": "/root"}
    assert env_overrides(env) == {"db": {"pool": {"size": 10}}, "server": {"host": "0.0.0.0"}}


def test_load_with_override():
    cfg = load({"server": {"port": 9000}})
    assert cfg["server"] == {"host": "127.0.0.1", "port": 9000}
    assert cfg["db"]["pool"]["timeout"] == 30
