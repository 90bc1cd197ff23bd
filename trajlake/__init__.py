"""trajlake: the CLI and settings that wire the packages together (composition root only)."""

__version__ = "0.1.0"
