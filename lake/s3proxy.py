"""An S3-compatible object store on loopback: s3proxy with its filesystem backend.

The lake and the blob store run on S3 the same as on a local directory; to test that
here, and to run a laptop deployment, this starts s3proxy (``org.gaul:s3proxy`` 2.6.0,
resolved from Maven Central by Maven like the Kafka broker) in front of a directory. A
bucket is a directory under it. :meth:`S3Proxy.storage_options` is what delta-rs and
:class:`ingest.blobs.BlobStore` need to reach it.

s3proxy 2.6.0 ignores ``If-None-Match`` on PUT, the conditional write delta-rs relies on
to detect a concurrent commit on S3: two writers on one host are serialised by the lake's
commit lock instead (:class:`lake.Lake`, ``commit_lock``). Across hosts, use a store that
honours conditional writes (AWS S3, MinIO), where delta-rs's own check is enough.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

from lake.errors import LakeError

IDENTITY = "trajlake"
CREDENTIAL = "trajlake-local-secret"
LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d %level %logger{{20}} %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="FILE"/></root>
</configuration>
"""


class S3ProxyError(LakeError):
    """s3proxy could not be resolved or started."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class S3Proxy:
    """An S3 endpoint over ``root`` (each sub-directory is a bucket).

    Args:
        root: the directory the objects live in (``<root>/data/<bucket>/<key>``).
        port: the loopback port (default: a free one).
    """

    def __init__(self, root: Path, *, port: int | None = None, host: str = "127.0.0.1") -> None:
        self.root = Path(root).absolute()
        self.data = self.root / "data"
        self.port = port or _free_port()
        self.host = host
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None

    def storage_options(self) -> dict[str, str]:
        """What delta-rs (object_store) needs to reach this endpoint."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": IDENTITY,
            "AWS_SECRET_ACCESS_KEY": CREDENTIAL,
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false",  # path style: the bucket is in the path
        }

    def fsspec_options(self) -> dict[str, Any]:
        """What fsspec's ``s3fs`` (the blob store) needs to reach this endpoint."""
        return {"key": IDENTITY, "secret": CREDENTIAL, "client_kwargs": {"endpoint_url": self.endpoint}}

    def bucket(self, name: str) -> str:
        """Create the bucket ``name`` (a directory of the filesystem backend); return ``s3://name``."""
        (self.data / name).mkdir(parents=True, exist_ok=True)
        return f"s3://{name}"

    def start(self, timeout_s: float = 60.0) -> S3Proxy:
        """Resolve the jars (first run), start the server, wait until it answers.

        Raises:
            S3ProxyError: no Java or Maven, or the server did not come up (its log tail included).
        """
        from infra.maven import MavenError, build_classpath, pom_path

        java = shutil.which("java")
        if java is None:
            raise S3ProxyError("Java not found: s3proxy needs a Java 17+ runtime on PATH")
        try:
            classpath = os.pathsep.join(build_classpath(pom_path("s3proxy"), "s3proxy"))
        except MavenError as exc:
            raise S3ProxyError(str(exc)) from exc
        self.data.mkdir(parents=True, exist_ok=True)
        log = self.root / "s3proxy.log"
        (self.root / "logback.xml").write_text(LOGBACK.format(log=log))
        props = self.root / "s3proxy.properties"
        props.write_text(
            f"s3proxy.endpoint=http://{self.host}:{self.port}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={IDENTITY}\n"
            f"s3proxy.credential={CREDENTIAL}\n"
            # newer AWS clients send checksum headers 2.6.0 does not know: accept, do not refuse
            "s3proxy.ignore-unknown-headers=true\n"
            "jclouds.provider=filesystem\n"
            f"jclouds.filesystem.basedir={self.data}\n"
        )
        with open(self.root / "stdout.log", "ab") as out:
            self._proc = subprocess.Popen(
                [java, "-Xmx256m", "-XX:+UseSerialGC", f"-Dlogback.configurationFile={self.root}/logback.xml",
                 "-cp", classpath, "org.gaul.s3proxy.Main", "--properties", str(props)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise S3ProxyError(f"s3proxy exited with code {self._proc.returncode}: {self._tail()}")
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5),
            ):
                return self
            time.sleep(0.1)
        self.stop()
        raise S3ProxyError(
            f"s3proxy did not answer on {self.endpoint} within {timeout_s:.0f}s: {self._tail()}"
        )

    def _tail(self) -> str:
        out = []
        for name in ("stdout.log", "s3proxy.log"):
            with contextlib.suppress(OSError):
                out += (self.root / name).read_text(errors="replace").splitlines()[-10:]
        return "\n".join(out)

    def stop(self) -> None:
        """Stop the server (its objects stay in ``root``)."""
        if self._proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._proc.pid, signal.SIGTERM)
        try:
            self._proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGKILL)
            self._proc.wait(10)
        self._proc = None

    def __enter__(self) -> S3Proxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    """``python -m lake.s3proxy --root DIR --port P [--bucket B ...]``: serve in the foreground."""
    import argparse

    ap = argparse.ArgumentParser(description="an S3 endpoint over a directory (s3proxy)")
    ap.add_argument("--root", type=Path, required=True)
    ap.add_argument("--port", type=int, default=9000)
    ap.add_argument("--bucket", action="append", default=[], help="create this bucket (repeatable)")
    args = ap.parse_args(argv)
    server = S3Proxy(args.root, port=args.port, host="0.0.0.0")
    for b in args.bucket:
        server.bucket(b)
    server.start()
    print(f"s3proxy on {server.endpoint} over {server.data}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: server.stop())
    assert server._proc is not None
    server._proc.wait()


if __name__ == "__main__":
    main()
