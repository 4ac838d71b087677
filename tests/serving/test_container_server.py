"""cookbook.serving.container: the server `cookbook serve --image` gates must be the container's.
Real containers of the CPU base (python3's http.server answering /v1/models on the host's
network); skipped, saying so, without a daemon or the base (scripts/make-cpu-base)."""

import socket
import time

import pytest

from cookbook.image import bases, build
from cookbook.serving import container
from cookbook.serving.local import ServeError, _get

pytestmark = [pytest.mark.docker, pytest.mark.slow_tier("image")]

SERVER = """
import http.server, json, sys
root = sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({"data": [{"id": "m", "root": root}]}).encode()
        self.send_response(200); self.end_headers(); self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cpu_base():
    """The Docker client and the CPU base image's ref (skipped without the base)."""
    c = build.client()
    base = bases.for_platform("cpu").image
    if build.image_of(c, base) is None:
        pytest.skip(f"{base} is not here: scripts/make-cpu-base")
    return c, base


@pytest.fixture
def serving(tmp_path, cpu_base):
    c, base = cpu_base
    boxes = []

    def start(root: str) -> container.ContainerServer:
        port = free_port()
        box = c.containers.run(base, ["python3", "-c", SERVER, str(port), root], detach=True, network_mode="host")
        boxes.append(box)
        server = container.ContainerServer(box, tmp_path / "server.log", f"http://127.0.0.1:{port}", {})
        for _ in range(100):
            if _get(server.base_url + "/v1/models", 1):
                return server
            time.sleep(0.1)
        raise AssertionError(box.logs().decode())

    yield start
    from docker.errors import NotFound

    for box in boxes:
        try:
            box.remove(force=True)
        except NotFound:  # stop() removed it
            pass


def test_the_containers_own_server_is_accepted(serving):
    container.check_answering(serving(container.CHECKPOINT_IN_IMAGE))


def test_another_server_on_the_port_is_refused(serving):
    server = serving(".cache/models/gemma3-270m-hf")
    with pytest.raises(ServeError) as exc:
        container.check_answering(server)
    assert "is not the container's (it serves ['.cache/models/gemma3-270m-hf'], not /models/checkpoint)" in str(
        exc.value
    )
    assert "--port N" in exc.value.help


def test_stop_keeps_the_log_and_removes_the_container(serving, tmp_path):
    server = serving(container.CHECKPOINT_IN_IMAGE)
    assert server.alive()
    server.stop(grace_s=2)
    assert not server.alive() and server.log.exists()


def test_a_caller_stopped_by_sigterm_removes_its_container(tmp_path, cpu_base):
    """As under `timeout` around `cookbook serve --image`: SIGTERM reaches the caller, whose
    `finally: server.stop()` must still stop and remove the container."""
    import signal
    import subprocess
    import sys

    from docker.errors import NotFound

    c, base = cpu_base
    name_file = tmp_path / "name"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from cookbook.image import build\n"
        "from cookbook.serving.container import ContainerServer\n"
        "box = build.client().containers.run(sys.argv[3], ['sleep', '300'], detach=True)\n"
        "server = ContainerServer(box, Path(sys.argv[2]), 'http://127.0.0.1:1', {})\n"
        "Path(sys.argv[1]).write_text(box.name)\n"
        "try:\n"
        "    time.sleep(300)\n"
        "finally:\n"
        "    server.stop(grace_s=1)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", script, str(name_file), str(tmp_path / "log"), base])
    try:
        deadline = time.monotonic() + 60
        while not name_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        name = name_file.read_text()
        assert c.containers.get(name).status == "running"
        caller.send_signal(signal.SIGTERM)
        assert caller.wait(timeout=60) == 128 + signal.SIGTERM
        with pytest.raises(NotFound):
            c.containers.get(name)
    finally:
        caller.kill()
        if name_file.exists():
            try:
                c.containers.get(name_file.read_text()).remove(force=True)
            except NotFound:
                pass
