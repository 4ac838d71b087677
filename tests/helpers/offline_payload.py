"""A real offline payload, built as `cookbook offline pack` builds one: a tar of contents.json, an
engine tar.xz with console scripts, and real wheels pip installs (tests/offline)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import json
import sys
import tarfile
import zipfile
from pathlib import Path

from cookbook.files import repo_root

# a script the GPU host runs by path with its bare python3, outside the package
RECEIVE = repo_root() / "scripts" / "offline-gpu" / "receive.py"


def receive_module():
    """receive.py loaded as a module, for the tests that call its functions."""
    spec = importlib.util.spec_from_file_location("offline_receive", RECEIVE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


# A .pth that puts a folder inside the package on sys.path, as nvidia-cutlass-dsl's does for `cutlass`
PTH_IMPORT = b"import sys, os, pthdep; sys.path.insert(0, os.path.join(pthdep.__path__[0], 'inner'))\n"


def wheel(dest: Path, name: str = "tinydep", version: str = "1.0", more: dict[str, bytes] | None = None) -> Path:
    """A minimal, valid wheel (PEP 427): one module (and `more` files), METADATA, WHEEL and RECORD."""
    files = {
        f"{name}/__init__.py": b"VALUE = 42\n",
        **(more or {}),
        f"{name}-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{name}-{version}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-{version}.dist-info/RECORD,,")
    whl = dest / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{name}-{version}.dist-info/RECORD", "\n".join(record) + "\n")
    return whl


def payload_tar(tmp: Path, entry_points: str = "[console_scripts]\nfakeengine = fakeengine:main\n") -> Path:
    engine_src = tmp / "engine-src"
    (engine_src / "fakeengine").mkdir(parents=True)
    (engine_src / "fakeengine" / "__init__.py").write_text("def main():\n    print('engine main ran')\n    return 0\n")
    info = engine_src / "fakeengine-9.9.dist-info"
    info.mkdir()
    (info / "entry_points.txt").write_text(entry_points)
    engine_xz = tmp / "fakeengine.tar.xz"
    with tarfile.open(engine_xz, "w:xz") as tar:
        tar.add(engine_src, arcname=".")
    dep = wheel(tmp)
    pth_wheel = wheel(
        tmp, "pthdep", more={"pthdep/inner/hidden.py": b"WHERE = 'inner'\n", "pthdep_paths.pth": PTH_IMPORT}
    )
    payload = tmp / "payload.tar"
    with tarfile.open(payload, "w") as tar:
        data = json.dumps({"engine": engine_xz.name, "engine_name": "fakeengine==9.9", "wheels": [dep.name]}).encode()
        ti = tarfile.TarInfo("contents.json")
        ti.size = len(data)
        tar.addfile(ti, io.BytesIO(data))
        tar.add(engine_xz, arcname=engine_xz.name)
        tar.add(dep, arcname=f"wheels/{dep.name}")
        tar.add(pth_wheel, arcname=f"wheels/{pth_wheel.name}")
    return payload


def only(pieces_dir: Path, names: list[str], dest: Path) -> Path:
    """A transfer that carries pieces.json and just these pieces."""
    dest.mkdir()
    (dest / "pieces.json").write_bytes((pieces_dir / "pieces.json").read_bytes())
    for n in names:
        (dest / n).write_bytes((pieces_dir / n).read_bytes())
    return dest
