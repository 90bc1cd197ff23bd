import pytest

from iniparse import ConfigError, get_bool, get_int, loads

SAMPLE = """
; global settings
top = level
[server]
host = example.org   ; public name
port: 8080
debug = yes
motd = Welcome to
    the machine
"""


def test_sections_and_values():
    cfg = loads(SAMPLE)
    assert cfg[""] == {"top": "level"}
    assert cfg["server"]["host"] == "example.org"
    assert get_int(cfg, "server", "port") == 8080
    assert get_bool(cfg, "server", "debug") is True


def test_continuation():
    assert loads(SAMPLE)["server"]["motd"] == "Welcome to\nthe machine"


def test_keys_lowercased():
    assert loads("[a]\nKey = V") == {"a": {"key": "V"}}


def test_bad_line():
    with pytest.raises(ConfigError):
        loads("[a]\njust words")
