"""``GET /blobs/{sha256}``: a large output's full text, opened on demand from the real blob store."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from api import create_app
from ingest.blobs import BlobStore
from lake import Lake


def test_a_blob_is_served_whole_or_cut_and_only_with_the_token(tmp_path: Path) -> None:
    Lake(tmp_path / "lake").ensure()
    store = BlobStore(str(tmp_path / "blobs"))
    text = "é" + "x" * 5000  # the cut falls inside nothing: bytes that do not decode are replaced
    ref = store.put_text(text)
    app = create_app(tmp_path / "lake", token="tok", blobs=store.read_or_missing)
    auth = {"Authorization": "Bearer tok"}
    with TestClient(app) as c:
        whole = c.get(f"/blobs/{ref.sha256}", headers=auth).json()
        assert whole == {"sha256": ref.sha256, "size": ref.size, "text": text, "truncated": False}
        cut = c.get(f"/blobs/{ref.sha256}", params={"max_bytes": 1}, headers=auth).json()
        assert cut["truncated"] and cut["text"] == "\ufffd" and cut["size"] == ref.size
        missing = c.get("/blobs/" + "0" * 64, headers=auth)
        assert missing.status_code == 404
        assert missing.json()["detail"] == f"no blob {'0' * 64} in the blob store"
        assert c.get("/blobs/not-a-sha", headers=auth).status_code == 422
        assert c.get(f"/blobs/{ref.sha256}").status_code == 401
    # a corrupt blob is the service's problem, said as such
    path = next(p for p in (tmp_path / "blobs").rglob(ref.sha256))
    path.write_bytes(b"tampered")
    with TestClient(app) as c:
        r = c.get(f"/blobs/{ref.sha256}", headers=auth)
        assert r.status_code == 503 and "is corrupt" in r.json()["detail"]
    with TestClient(create_app(tmp_path / "lake")) as c:
        r = c.get(f"/blobs/{ref.sha256}")
        assert r.status_code == 503 and r.json()["detail"].startswith("this service has no blob store")
