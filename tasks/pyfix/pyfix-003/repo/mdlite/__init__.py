"""mdlite - a tiny Markdown subset renderer."""

from .render import render, render_inline

__all__ = ["render", "render_inline"]
