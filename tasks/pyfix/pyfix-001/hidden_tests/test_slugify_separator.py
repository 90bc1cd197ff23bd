import pytest

from slugkit import slugify, unique_slug


def test_default_separator_trims_punctuation():
    assert slugify("  Hello, World!  ") == "hello-world"


def test_accented_title():
    assert slugify("Crème Brûlée: a recipe") == "creme-brulee-a-recipe"


def test_underscore_separator_trailing_punctuation():
    assert slugify("Hello, World!", separator="_") == "hello_world"


def test_custom_separator_leading_and_trailing():
    assert slugify("  (draft) Q3 report ", separator=".") == "draft.q3.report"


def test_multi_char_separator_is_trimmed():
    assert slugify("--Hello--", separator="__") == "hello"


def test_custom_separator_with_max_length():
    assert slugify("!! The quick brown fox", separator="_", max_length=9) == "the_quick"


def test_max_length_default_separator():
    assert slugify("A very long title indeed", max_length=12) == "a-very-long"


def test_unique_slug_with_custom_separator():
    assert unique_slug("Report!", {"report"}, separator="_") == "report_2"


def test_only_punctuation_gives_empty_slug():
    assert slugify("?!", separator="_") == ""


def test_empty_separator_rejected():
    with pytest.raises(ValueError):
        slugify("abc", separator="")
