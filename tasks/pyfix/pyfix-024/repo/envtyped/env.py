"""Typed accessors for environment variables.

Every accessor takes an optional ``environ`` mapping (defaults to ``os.environ``)
so that settings can be loaded from any dict, e.g. in tests.

A variable that is unset, or set to an empty / whitespace-only string, is
treated as missing and the ``default`` is returned.
"""

import os

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class SettingError(ValueError):
    """Raised when an environment variable holds a value of the wrong type."""


def _parse_bool(raw):
    lowered = raw.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ValueError(f"expected one of {sorted(_TRUE | _FALSE)}")


def _parse_list(raw):
    return [item.strip() for item in raw.split(",") if item.strip()]


def _get(name, parser, default, environ):
    if environ is None:
        environ = os.environ
    raw = environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = parser(raw.strip())
    except ValueError as exc:
        raise SettingError(f"{name}: cannot parse {raw!r}: {exc}") from None
    return value or default


def env_str(name, default=None, environ=None):
    return _get(name, str, default, environ)


def env_int(name, default=None, environ=None):
    return _get(name, int, default, environ)


def env_float(name, default=None, environ=None):
    return _get(name, float, default, environ)


def env_bool(name, default=False, environ=None):
    return _get(name, _parse_bool, default, environ)


def env_list(name, default=None, environ=None):
    """Comma separated list: ``"a, b,c"`` -> ``["a", "b", "c"]``."""
    return _get(name, _parse_list, default, environ)
