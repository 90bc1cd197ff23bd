from prefixtree import Trie


def test_insert_and_contains():
    t = Trie(["app", "apple"])
    assert "app" in t and "apple" in t
    assert "ap" not in t
    assert not t.insert("app")
    assert len(t) == 2


def test_prefix_queries():
    t = Trie(["app", "apple", "apply", "bat"])
    assert t.count_prefix("app") == 3
    assert t.count_prefix("") == 4
    assert t.count_prefix("x") == 0
    assert t.words_with_prefix("ap") == ["app", "apple", "apply"]
    assert t.longest_prefix_of("applesauce") == "apple"
    assert t.longest_prefix_of("banana") is None


def test_remove_stored_word():
    t = Trie(["app", "apple", "apply"])
    assert t.remove("apple")
    assert "apple" not in t and "app" in t and "apply" in t
    assert t.count_prefix("app") == 2
    assert not t.remove("apple")
