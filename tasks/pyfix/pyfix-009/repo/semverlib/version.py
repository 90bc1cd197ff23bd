"""The Version value type and the parser."""

import re
from dataclasses import dataclass, replace

_IDENT = r"[0-9A-Za-z-]+"
_SEMVER = re.compile(
    rf"""^v?
    (?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)
    (?:-(?P<pre>{_IDENT}(?:\.{_IDENT})*))?
    (?:\+(?P<build>{_IDENT}(?:\.{_IDENT})*))?
    $""",
    re.VERBOSE,
)


class InvalidVersion(ValueError):
    """Raised when a string is not a valid semantic version."""


@dataclass(frozen=True)
class Version:
    major: int
    minor: int
    patch: int
    prerelease: str = ""  # dot-separated identifiers, e.g. "rc.1"
    build: str = ""       # dot-separated identifiers, e.g. "exp.sha.5114f85"

    @property
    def is_prerelease(self):
        return bool(self.prerelease)

    def bump_major(self):
        return Version(self.major + 1, 0, 0)

    def bump_minor(self):
        return Version(self.major, self.minor + 1, 0)

    def bump_patch(self):
        if self.prerelease:
            return replace(self, prerelease="", build="")
        return Version(self.major, self.minor, self.patch + 1)

    def __str__(self):
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.prerelease:
            text += f"-{self.prerelease}"
        if self.build:
            text += f"+{self.build}"
        return text


def parse(text):
    """Parse *text* (an optional leading ``v`` is allowed) into a Version."""
    if isinstance(text, Version):
        return text
    match = _SEMVER.match(text.strip())
    if not match:
        raise InvalidVersion(f"invalid semantic version: {text!r}")
    pre = match.group("pre") or ""
    for ident in pre.split(".") if pre else ():
        if ident.isdigit() and len(ident) > 1 and ident.startswith("0"):
            raise InvalidVersion(f"numeric identifier with leading zero in {text!r}")
    return Version(
        int(match.group("major")),
        int(match.group("minor")),
        int(match.group("patch")),
        pre,
        match.group("build") or "",
    )
