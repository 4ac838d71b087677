"""scripts/check-site: the launch block as headless Chromium renders it (skips without Chromium)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-site"


def load():
    loader = importlib.machinery.SourceFileLoader("check_site", str(SCRIPT))
    spec = importlib.util.spec_from_loader("check_site", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_launch_text_reads_the_block_under_the_launch_heading_only():
    m = load()
    dom = (
        '<h2 id="converting">Converting</h2><pre><code>cookbook convert x</code></pre>'
        '<h2 id="launch">Launch</h2><p>Paste</p><div><pre><span></span><code>vllm <span>serve</span> m \\\n'
        "  --port 8000</code></pre></div><pre>later</pre>"
    )
    assert m.launch_text(dom) == "vllm serve m \\\n  --port 8000"
    assert m.launch_text('<h2 id="launch">Launch</h2><p>no block</p>') is None


def test_without_chromium_it_skips_and_says_so(tmp_path):
    env = {"PATH": str(tmp_path), "NO_MKDOCS_2_WARNING": "1"}  # no browser on this PATH
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "skipped: no Chromium" in p.stdout
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--require", "--out", str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert p.returncode == 1


@pytest.mark.slow
@pytest.mark.slow_tier("site")
@pytest.mark.skipif(load().browser() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_launch_blocks(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "the rendered launch block is `cookbook launch gemma3-270m-cpu`" in p.stdout
    assert (tmp_path / "index.png").is_file() and (tmp_path / "gemma3-270m-cpu.html").is_file()


@pytest.mark.skipif(load().browser() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_console_messages_of_a_page_are_seen(tmp_path):
    """The check fails a page on its console output; this page logs an error and throws."""
    mod = load()
    page = tmp_path / "p.html"
    page.write_text('<html><body><script>console.error("boom"); missingFn();</script><p>x</p></body></html>')
    r = mod.chromium(mod.browser(), str(tmp_path / "profile"), "--dump-dom", page.as_uri())
    found = mod.CONSOLE.findall(r.stderr)
    assert any("boom" in m for m in found) and any("missingFn" in m for m in found), r.stderr[-2000:]
