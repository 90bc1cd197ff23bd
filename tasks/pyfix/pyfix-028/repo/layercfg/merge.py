"""Recursive merging of configuration dictionaries."""

from collections.abc import Mapping


def _merge_into(target, source):
    """Merge ``source`` into ``target`` in place; nested mappings are merged
    recursively, everything else is replaced."""
    for key, value in source.items():
        if isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge_into(target[key], value)
        else:
            target[key] = value
    return target


def deep_merge(*layers):
    """Merge configuration layers from left (lowest priority) to right.

    Nested dictionaries are merged key by key; any other value in a later layer
    replaces the earlier one. The inputs are never modified and the result is a
    new dict that shares no mutable state with them.
    """
    if not layers:
        return {}
    result = dict(layers[0])
    for layer in layers[1:]:
        _merge_into(result, layer)
    return result
