"""The web page of the query API: static files in ``api/static/`` (HTML, CSS, plain JS; no build step).

``index.html`` is served at ``/`` and the rest at ``/static/<name>``. The page
loads nothing from elsewhere (no CDN, fonts or images; the Content-Security-Policy
it is served with lets the browser fetch only from the service itself) and holds
no data: its script (``app.js``) calls the JSON endpoints of the same service
with relative URLs (so the service can sit under a path prefix). Every view has a
deep link (``#/episode/<id>?step=12``, ``#/failures?by=family&judge_version=v2``,
``#/judges/<name>/diff?from=v1&to=v2``, ...). When the service has a token, the page asks
for it (and says so when the one given is refused) and sends it as
``Authorization: Bearer`` on every call; it is kept in the tab's ``sessionStorage`` only.
"""

from __future__ import annotations

from pathlib import Path

STATIC_DIR = Path(__file__).resolve().parent / "static"
"""The page's files."""

INDEX = "index.html"

MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
"""Content type of each kind of file the page has (a file of another kind is not served)."""

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page may load and call only the service that served it."""


ASSETS: dict[str, Path] = {
    p.name: p
    for p in sorted(STATIC_DIR.iterdir())
    if p.is_file() and not p.name.startswith(".") and p.suffix in MEDIA_TYPES
}
"""The page's files by name, listed once at import: a request names one of these or gets a 404
(no request's name ever reaches the file system)."""


def asset(name: str) -> Path | None:
    """The file of the page named ``name`` (one of :data:`ASSETS`), or ``None``."""
    return ASSETS.get(name)
