"""Inventory service package."""
__version__ = "0.4.2"
