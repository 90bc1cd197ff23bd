"""envtyped - read typed settings from environment variables."""

from .env import SettingError, env_bool, env_float, env_int, env_list, env_str
from .settings import WorkerSettings

__all__ = [
    "SettingError",
    "WorkerSettings",
    "env_bool",
    "env_float",
    "env_int",
    "env_list",
    "env_str",
]
