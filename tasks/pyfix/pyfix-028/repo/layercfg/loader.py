"""Application configuration: built-in defaults + overrides."""

from .merge import deep_merge

DEFAULTS = {
    "server": {"host": "127.0.0.1", "port": 8000},
    "db": {"url": "sqlite:///app.db", "pool": {"size": 5, "timeout": 30}},
    "features": [],
}


def _coerce(text):
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return text


def env_overrides(environ, prefix="APP__"):
    """Turn ``APP__DB__POOL__SIZE=10`` style variables into a nested dict."""
    overrides = {}
    for name, raw in environ.items():
        if not name.startswith(prefix):
            continue
        path = [part.lower() for part in name[len(prefix):].split("__") if part]
        if not path:
            continue
        node = overrides
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = _coerce(raw)
    return overrides


def load(*overrides, defaults=None):
    """Return the effective configuration: defaults merged with ``overrides``."""
    return deep_merge(DEFAULTS if defaults is None else defaults, *overrides)
