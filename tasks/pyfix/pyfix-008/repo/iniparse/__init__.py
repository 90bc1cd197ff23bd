"""iniparse - a small INI reader."""

from .parser import ConfigError, get_bool, get_int, loads

__all__ = ["ConfigError", "get_bool", "get_int", "loads"]
