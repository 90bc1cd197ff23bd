"""Parsing and building of application/x-www-form-urlencoded query strings."""

from urllib.parse import quote_plus, unquote_plus


def parse_qsl(query, keep_blank_values=False, separator="&"):
    """Parse *query* into a list of ``(key, value)`` pairs, in order.

    A leading ``?`` is ignored, ``+`` decodes to a space and percent escapes
    are decoded.  Pairs with an empty value are skipped unless
    *keep_blank_values* is true.  Empty chunks (``a=1&&b=2``) are ignored.
    """
    if query.startswith("?"):
        query = query[1:]
    pairs = []
    for chunk in query.split(separator):
        if not chunk:
            continue
        if "=" in chunk:
            key, value = chunk.split("=")
        else:
            key, value = chunk, ""
        if not value and not keep_blank_values:
            continue
        pairs.append((unquote_plus(key), unquote_plus(value)))
    return pairs


def parse_qs(query, keep_blank_values=False, separator="&"):
    """Parse *query* into a dict mapping each key to the list of its values."""
    result = {}
    for key, value in parse_qsl(query, keep_blank_values, separator):
        result.setdefault(key, []).append(value)
    return result


def get_first(query, key, default=None):
    """Return the first value of *key* in *query*, or *default*."""
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name == key:
            return value
    return default


def build_query(params):
    """Encode a mapping (values may be lists) into a query string."""
    parts = []
    for key, value in params.items():
        values = value if isinstance(value, (list, tuple)) else [value]
        for item in values:
            parts.append(f"{quote_plus(str(key))}={quote_plus(str(item))}")
    return "&".join(parts)
