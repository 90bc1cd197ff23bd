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


def _resolves(words: list[str]) -> bool:
    cmd = get_command(app)
    for word in words:
        if not hasattr(cmd, "commands"):
            return True  # a command's arguments follow it
        sub = cmd.commands.get(word)
        if sub is None:
            return False
        cmd = sub
    return True


def test_every_fix_a_lower_package_carries_names_a_command_that_exists() -> None:
    from schemas import fixes
    from schemas.errors import Fix

    every = fixes.every()
    assert len(every) > 15
    bad = [f for f in every if f.command and not _resolves(list(f.command))]
    assert not bad, bad
    # rendered, the command is quoted where the sentence says; a fix without one is its sentence
    assert fixes.START_BROKER.render().startswith("start the embedded one with `trajlake up`")
    assert Fix("restart the machine").render() == "restart the machine"


LOWER = (
    "schemas",
    "fold",
    "lake",
    "ingest",
    "sandboxes",
    "judges",
    "pipelines",
    "learners",
    "rollouts",
    "api",
)
WRITTEN_FOR_PEOPLE = {
    (
        "judges/derive.py",
        "The hidden tests are the source task's",
    ),  # DRAFT.md, for the person who edits a draft
    ("judges/golden.py", "Golden cases made from reviewed"),  # a golden file's header
}
"""Text lower packages write into files for a person to read (not messages): may name commands."""


def test_lower_packages_name_no_command_in_a_message() -> None:
    """Lower packages carry a fix as data (schemas.fixes) for the CLI to render; docstrings may name them."""
    import ast

    found = []
    for pkg in LOWER:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            tree = ast.parse(path.read_text(encoding="utf-8"))
            docs = {
                id(n.value)
                for n in ast.walk(tree)
                if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)
            }
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                        and NAMED.search(node.value)):  # fmt: skip
                    if not any(rel == f and marker in node.value for f, marker in WRITTEN_FOR_PEOPLE):
                        found.append(f"{rel}:{node.lineno}: {node.value[:80]!r}")
    assert not found, found
