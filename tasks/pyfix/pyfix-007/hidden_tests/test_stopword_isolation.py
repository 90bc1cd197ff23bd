from wordfreq import DEFAULT_STOPWORDS, WordCounter, top_words


def test_default_stopwords_still_apply():
    assert top_words("the owl and the pussycat", n=5) == [("owl", 1), ("pussycat", 1)]


def test_custom_stopwords_replace_defaults():
    assert top_words("the cat", stopwords={"cat"}) == [("the", 1)]


def test_empty_stopwords_disable_filtering():
    assert top_words("the end", stopwords=set()) == [("end", 1), ("the", 1)]


def test_add_stopwords_does_not_leak_into_top_words():
    counter = WordCounter()
    counter.add_stopwords("python")
    assert counter.feed("python rocks").most_common() == [("rocks", 1)]
    assert top_words("python python java") == [("python", 2), ("java", 1)]


def test_add_stopwords_does_not_leak_into_new_counter():
    WordCounter().add_stopwords("kotlin")
    assert WordCounter().feed("kotlin").most_common() == [("kotlin", 1)]


def test_module_default_stopwords_unchanged():
    before = set(DEFAULT_STOPWORDS)
    WordCounter().add_stopwords("rust", "golang")
    assert DEFAULT_STOPWORDS == before


def test_callers_set_is_not_modified():
    mine = {"foo"}
    counter = WordCounter(stopwords=mine)
    counter.add_stopwords("bar")
    assert mine == {"foo"}
    assert counter.feed("foo bar baz").most_common() == [("baz", 1)]


def test_counters_sharing_a_set_are_independent():
    shared = {"x"}
    first = WordCounter(stopwords=shared)
    second = WordCounter(stopwords=shared)
    first.add_stopwords("y")
    assert second.feed("x y z").most_common() == [("y", 1), ("z", 1)]


def test_list_of_stopwords_with_add_stopwords():
    counter = WordCounter(stopwords=["alpha"])
    counter.add_stopwords("beta")
    assert counter.feed("alpha beta gamma").most_common() == [("gamma", 1)]


def test_generator_of_stopwords():
    words = (w for w in ["delta"])
    assert top_words("epsilon delta epsilon zeta", stopwords=words) == [("epsilon", 2), ("zeta", 1)]


def test_reset_keeps_stopwords():
    counter = WordCounter(stopwords=[])
    counter.add_stopwords("omega")
    counter.feed("omega psi").reset()
    assert counter.feed("omega psi psi").most_common() == [("psi", 2)]
