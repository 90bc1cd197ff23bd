"""The tools a policy can use, and reading an action out of a model's completion.

They are defined once, below both rollouts and judges, in :mod:`sandboxes.tools`.
"""

from sandboxes.tools import TOOLS, ToolAction, parse_action

__all__ = ["TOOLS", "ToolAction", "parse_action"]
