"""tests/helpers/vllm_sdist.py fetches an sdist with httpx: index lookup, sha256 check, unpack (a local server)."""

from __future__ import annotations

import hashlib
import http.server
import io
import tarfile
import threading

import pytest
import vllm_sdist as upstream

from cookbook.fixes.pack import FixError


def _sdist(version: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = f"__version__ = version = '{version}'\n".encode()
        info = tarfile.TarInfo(f"vllm-{version}/vllm/_version.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture
def index(tmp_path, monkeypatch):
    files: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(upstream, "INDEX", base + "/simple/vllm/")
    monkeypatch.setattr(upstream, "cache_dir", lambda: tmp_path / "cache")
    yield base, files
    server.shutdown()


def test_fetches_checks_and_unpacks(index):
    base, files = index
    sdist = _sdist("9.9.9")
    files["/files/vllm-9.9.9.tar.gz"] = sdist
    sha = hashlib.sha256(sdist).hexdigest()
    files["/simple/vllm/"] = f'<a href="{base}/files/vllm-9.9.9.tar.gz#sha256={sha}">x</a>'.encode()
    pkg = upstream.vllm_source("9.9.9")
    assert (pkg / "_version.py").read_text() == "__version__ = version = '9.9.9'\n"


def test_bad_sha_and_missing_version_are_fix_errors(index):
    base, files = index
    files["/files/vllm-9.9.8.tar.gz"] = _sdist("9.9.8")
    files["/simple/vllm/"] = f'<a href="{base}/files/vllm-9.9.8.tar.gz#sha256={"0" * 64}">x</a>'.encode()
    with pytest.raises(FixError, match="is not the index's"):
        upstream.vllm_source("9.9.8")
    with pytest.raises(FixError, match="is not on"):
        upstream.vllm_source("1.0.0")
    files.pop("/simple/vllm/")
    with pytest.raises(FixError, match="cannot read"):
        upstream.vllm_source("1.0.0")
