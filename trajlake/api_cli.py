"""``trajlake api serve``: the query API over the lake, with uvicorn."""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from typing import Annotated, Any

import typer

from trajlake.options import LakeOpt
from trajlake.terminal import ExitCode, err_console, fail, settings

api_app = typer.Typer(help="The failure-analysis query API (FastAPI) and its web page.", no_args_is_help=True)


def _reviewers(path: Path | None) -> dict[str, str]:
    """``reviewer: token`` from TRAJLAKE_API_REVIEWERS (none: the API takes no verdicts)."""
    if path is None:
        return {}
    import yaml

    from schemas.control import REVIEWER

    try:
        doc = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        fail(f"cannot read the reviewers file {path} ({exc}); TRAJLAKE_API_REVIEWERS names a YAML file of "
             "reviewer: token", ExitCode.USAGE)  # fmt: skip
    if not isinstance(doc, dict) or not all(isinstance(v, str) and len(v) >= 16 for v in doc.values()):
        fail(f"{path} must map each reviewer to a token of at least 16 characters", ExitCode.USAGE)
    bad = [k for k in doc if not isinstance(k, str) or not REVIEWER.fullmatch(k)]
    if bad:
        fail(f"{path}: reviewer names must match {REVIEWER.pattern}: {bad[:3]}", ExitCode.USAGE)
    if len(set(doc.values())) < len(doc):
        fail(f"{path}: two reviewers share a token; each needs their own", ExitCode.USAGE)
    if settings().api_token in doc.values():
        fail(f"{path}: a reviewer's token is TRAJLAKE_API_TOKEN, the readers' token: give reviewers "
             "their own", ExitCode.USAGE)  # fmt: skip
    return dict(doc)


def _publisher(s: Any) -> Any:
    """What the API writes verdicts with: acknowledged publishing to the curation topic."""
    from ingest.publish import publish_events

    return lambda events: publish_events(s.kafka_bootstrap, s.topic_curation, events)


def blob_reader(s: Any) -> Any:
    """What the API reads blobs with: the settings' blob store, ``KeyError`` for a blob it lacks."""
    from ingest.blobs import BlobStore

    store: BlobStore | None = None

    def read(sha256: str) -> bytes:
        nonlocal store
        if store is None:  # opened at the first blob asked for (a remote store is not reached before)
            store = BlobStore(s.blobs(), **s.blob_options())
        return store.read_or_missing(sha256)

    return read


@api_app.command("serve")
def serve(
    host: Annotated[str | None, typer.Option(help="Interface (default: TRAJLAKE_API_HOST).")] = None,
    port: Annotated[
        int | None, typer.Option(min=0, max=65535, help="Port (default: TRAJLAKE_API_PORT; 0: any free one).")
    ] = None,
    lake: LakeOpt = None,
    prometheus: Annotated[
        str | None,
        typer.Option(
            help="The deployment's Prometheus (URL), shown on the page's health panel "
            "(default: TRAJLAKE_PROMETHEUS_URL)."
        ),
    ] = None,  # fmt: skip
    search_index: Annotated[
        Path | None,
        typer.Option(
            help="Directory of the text index searches use (default: one per lake under "
            "TRAJLAKE_HOME/cache/search); filled in the background."
        ),
    ] = None,  # fmt: skip
    index: Annotated[
        bool, typer.Option("--index/--no-index", help="Search with the text index (else every search scans).")
    ] = True,
) -> None:
    """Serve the read-only query API and its page until SIGINT/SIGTERM.

    With ``TRAJLAKE_API_TOKEN`` set, every route but ``/health`` (and the page
    itself, which holds no data) requires ``Authorization: Bearer <token>``.
    """
    import uvicorn

    from api import create_app

    s = settings()
    root = str(Path(lake).resolve()) if lake else s.lake_root()
    bind_host = host or s.api_host
    bind_port = s.api_port if port is None else port
    try:
        probe = socket.create_server((bind_host, bind_port))
    except OSError as exc:
        fail(f"cannot listen on {bind_host}:{bind_port} ({exc.strerror or exc}); choose another --port "
             "(or --port 0 for any free one)", ExitCode.NOT_READY)  # fmt: skip
    if bind_port == 0:
        bind_port = probe.getsockname()[1]
    probe.close()
    auth = "bearer token required" if s.api_token else "no token (set TRAJLAKE_API_TOKEN to require one)"
    reviewers = _reviewers(s.api_reviewers)
    if reviewers:
        auth += f"; {len(reviewers)} reviewers may post verdicts"
    err_console.print(f"serving lake [bold]{root}[/bold] on http://{bind_host}:{bind_port}/ ({auth})")

    # uvicorn shuts down gracefully on SIGINT/SIGTERM, restores the handlers it
    # found and raises the signal again: with these, that ends the command with
    # status 0 through the CLI's one exit path instead of killing the process.
    def stopped(signum: int, frame: Any) -> None:
        err_console.print(f"stopped ({signal.Signals(signum).name})")
        raise typer.Exit(code=0)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, stopped)
    app = create_app(root, token=s.api_token, storage_options=s.storage_options(root) or None,
                     reviewers=reviewers, publish=_publisher(s), review_topic=s.topic_curation,
                     prometheus_url=prometheus or s.prometheus_url, blobs=blob_reader(s),
                     search_index=(search_index or s.search_index(root)) if index else None)  # fmt: skip
    uvicorn.run(app, host=bind_host, port=bind_port, log_level="warning")


@api_app.command("index")
def index_command(
    lake: LakeOpt = None,
    search_index: Annotated[
        Path | None,
        typer.Option(help="Directory of the text index (default: the one `api serve` uses for this lake)."),
    ] = None,  # fmt: skip
) -> None:
    """Build the text index of the steps table now (what `api serve` builds in the background).

    One entry per data file of the newest version; entries of files the table no longer holds
    and untouched for an hour are removed.
    """
    import time

    from api.text_index import TextIndex
    from lake import Lake, LakeError

    s = settings()
    root = str(Path(lake).resolve()) if lake else s.lake_root()
    where = search_index or s.search_index(root)
    try:
        table = Lake(root, s.storage_options(root) or None).table("steps")
        fragments = list(table.to_pyarrow_dataset().get_fragments())
    except (LakeError, OSError) as exc:
        fail(f"cannot read the steps table of {root} ({exc}); fold the log into it first", ExitCode.NOT_READY)
    text_index = TextIndex(where, build=False)
    started = time.monotonic()

    def progress(done: int, total: int) -> None:
        err_console.print(f"  indexed {done}/{total} data files ({time.monotonic() - started:.0f} s)")

    built = text_index.build_now(fragments, progress=progress)
    removed = text_index.prune(TextIndex.key(f) for f in fragments)
    err_console.print(f"text index {text_index.root}: {built} data files indexed, "
                      f"{len(fragments) - built} already were, {removed} stale entries removed "
                      f"({time.monotonic() - started:.1f} s)")  # fmt: skip
