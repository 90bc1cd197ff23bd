"""The ``trajlake`` command line: the composition root that wires the packages together.

Every command fails the same way (:mod:`trajlake.terminal`): one sentence on
stderr naming what is wrong and the fix, and an exit status from
:class:`~trajlake.terminal.ExitCode`; arguments are validated by the parser
(:mod:`trajlake.options`); prerequisites are checked before work starts
(:mod:`trajlake.preflight`).
"""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import traceback
from typing import Annotated

import typer
from rich.markup import escape

from trajlake import (
    __version__,
    broker_cli,
    demo_cli,
    doctor_cli,
    drift_cli,
    eval_cli,
    lake_cli,
    log_cli,
    loop_cli,
    rejudge_cli,
    retract_cli,
)
from trajlake.api_cli import api_app
from trajlake.failures_cli import failures_app
from trajlake.judges_cli import judges_app, tasks_app
from trajlake.lake_cli import lake_app, pipeline_app
from trajlake.log_cli import events_app, schemas_app, spool_app
from trajlake.review_cli import review_app
from trajlake.sandbox_cli import sandbox_app
from trajlake.terminal import ExitCode, console, describe, err_console, set_debug

app = typer.Typer(
    name="trajlake",
    help="Event-sourced data platform for agentic RL: Kafka log -> Beam -> Delta -> learners.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
# one module per command group; this module only wires them (and is the entry point)
for name, command in (
    ("rollout", loop_cli.rollout), ("train", loop_cli.train), ("lineage", loop_cli.lineage),
    ("publish-checkpoint", loop_cli.publish_checkpoint), ("export", loop_cli.export),
    ("rejudge", rejudge_cli.rejudge), ("eval", eval_cli.evaluate), ("drift", drift_cli.drift),
    ("retract", retract_cli.retract), ("up", broker_cli.up), ("down", broker_cli.down),
    ("status", broker_cli.status), ("topics", broker_cli.topics_ensure), ("doctor", doctor_cli.doctor),
    ("import", log_cli.import_), ("replay", lake_cli.replay_cmd), ("demo", demo_cli.demo),
):  # fmt: skip
    app.command(name)(command)
for name, group in (
    ("schemas", schemas_app), ("spool", spool_app), ("events", events_app), ("pipeline", pipeline_app),
    ("lake", lake_app), ("sandbox", sandbox_app), ("judges", judges_app), ("tasks", tasks_app),
    ("api", api_app), ("failures", failures_app), ("review", review_app),
):  # fmt: skip
    app.add_typer(group, name=name)


def _show_version(value: bool) -> None:
    if value:
        console.print(f"trajlake {__version__} (Python {sys.version.split()[0]})")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_show_version, is_eager=True, help="Print the version.")
    ] = False,
    debug: Annotated[
        bool, typer.Option("--debug", help="Print tracebacks with errors (anywhere; or TRAJLAKE_DEBUG=1).")
    ] = False,
) -> None:
    """Event-sourced data platform for agentic RL: Kafka log -> Beam -> Delta -> learners."""
    set_debug(debug)


def _take_debug_flag(argv: list[str]) -> tuple[list[str], bool]:
    """``argv`` without ``--debug`` (wherever it stands before a ``--``), and whether it was there."""
    end = argv.index("--") if "--" in argv else len(argv)
    head = [a for a in argv[:end] if a != "--debug"]
    return head + argv[end:], len(head) != end


def main() -> None:
    """Entry point of the ``trajlake`` console script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # kafka-python logs every reconnect attempt; the spool and our own messages say what matters.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    # Beam probes optional Google Cloud clients at import and says so on the root logger.
    logging.getLogger().addFilter(lambda record: "apitools not found" not in record.getMessage())
    logging.getLogger("apache_beam").setLevel(logging.WARNING)
    args, debug_flag = _take_debug_flag(sys.argv[1:])
    set_debug(debug_flag)
    try:
        app(args=args, prog_name="trajlake")
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
        if code == ExitCode.INTERRUPTED:
            err_console.print("interrupted")
    except BaseException as exc:  # noqa: BLE001 - every failure leaves as one sentence and a status
        code = _report(exc)
    _leave(code)


def _report(exc: BaseException) -> int:
    from trajlake.terminal import debug

    message, code = describe(exc)
    if debug():
        traceback.print_exception(exc)
    err_console.print(
        f"[bold red]error:[/bold red] {escape(message)}" if code != ExitCode.INTERRUPTED else "interrupted",
        highlight=False,
    )
    return int(code)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _leave(code: int) -> None:
    """Exit like the interpreter does, less the native teardown.

    Every command has written, flushed and closed what it produced by the time it returns. The
    interpreter's own exit would then destroy the native thread pools of the libraries a command
    used (Arrow's under the Delta reader, the Delta runtime, gRPC under the Beam runner) and, now
    and then, one of them is still joinable: ``std::terminate`` aborts a finished command with
    SIGABRT (seen on ``trajlake lineage`` and on the demo). So: wait for non-daemon threads and run
    the ``atexit`` hooks as a normal exit would, flush, and leave with ``os._exit``.
    """
    import os

    threading_shutdown = getattr(threading, "_shutdown", None)
    if threading_shutdown is not None:
        try:
            threading_shutdown()
        except KeyboardInterrupt:
            code = code or ExitCode.INTERRUPTED
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            # output was lost (a full disk, a closed pipe): never report success then; 120 is
            # what the interpreter itself exits with when it cannot flush at exit
            code = code or ExitCode.OUTPUT_LOST
    os._exit(code)
