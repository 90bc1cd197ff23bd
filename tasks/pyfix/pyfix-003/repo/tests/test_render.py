from mdlite import render, render_inline


def test_bold_and_italic():
    assert render_inline("**a** and *b*") == "<strong>a</strong> and <em>b</em>"


def test_code_is_not_formatted():
    assert render_inline("`a*b*c`") == "<code>a*b*c</code>"


def test_single_link():
    assert render_inline("[x](/y)") == '<a href="/y">x</a>'


def test_document():
    assert render("# Hi\n\nsome *text*") == "<h1>Hi</h1>\n<p>some <em>text</em></p>"
