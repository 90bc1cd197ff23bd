"""``/blobs/{sha256}``: the full text of an output or prompt kept in the blob store, opened on demand.

A step keeps large texts (tool output, prompt messages) as a preview and a content-addressed
reference (``blob: {sha256, size}``); the page asks for the whole text only when a person opens
it. The API reads blobs through the function the composition root gives it (``create_app(blobs=)``:
``trajlake api serve`` passes its blob store's), which raises ``KeyError`` for a blob it does not
hold. The content is checked against its address by the store.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request

from api.errors import LakeUnavailableError, NotFoundError
from api.models import BlobPublic, ErrorPublic

router = APIRouter(prefix="/blobs", tags=["blobs"])

MAX_BYTES = 16 << 20
"""Most bytes of a blob one answer holds."""


@router.get(
    "/{sha256}",
    responses={
        404: {"description": "No such blob."},
        503: {"model": ErrorPublic, "description": "No blob store, or the blob cannot be read."},
    },
)
def get_blob(
    request: Request,
    sha256: Annotated[str, Path(pattern=r"^[0-9a-f]{64}$", description="The blob's address (hex sha256).")],
    max_bytes: Annotated[
        int, Query(ge=1, le=MAX_BYTES, description=f"Bytes returned at most (up to {MAX_BYTES})")
    ] = 1 << 20,
) -> BlobPublic:
    """The blob's text (UTF-8; bytes that are not are replaced), cut to ``max_bytes``."""
    read = request.app.state.blobs
    if read is None:
        raise LakeUnavailableError("this service has no blob store to read (TRAJLAKE_BLOB_ROOT)")
    try:
        data = read(sha256)
    except KeyError as exc:
        raise NotFoundError(f"no blob {sha256} in the blob store") from exc
    except Exception as exc:  # noqa: BLE001 - an unreadable or corrupt store is the service's problem
        raise LakeUnavailableError(f"blob {sha256} cannot be read: {exc}") from exc
    cut = data[:max_bytes]
    return BlobPublic(
        sha256=sha256,
        size=len(data),
        text=cut.decode("utf-8", errors="replace"),
        truncated=len(data) > max_bytes,
    )
