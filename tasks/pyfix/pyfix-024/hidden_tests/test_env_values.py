import pytest

from envtyped import SettingError, WorkerSettings, env_bool, env_float, env_int, env_list, env_str


def test_zero_int_is_kept():
    assert env_int("RETRIES", default=3, environ={"RETRIES": "0"}) == 0


def test_false_bool_is_kept():
    assert env_bool("DEBUG", default=True, environ={"DEBUG": "false"}) is False
    assert env_bool("DEBUG", default=True, environ={"DEBUG": "0"}) is False


def test_zero_float_is_kept():
    assert env_float("TIMEOUT", default=30.0, environ={"TIMEOUT": "0.0"}) == 0.0


def test_empty_variable_falls_back_to_default():
    assert env_int("RETRIES", default=3, environ={"RETRIES": ""}) == 3
    assert env_str("QUEUE", default="q", environ={"QUEUE": "   "}) == "q"


def test_list_value_is_read():
    assert env_list("TAGS", default=["x"], environ={"TAGS": "a, b"}) == ["a", "b"]


def test_true_bool_and_positive_int():
    env = {"DEBUG": "yes", "RETRIES": "5"}
    assert env_bool("DEBUG", default=False, environ=env) is True
    assert env_int("RETRIES", default=3, environ=env) == 5


def test_invalid_bool_raises():
    with pytest.raises(SettingError):
        env_bool("DEBUG", environ={"DEBUG": "maybe"})


def test_worker_settings_from_env_keeps_falsy_values():
    s = WorkerSettings.from_env(environ={
        "WORKER_RETRIES": "0",
        "WORKER_DEBUG": "off",
        "WORKER_CONCURRENCY": "8",
    })
    assert s.retries == 0
    assert s.debug is False
    assert s.concurrency == 8
    assert s.queue == "default"
