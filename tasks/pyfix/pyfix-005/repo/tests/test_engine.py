import pytest

from tinytemplate import Template, TemplateError, render


def test_simple_substitution():
    assert render("Hi {{ name }}!", name="Bob") == "Hi Bob!"


def test_dotted_lookup_dict_and_attr():
    class User:
        email = "a@b.c"

    assert render("{{ u.name }} {{ v.email }}", u={"name": "x"}, v=User()) == "x a@b.c"


def test_undefined_is_empty():
    assert render("[{{ missing.thing }}]") == "[]"


def test_value_is_escaped():
    assert render("{{ x }}", x="<i>") == "&lt;i&gt;"


def test_unknown_filter():
    with pytest.raises(TemplateError):
        Template("{{ x|nope }}").render(x=1)


def test_title_filter():
    assert render("{{ n|title }}", n="ada lovelace") == "Ada Lovelace"
