"""``trajlake sandbox ...``: run a command in a fresh sandbox, build base images, self-test."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from trajlake.options import BackendOpt
from trajlake.terminal import ExitCode, console, err_console, fail, settings, warn

sandbox_app = typer.Typer(help="Isolated sandboxes: local (namespaces) and docker.", no_args_is_help=True)


def _backend(name: Any, image: str | None = None) -> Any:
    from trajlake.preflight import require_backend, require_images

    backend = require_backend(settings(), name.value if name else None)
    require_images(backend, [image])
    return backend


@sandbox_app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    backend: BackendOpt = None,
    image: Annotated[str | None, typer.Option(help="Recorded image name or digest.")] = None,
    timeout: Annotated[float, typer.Option(min=0.01, help="Wall-clock timeout, seconds.")] = 60.0,
    memory: Annotated[int, typer.Option(min=16, help="Memory limit, MiB.")] = 512,
    pids: Annotated[int, typer.Option(min=8, help="Process limit.")] = 128,
    disk: Annotated[int, typer.Option(min=1, help="Workspace size bound, MiB.")] = 256,
    workspace: Annotated[
        Path | None,
        typer.Option(exists=True, file_okay=False, help="Directory copied in as the initial workspace."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as one JSON object.")] = False,
) -> None:
    """Run one command (after --) in a fresh sandbox and print the result."""
    from sandboxes import SandboxSpec

    cmd = list(ctx.args)
    if not cmd:
        fail("no command: use `trajlake sandbox run [OPTIONS] -- CMD...`", ExitCode.USAGE)
    bk = _backend(backend, image)
    spec = SandboxSpec(
        image=image,
        workspace=workspace,
        memory_mb=memory,
        pids=pids,
        disk_mb=disk,
        exec_timeout_s=timeout,
    )
    try:
        with bk.create(spec) as sb:
            result = sb.exec(cmd)
            image_digest = sb.image_digest
    finally:
        bk.close()
    if as_json:
        out = result.to_dict()
        out["backend"] = bk.name
        out["image"] = image_digest
        print(json.dumps(out))
        return
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    notes = [f"exit {result.exit_code}", f"{result.duration_s * 1000:.0f} ms", f"{bk.name}"]
    notes += [n for n, on in (("timed out", result.timed_out), ("OOM-killed", result.oom_killed),
                              ("output truncated", result.truncated)) if on]  # fmt: skip
    err_console.print(f"[dim]{', '.join(notes)}[/dim]")
    raise typer.Exit(code=min(result.exit_code, 255))


@sandbox_app.command("build-image")
def build_image_cmd(
    name: Annotated[str, typer.Option(help="Name sandboxes ask for.")] = "trajlake-base",
    suite: Annotated[str, typer.Option(help="Debian suite.")] = "bookworm",
    mirror: Annotated[str, typer.Option(help="Debian mirror.")] = "http://deb.debian.org/debian",
    package: Annotated[
        list[str] | None, typer.Option("--package", "-p", help="Extra package (repeatable).")
    ] = None,
    docker: Annotated[
        bool | None,
        typer.Option(
            "--docker/--no-docker",
            help="Import into the Docker engine too (default: if one answers; the local backend needs none).",
        ),
    ] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if the recipe is recorded.")] = False,
) -> None:
    """Build a base image offline (debootstrap -> docker import) and record its digests."""
    from sandboxes import ImageStore, SandboxUnavailableError, build_image
    from sandboxes.docker_backend import docker_client
    from sandboxes.images import DEFAULT_PACKAGES

    s = settings()
    store = ImageStore(s.image_store)
    packages = list(DEFAULT_PACKAGES) + list(package or [])
    client = None
    if docker is not False:
        try:
            client = docker_client(s.sandbox_config())
        except SandboxUnavailableError as exc:
            if docker:
                raise
            warn(f"{exc}; building for the local backend only (rerun with --docker once an engine runs)")
    try:
        with Progress(
            SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err_console
        ) as progress:
            task = progress.add_task(f"building {name} ({suite})", total=None)

            def on_line(line: str) -> None:
                if line.startswith("I: "):
                    progress.update(task, description=f"{name}: {line[3:][:90]}")

            record, built = build_image(
                store,
                name=name,
                suite=suite,
                mirror=mirror,
                packages=packages,
                docker_client=client,
                force=force,
                on_line=on_line,
            )
    finally:
        if client is not None:
            client.close()
    verb = "built" if built else "up to date"
    console.print(f"[green]{record.name}[/green] {verb}")
    console.print_json(json.dumps({k: v for k, v in record.__dict__.items() if k != "extra"}))


@sandbox_app.command("images")
def images() -> None:
    """Recorded base images and their digests."""
    from sandboxes import ImageStore

    store = ImageStore(settings().image_store)
    table = Table(title=f"images in {store.root}")
    for col in ("name", "docker image id", "rootfs sha256", "packages", "built"):
        table.add_column(col)
    records = store.records()
    for rec in records.values():
        table.add_row(
            rec.name,
            (rec.image_id or "-")[:19],
            rec.rootfs_sha256[:12],
            ", ".join(rec.packages),
            rec.built_at,
        )
    console.print(table)
    if not records:
        err_console.print("no images yet; build the base image with `trajlake sandbox build-image`")


@sandbox_app.command("selftest")
def selftest(
    backend: BackendOpt = None,
    image: Annotated[str | None, typer.Option(help="Recorded image to test on.")] = None,
    check: Annotated[list[str] | None, typer.Option(help="Run only these checks (repeatable).")] = None,
) -> None:
    """Run the conformance checks (behaviour and isolation attempts) and print a table."""
    from sandboxes.conformance import CHECKS, run_conformance

    names = list(check) if check else list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        fail(f"unknown checks {', '.join(unknown)}; known: {', '.join(CHECKS)}", ExitCode.USAGE)
    bk = _backend(backend, image)
    table = Table(title=f"sandbox selftest: {bk.name}" + (f" ({image})" if image else ""))
    table.add_column("check")
    table.add_column("result")
    table.add_column("time", justify="right")
    table.add_column("detail")
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task("checks", total=len(names))

        def show(res: Any) -> None:
            progress.update(task, advance=1, description=f"{res.name}: {'ok' if res.passed else 'FAILED'}")

        try:
            results = run_conformance(bk, image=image, names=names, on_result=show)
        finally:
            bk.close()
    for res in results:
        table.add_row(
            res.name,
            "[green]pass[/green]" if res.passed else "[bold red]FAIL[/bold red]",
            f"{res.duration_s:.2f}s",
            escape(res.detail),
        )
    console.print(table)
    failed = [r.name for r in results if not r.passed]
    if failed:
        err_console.print(
            f"[bold red]{len(failed)} of {len(results)} checks failed:[/bold red] {', '.join(failed)}"
        )
        raise typer.Exit(code=ExitCode.FAILED)
    console.print(f"[green]all {len(results)} checks passed[/green]")
