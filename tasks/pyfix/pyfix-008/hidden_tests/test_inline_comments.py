from iniparse import get_int, loads


def test_hex_colour_value():
    assert loads("[theme]\ncolor = #ff8800\n") == {"theme": {"color": "#ff8800"}}


def test_url_fragment_and_real_comment():
    cfg = loads("[theme]\nlink = https://example.org/docs#install   ; where to send users\n")
    assert cfg["theme"]["link"] == "https://example.org/docs#install"


def test_semicolon_inside_value():
    assert loads("[db]\npassword = s3cr;et\n")["db"]["password"] == "s3cr;et"


def test_colon_delimiter_value_with_hash():
    assert loads("[a]\ntag: release#42\n")["a"]["tag"] == "release#42"


def test_inline_comment_after_whitespace():
    cfg = loads("[server]\nport = 80  # http\nhost = h\t; tab before comment\n")
    assert cfg["server"] == {"port": "80", "host": "h"}
    assert get_int(cfg, "server", "port") == 80


def test_continuation_keeps_hash_in_value():
    cfg = loads("[list]\nitems = first\n    item#2\n    third ; comment\n")
    assert cfg["list"]["items"] == "first\nitem#2\nthird"


def test_full_line_comments_ignored():
    text = "# top\n[a]\n; note\n  # indented comment\nk = v\n"
    assert loads(text) == {"a": {"k": "v"}}


def test_value_with_both_markers():
    assert loads("[x]\nexpr = a#b;c  # done\n")["x"]["expr"] == "a#b;c"


def test_plain_values_and_default_section():
    cfg = loads("name = demo\n[paths]\nRoot: /srv/app\nempty =\n")
    assert cfg == {"": {"name": "demo"}, "paths": {"root": "/srv/app", "empty": ""}}
