"""What every ``trajlake`` command shares: the consoles, the settings, and how a command fails.

A command never prints a Python traceback for a failure a user can meet on a
working installation (a broker that is down, an image not built yet, a missing
lake, a bad argument, Ctrl-C): it prints one sentence that names what is wrong
and the command that fixes it, and leaves with one of the exit codes below.
``--debug`` (anywhere on the command line) or ``TRAJLAKE_DEBUG=1`` adds the
traceback. An error nobody expected (a bug) is reported in one line too, with
the traceback kept in ``$TRAJLAKE_HOME/logs/`` so that nothing is lost.
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import traceback
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from schemas.errors import TrajlakeError, UnavailableError

if TYPE_CHECKING:
    from trajlake.settings import Settings


class ExitCode(IntEnum):
    """The exit statuses of every ``trajlake`` command (the README lists them)."""

    OK = 0
    """Done."""
    FAILED = 1
    """The command ran and its outcome is negative (lakes differ, a check failed, a task was
    rejected, the demo did not learn), or an operation it started failed."""
    USAGE = 2
    """A bad argument, option or setting; nothing was done."""
    NOT_READY = 3
    """Something the command needs is missing or not running (broker, image, engine, lake, Java);
    the message names the command that prepares it."""
    OUTPUT_LOST = 120
    """The command finished but its output could not be written (full disk, closed pipe)."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (SIGINT)."""


console = Console()
err_console = Console(stderr=True)

_debug = os.environ.get("TRAJLAKE_DEBUG", "").lower() in ("1", "true", "yes")


def set_debug(on: bool) -> None:
    """Show tracebacks with error messages (``--debug``)."""
    global _debug
    _debug = _debug or on


def debug() -> bool:
    """Whether tracebacks are shown."""
    return _debug


def settings() -> Settings:
    """The settings of this invocation (environment ``TRAJLAKE_*``).

    Raises:
        typer.Exit: a setting is malformed (status 2, after one sentence naming it).
    """
    from pydantic import ValidationError

    from trajlake.settings import Settings

    try:
        return Settings()
    except ValidationError as exc:
        first = exc.errors()[0]
        name = "TRAJLAKE_" + "_".join(str(p) for p in first["loc"]).upper()
        fail(
            f"the setting {name}={os.environ.get(name, '')!r} is invalid ({first['msg']}); fix or unset it",
            ExitCode.USAGE,
        )


def fail(problem: str | BaseException, code: ExitCode | None = None) -> NoReturn:
    """Print ``problem`` as one error line and leave the command with ``code``.

    Args:
        problem: a sentence, or an exception whose message is one.
        code: the exit status (default: derived from the exception's kind).
    """
    if isinstance(problem, BaseException):
        message, derived = describe(problem)
        code = code if code is not None else derived
        if _debug:
            err_console.print("".join(traceback.format_exception(problem)), markup=False, highlight=False)
    else:
        message, code = problem, code if code is not None else ExitCode.FAILED
    err_console.print(f"[bold red]error:[/bold red] {escape(message)}", highlight=False)
    raise typer.Exit(code=int(code))


def warn(message: str) -> None:
    """One warning line on stderr."""
    err_console.print(f"[yellow]warning:[/yellow] {escape(message)}", highlight=False)


def note(message: str) -> None:
    """One progress line on stderr (what the command is doing now)."""
    err_console.print(f"[dim]{escape(message)}[/dim]", highlight=False)


def describe(exc: BaseException) -> tuple[str, ExitCode]:
    """The sentence and exit status an exception stands for.

    Trajlake's own errors carry their sentence; the third-party errors a user can
    meet (Kafka unreachable, Delta tables missing, files, a full disk) are put
    into one here. Anything else is a bug: its traceback goes to a file.
    """
    if isinstance(exc, UnavailableError):
        return _text(exc), ExitCode.NOT_READY
    if isinstance(exc, TrajlakeError):
        return _text(exc), ExitCode.FAILED
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted", ExitCode.INTERRUPTED
    kafka = _kafka_problem(exc)
    if kafka:
        return kafka, ExitCode.NOT_READY
    if isinstance(exc, OSError):
        return _os_problem(exc)
    where = _save_traceback(exc)
    return (
        f"unexpected {type(exc).__name__}: {_text(exc)} (a bug in trajlake: the traceback is in {where}; "
        "rerun with --debug to print it)",
        ExitCode.FAILED,
    )


def _text(exc: BaseException) -> str:
    text = exc.explained().strip() if isinstance(exc, TrajlakeError) else str(exc).strip()
    return text or type(exc).__name__


def _kafka_problem(exc: BaseException) -> str | None:
    try:
        from kafka import errors as kafka_errors
    except ImportError:  # pragma: no cover - kafka-python is a dependency
        return None
    unreachable = tuple(
        getattr(kafka_errors, name)
        for name in ("NoBrokersAvailable", "KafkaConnectionError", "BrokerNotAvailableError")
        if hasattr(kafka_errors, name)
    )
    if isinstance(exc, unreachable):
        bootstrap = os.environ.get("TRAJLAKE_KAFKA_BOOTSTRAP", "127.0.0.1:9092")
        return (
            f"no Kafka broker answers at {bootstrap}; start the embedded one with `trajlake up` "
            "(or point TRAJLAKE_KAFKA_BOOTSTRAP at a running cluster)"
        )
    if isinstance(exc, kafka_errors.KafkaTimeoutError):
        return f"Kafka did not answer in time ({_text(exc)}); check `trajlake status`"
    return None


def _os_problem(exc: OSError) -> tuple[str, ExitCode]:
    name = f" {exc.filename}" if exc.filename else ""
    if exc.errno == errno.ENOSPC:
        return f"the disk is full{name and ' at' + name}; free some space and run the command again", (
            ExitCode.FAILED
        )
    if isinstance(exc, FileNotFoundError):
        return f"no such file or directory:{name or ' ' + _text(exc)}", ExitCode.FAILED
    if isinstance(exc, PermissionError):
        return f"permission denied:{name or ' ' + _text(exc)} (run as a user who may, or as root)", (
            ExitCode.FAILED
        )
    return f"{exc.strerror or _text(exc)}{name and ':' + name}", ExitCode.FAILED


def _save_traceback(exc: BaseException) -> str:
    """Write the traceback under ``$TRAJLAKE_HOME/logs`` (or the temp dir) and return the path."""
    text = "".join(traceback.format_exception(exc))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    for root in (Path(os.environ.get("TRAJLAKE_HOME", ".trajlake")) / "logs", Path("/tmp")):
        path = root / f"trajlake-error-{stamp}-{os.getpid()}.txt"
        try:
            root.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return str(path)
        except OSError:
            continue
    return "(nowhere: no writable directory)"
