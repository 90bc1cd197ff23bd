"""Parse INI-style configuration text into nested dictionaries."""

import re

_SECTION = re.compile(r"^\[\s*([^\]]+?)\s*\]$")
_OPTION = re.compile(r"^([^=:\s][^=:]*?)\s*[=:]\s*(.*)$")
_COMMENT_PREFIXES = ("#", ";")
_TRUE = {"1", "yes", "true", "on"}
_FALSE = {"0", "no", "false", "off"}


class ConfigError(ValueError):
    """Raised for lines that cannot be parsed."""


def _strip_inline_comment(value):
    """Remove a trailing inline comment from *value* and strip whitespace."""
    for prefix in _COMMENT_PREFIXES:
        index = value.find(prefix)
        if index != -1:
            value = value[:index]
    return value.strip()


def loads(text):
    """Parse *text* and return ``{section: {key: value}}``."""
    config = {"": {}}
    section = config[""]
    last_key = None
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith(_COMMENT_PREFIXES):
            continue
        if raw[0] in " \t" and last_key is not None:
            continuation = _strip_inline_comment(stripped)
            section[last_key] = f"{section[last_key]}\n{continuation}".strip("\n")
            continue
        match = _SECTION.match(stripped)
        if match:
            section = config.setdefault(match.group(1), {})
            last_key = None
            continue
        match = _OPTION.match(stripped)
        if not match:
            raise ConfigError(f"line {number}: cannot parse {raw!r}")
        last_key = match.group(1).strip().lower()
        section[last_key] = _strip_inline_comment(match.group(2))
    if not config[""]:
        del config[""]
    return config


def get_int(config, section, key, default=None):
    """Return ``config[section][key]`` as an int, or *default* if missing."""
    try:
        return int(config[section][key])
    except KeyError:
        return default


def get_bool(config, section, key, default=None):
    """Return a boolean option (yes/no, true/false, on/off, 1/0)."""
    try:
        value = config[section][key].lower()
    except KeyError:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ConfigError(f"[{section}] {key}: not a boolean: {value!r}")
