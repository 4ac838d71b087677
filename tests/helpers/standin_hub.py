"""A stand-in for the Hugging Face Hub (the real Hub is not reachable from the test machines):
a local HTTP server on 127.0.0.1 that speaks the part of the Hub's API huggingface_hub uses:

    GET  /api/{models|datasets}/<repo>[/revision/<rev>]  repo info: the commit sha, the files
    GET  /api/{models|datasets}/<repo>/tree/<rev>       the file list: sizes, git blob ids, LFS sha256
    HEAD /[datasets/]<repo>/resolve/<rev>/<path>        X-Repo-Commit, ETag, size
    GET  /[datasets/]<repo>/resolve/<rev>/<path>        the bytes; `Range: bytes=N-` answered with 206

Faults it can play, for the tests of what the client does about them: `cut` (path -> bytes
sent before the first GET of that file drops the connection), `corrupt` (paths served with
one byte changed, the listing's checksums unchanged), `listed_size` (path -> the size the
listing claims). A file given as an int is answered with that HTTP status.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"
LFS_SUFFIXES = (".gguf", ".safetensors", ".parquet", ".bin")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class StandinHub:
    def __init__(
        self,
        files: dict[str, bytes | int],
        repo: str = "openai/gsm8k",
        repo_type: str = "dataset",
        commit: str = COMMIT,
        cut: dict[str, int] | None = None,
        corrupt: set[str] | None = None,
        listed_size: dict[str, int] | None = None,
    ):
        self.files, self.repo, self.repo_type, self.commit = files, repo, repo_type, commit
        self.cut, self.corrupt, self.listed_size = dict(cut or {}), set(corrupt or ()), dict(listed_size or {})
        self.requests: list[tuple[str, str]] = []  # (method, path)
        self.ranges: list[tuple[str, str]] = []  # (file path, Range header)
        hub = self
        resolve_prefix = ("/datasets/" if repo_type == "dataset" else "/") + repo + "/resolve/"
        api_prefix = f"/api/{repo_type}s/{repo}"

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _json(self, obj, status=200):
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _status(self, code: int):
                self.send_response(code)
                self.send_header("X-Error-Code", "EntryNotFound" if code == 404 else "ServerError")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _api(self, rest: str):
                kind, _, rev = rest.partition("/")
                if rev.split("/")[0] not in ("main", hub.commit):
                    return self._status(404)
                if kind == "revision":
                    return self._json(
                        {"id": hub.repo, "sha": hub.commit, "siblings": [{"rfilename": p} for p in hub.files]}
                    )
                if kind == "tree":
                    return self._json([hub.entry(p) for p, c in hub.files.items() if isinstance(c, bytes)])
                return self._status(404)

            def _resolve(self, rest: str, body: bool):
                rev, _, path = rest.partition("/")
                content = hub.files.get(path) if rev in ("main", hub.commit) else 404
                if content is None or isinstance(content, int):
                    return self._status(content or 404)
                data = hub.served(path)
                start = 0
                rng = self.headers.get("Range")
                if rng and body:
                    hub.ranges.append((path, rng))
                    start = int(rng.split("=", 1)[1].split("-", 1)[0] or 0)
                self.send_response(206 if start else 200)
                self.send_header("X-Repo-Commit", hub.commit)
                self.send_header("ETag", '"' + hub.etag(path) + '"')
                self.send_header("Accept-Ranges", "bytes")
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                if not body:
                    return
                cut = hub.cut.pop(path, None) if not start else None
                if cut is not None:  # the connection drops mid-file, once
                    self.wfile.write(data[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(data[start:])

            def _answer(self, body: bool):
                path = unquote(urlparse(self.path).path)
                hub.requests.append((self.command, path))
                if path.startswith(api_prefix) and self.command == "GET":
                    return self._api(path[len(api_prefix) :].lstrip("/") or "revision/main")
                if path.startswith(resolve_prefix):
                    return self._resolve(path[len(resolve_prefix) :], body)
                return self._status(404)

            def do_HEAD(self):
                self._answer(False)

            def do_GET(self):
                self._answer(True)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def is_lfs(self, path: str) -> bool:
        return path.endswith(LFS_SUFFIXES)

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if self.is_lfs(path) else git_blob_id(data)

    def served(self, path: str) -> bytes:
        data = self.files[path]
        if path in self.corrupt:
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        return data

    def entry(self, path: str) -> dict:
        data = self.files[path]
        size = self.listed_size.get(path, len(data))
        e = {"type": "file", "path": path, "size": size, "oid": git_blob_id(data)}
        if self.is_lfs(path):
            e["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": size, "pointerSize": 134}
        return e

    def resolved(self, method: str = "GET") -> list[str]:
        """Repository paths fetched with `method` through /resolve/."""
        marker = "/resolve/"
        return [p.split(marker, 1)[1].split("/", 1)[1] for m, p in self.requests if m == method and marker in p]

    def close(self):
        self.server.shutdown()
        self.server.server_close()
