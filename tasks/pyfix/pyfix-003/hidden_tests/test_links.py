from mdlite import render, render_inline


def test_single_link_regression():
    assert render_inline("see [docs](https://example.com/docs)") == (
        'see <a href="https://example.com/docs">docs</a>'
    )


def test_two_links_on_one_line():
    assert render_inline("see [docs](/docs) and [faq](/faq)") == (
        'see <a href="/docs">docs</a> and <a href="/faq">faq</a>'
    )


def test_link_followed_by_parenthesised_text():
    assert render_inline("[home](/) (opens in a new tab)") == (
        '<a href="/">home</a> (opens in a new tab)'
    )


def test_adjacent_links():
    assert render_inline("[a](1)[b](2)") == '<a href="1">a</a><a href="2">b</a>'


def test_link_url_is_escaped():
    assert render_inline('[q](/s?a=1&b="x")') == '<a href="/s?a=1&amp;b=&quot;x&quot;">q</a>'


def test_link_with_bold_text_and_trailing_italic():
    assert render_inline("[**go**](/go) now *please*") == (
        '<a href="/go"><strong>go</strong></a> now <em>please</em>'
    )


def test_code_span_is_left_alone():
    assert render_inline("`[a](b)` and [c](d)") == '<code>[a](b)</code> and <a href="d">c</a>'


def test_document_with_several_links():
    doc = "# [One](/1) or [Two](/2)\n\nread [this](/a)\nand [that](/b)"
    assert render(doc) == (
        '<h1><a href="/1">One</a> or <a href="/2">Two</a></h1>\n'
        '<p>read <a href="/a">this</a> and <a href="/b">that</a></p>'
    )
