"""Every ``trajlake ...`` command a message or docstring tells a user to run exists.

A fix that names a command the CLI does not have (``trajlake broker start`` did) sends a user
nowhere; this reads the command names out of every module of the packages and the README and
walks the CLI's own command tree with them.
"""

from __future__ import annotations

import re
from pathlib import Path

from typer.main import get_command

from trajlake.cli import app

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("schemas", "infra", "fold", "lake", "sandboxes", "ingest", "judges", "rollouts", "learners",
            "pipelines", "api", "trajlake")  # fmt: skip
NAMED = re.compile(r"`trajlake((?: [a-z][a-z0-9-]*)+)")


def named_commands() -> dict[str, list[str]]:
    """``trajlake`` command lines named in backquotes, with where each is named."""
    out: dict[str, list[str]] = {}
    files = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))] + [ROOT / "README.md"]
    for path in files:
        for m in NAMED.finditer(path.read_text(encoding="utf-8")):
            out.setdefault(m.group(1).strip(), []).append(str(path.relative_to(ROOT)))
    return out


def test_every_command_a_message_names_exists() -> None:
    root = get_command(app)
    found = named_commands()
    assert len(found) > 20 and hasattr(root, "commands")  # (the scan and the walk see what they should)
    missing = {}
    for line, where in found.items():
        cmd = root
        for word in line.split():
            if not hasattr(cmd, "commands"):
                break  # a command's arguments follow it (typer's click is its own: no isinstance)
            sub = cmd.commands.get(word)
            if sub is None:
                missing[line] = where
                break
            cmd = sub
    assert not missing, missing
