"""Content-addressed blob store for large outputs (sha256), written through fsspec.

The default root is a local directory under ``$TRAJLAKE_HOME/blobs``; any fsspec
URL (``s3://``, ``gs://``, ``memory://``) works the same. A blob is written
before the event that references it is recorded, so references never dangle.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

import fsspec
from fsspec.core import url_to_fs

from ingest.errors import IngestError
from schemas.events import BlobRef


class BlobStore:
    """Stores bytes under their sha256.

    Args:
        root: local path or fsspec URL of the store's root.
        storage_options: passed to fsspec for remote stores.
    """

    def __init__(self, root: str, **storage_options: Any) -> None:
        self.root = str(root).rstrip("/")
        fs, path = url_to_fs(self.root, **storage_options)
        self.fs: fsspec.AbstractFileSystem = fs
        self._path = path.rstrip("/")
        self.fs.makedirs(self._path, exist_ok=True)

    def _blob_path(self, sha256: str) -> str:
        return f"{self._path}/{sha256[:2]}/{sha256[2:4]}/{sha256}"

    def put(self, data: bytes) -> BlobRef:
        """Store ``data`` (idempotent) and return its reference."""
        sha = hashlib.sha256(data).hexdigest()
        path = self._blob_path(sha)
        if not self.fs.exists(path):
            parent = path.rsplit("/", 1)[0]
            self.fs.makedirs(parent, exist_ok=True)
            tmp = f"{parent}/.tmp-{uuid.uuid4().hex}"
            try:
                with self.fs.open(tmp, "wb") as fh:
                    fh.write(data)
                self.fs.mv(tmp, path)
            except OSError as exc:
                raise IngestError(f"cannot write blob {sha} under {self.root}: {exc}") from exc
        return BlobRef(sha256=sha, size=len(data))

    def put_text(self, text: str) -> BlobRef:
        """Store UTF-8 text."""
        return self.put(text.encode("utf-8"))

    def get(self, ref: BlobRef | str) -> bytes:
        """The bytes of a blob.

        Raises:
            IngestError: no such blob, or its content does not match its address.
        """
        sha = ref.sha256 if isinstance(ref, BlobRef) else ref
        try:
            with self.fs.open(self._blob_path(sha), "rb") as fh:
                data: bytes = fh.read()
        except FileNotFoundError as exc:
            raise IngestError(f"no blob {sha} under {self.root}") from exc
        if hashlib.sha256(data).hexdigest() != sha:
            raise IngestError(f"blob {sha} under {self.root} is corrupt")
        return data

    def read_or_missing(self, sha256: str) -> bytes:
        """The bytes of a blob, ``KeyError`` when the store does not hold it (the query API's reader).

        Raises:
            KeyError: no such blob.
            IngestError: its content does not match its address.
        """
        if not self.exists(sha256):
            raise KeyError(sha256)
        return self.get(sha256)

    def get_text(self, ref: BlobRef | str) -> str:
        """A blob decoded as UTF-8."""
        return self.get(ref).decode("utf-8")

    def exists(self, ref: BlobRef | str) -> bool:
        """Whether the blob is stored."""
        sha = ref.sha256 if isinstance(ref, BlobRef) else ref
        return bool(self.fs.exists(self._blob_path(sha)))
