"""cronlite - parse and evaluate 5-field cron expressions."""

from .expr import CronExpr
from .fields import parse_field

__all__ = ["CronExpr", "parse_field"]
