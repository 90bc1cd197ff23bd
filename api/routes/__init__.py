"""One router per resource of the query API."""

from api.routes import checkpoints, episodes, failures, health, judges, page, tables

__all__ = ["checkpoints", "episodes", "failures", "health", "judges", "page", "tables"]
