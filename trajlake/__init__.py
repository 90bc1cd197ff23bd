"""trajlake: the CLI and settings that wire the packages together (composition root only)."""

from schemas.events import SDK_VERSION

__version__ = SDK_VERSION
"""One version: the SDK's, recorded by every producer."""
