from tinytemplate import SafeString, Template, render


def test_safe_filter_disables_escaping():
    assert Template("{{ body|safe }}").render(body="<b>hi</b>") == "<b>hi</b>"


def test_upper_escapes_result_once():
    assert Template("{{ name|upper }}").render(name="Tom & Jerry") == "TOM &amp; JERRY"


def test_length_of_list():
    assert Template("{{ tags|length }}").render(tags=["a", "b", "c"]) == "3"


def test_join_then_escape():
    assert render("{{ items|join }}", items=["<a>", "b"]) == "&lt;a&gt;, b"


def test_custom_filter_receives_original_object():
    t = Template("{{ price|money }}", filters={"money": lambda v: f"${v:,.2f}"})
    assert t.render(price=1234.5) == "$1,234.50"


def test_custom_filter_output_is_escaped():
    t = Template("{{ x|wrap }}", filters={"wrap": lambda v: f"<{v}>"})
    assert t.render(x="a") == "&lt;a&gt;"


def test_plain_value_still_escaped():
    assert render("<p>{{ x }}</p>", x='"5" < 6') == "<p>&quot;5&quot; &lt; 6</p>"


def test_safe_string_in_context_not_escaped():
    assert render("{{ x }}", x=SafeString("<br>")) == "<br>"


def test_autoescape_off_with_filters():
    t = Template("{{ x|upper }} {{ y|length }}", autoescape=False)
    assert t.render(x="a&b", y=[1, 2]) == "A&B 2"


def test_undefined_with_filter_is_empty():
    assert render("[{{ nope|upper }}]") == "[]"
