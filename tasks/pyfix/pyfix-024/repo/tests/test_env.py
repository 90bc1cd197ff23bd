import pytest

from envtyped import SettingError, WorkerSettings, env_int, env_list, env_str


def test_unset_uses_default():
    assert env_int("PORT", default=8080, environ={}) == 8080


def test_value_is_parsed():
    assert env_int("PORT", default=8080, environ={"PORT": " 9000 "}) == 9000
    assert env_str("NAME", environ={"NAME": "api"}) == "api"


def test_list_parsing():
    assert env_list("TAGS", environ={"TAGS": "a, b,,c"}) == ["a", "b", "c"]


def test_bad_value_raises():
    with pytest.raises(SettingError):
        env_int("PORT", environ={"PORT": "eighty"})


def test_worker_settings_defaults():
    s = WorkerSettings.from_env(environ={})
    assert s == WorkerSettings()
