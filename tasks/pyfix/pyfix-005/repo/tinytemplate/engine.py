"""A minimal ``{{ name|filter }}`` template engine."""

import html
import re

_TAG = re.compile(r"\{\{\s*(.*?)\s*\}\}")


class TemplateError(Exception):
    """Raised for malformed expressions or unknown filters."""


class SafeString(str):
    """A string that is already HTML-safe and must not be escaped again."""


_UNDEFINED = ""

DEFAULT_FILTERS = {
    "upper": lambda value: str(value).upper(),
    "lower": lambda value: str(value).lower(),
    "title": lambda value: str(value).title(),
    "strip": lambda value: str(value).strip(),
    "length": len,
    "join": lambda value: ", ".join(str(item) for item in value),
    "safe": lambda value: SafeString(value),
}


class Template:
    """A compiled template."""

    def __init__(self, source, autoescape=True, filters=None):
        self.source = source
        self.autoescape = autoescape
        self.filters = dict(DEFAULT_FILTERS)
        if filters:
            self.filters.update(filters)

    def _lookup(self, name, context):
        value = context
        for part in name.split("."):
            if isinstance(value, dict):
                if part not in value:
                    return _UNDEFINED
                value = value[part]
            else:
                try:
                    value = getattr(value, part)
                except AttributeError:
                    return _UNDEFINED
        return value

    def _escape(self, value):
        if not self.autoescape or isinstance(value, SafeString):
            return str(value)
        return html.escape(str(value))

    def _evaluate(self, expression, context):
        name, *filter_names = [part.strip() for part in expression.split("|")]
        if not name:
            raise TemplateError(f"empty expression in {{{{ {expression} }}}}")
        value = self._escape(self._lookup(name, context))
        for filter_name in filter_names:
            try:
                func = self.filters[filter_name]
            except KeyError:
                raise TemplateError(f"unknown filter {filter_name!r}") from None
            value = func(value)
        return str(value)

    def render(self, context=None, **kwargs):
        """Render the template with *context* (a dict) and/or keyword args."""
        data = dict(context or {})
        data.update(kwargs)
        return _TAG.sub(lambda match: self._evaluate(match.group(1), data), self.source)


def render(source, context=None, **kwargs):
    """Shortcut for ``Template(source).render(context, **kwargs)``."""
    return Template(source).render(context, **kwargs)
