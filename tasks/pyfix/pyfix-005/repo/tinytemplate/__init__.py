"""tinytemplate - a minimal template engine."""

from .engine import SafeString, Template, TemplateError, render

__all__ = ["SafeString", "Template", "TemplateError", "render"]
