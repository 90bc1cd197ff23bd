from wordfreq import WordCounter, top_words


def test_top_words_skips_default_stopwords():
    assert top_words("The cat and the hat. The end.", n=2) == [("cat", 1), ("end", 1)]


def test_case_folding_and_apostrophes():
    wc = WordCounter().feed("Don't stop. DON'T stop!")
    assert wc.most_common() == [("don't", 2), ("stop", 2)]


def test_min_length():
    assert top_words("go go gopher", min_length=3) == [("gopher", 1)]


def test_add_stopwords_on_instance():
    wc = WordCounter()
    wc.add_stopwords("Cat")
    assert wc.feed("cat cat dog").most_common() == [("dog", 1)]
