import random

from prefixtree import Trie

WORDS = ["car", "card", "care", "cart", "dog"]


def test_remove_prefix_that_is_not_a_word():
    t = Trie(WORDS)
    assert t.remove("ca") is False
    assert len(t) == 5
    assert t.count_prefix("ca") == 4
    assert t.count_prefix("") == 5


def test_remove_missing_words_then_real_ones():
    t = Trie(WORDS)
    assert t.remove("ca") is False
    assert t.remove("cards") is False
    assert t.remove("cat") is False
    for w in ("card", "care", "cart"):
        assert t.remove(w) is True
    assert "car" in t
    assert t.words_with_prefix("") == ["car", "dog"]
    assert len(t) == 2


def test_remove_unique_prefix_keeps_longer_word():
    t = Trie(["apple"])
    assert t.remove("app") is False
    assert "apple" in t
    assert t.words_with_prefix("a") == ["apple"]
    assert t.longest_prefix_of("apples") == "apple"


def test_remove_empty_string_not_stored():
    t = Trie(["a", "b"])
    assert t.remove("") is False
    assert len(t) == 2


def test_empty_string_as_word():
    t = Trie(["", "x"])
    assert t.remove("") is True
    assert "" not in t and "x" in t
    assert len(t) == 1
    assert t.remove("") is False


def test_remove_stored_words_prunes():
    t = Trie(["to", "tea", "ted", "ten", "inn"])
    assert t.remove("tea")
    assert t.remove("inn")
    assert t.words_with_prefix("") == ["ted", "ten", "to"]
    assert t.count_prefix("te") == 2
    assert t.count_prefix("i") == 0
    assert t.insert("inn")
    assert t.count_prefix("i") == 1


def test_remove_word_with_missing_branch():
    t = Trie(["abc"])
    assert t.remove("abd") is False
    assert t.remove("xyz") is False
    assert len(t) == 1 and "abc" in t


def test_random_operations_match_set_model():
    rng = random.Random(20240611)
    t = Trie()
    model = set()
    for _ in range(3000):
        word = "".join(rng.choice("ab") for _ in range(rng.randint(0, 4)))
        if rng.random() < 0.5:
            assert t.insert(word) == (word not in model)
            model.add(word)
        else:
            assert t.remove(word) == (word in model)
            model.discard(word)
        assert len(t) == len(model)
    for prefix in ["", "a", "b", "ab", "ba", "aa", "bb", "aba"]:
        expected = sorted(w for w in model if w.startswith(prefix))
        assert t.words_with_prefix(prefix) == expected
        assert t.count_prefix(prefix) == len(expected)
