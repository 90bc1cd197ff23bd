from slugkit import slugify, unique_slug


def test_basic():
    assert slugify("Hello World") == "hello-world"


def test_accents_are_folded():
    assert slugify("Crème Brûlée") == "creme-brulee"


def test_punctuation_runs_collapse():
    assert slugify("a -- b ... c") == "a-b-c"


def test_unique_slug_counts_up():
    assert unique_slug("Hello", {"hello", "hello-2"}) == "hello-3"
