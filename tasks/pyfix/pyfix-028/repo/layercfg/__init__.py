"""layercfg - layered configuration with deep merging."""

from .loader import DEFAULTS, env_overrides, load
from .merge import deep_merge

__all__ = ["DEFAULTS", "deep_merge", "env_overrides", "load"]
