"""`cookbook data fetch` against a stand-in for the Hugging Face Hub (the real Hub is not
reachable from the test machines): a local HTTP server on 127.0.0.1, HF_ENDPOINT pointing at
it, answering the HEAD and GET requests huggingface_hub's hf_hub_download makes."""

import io
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from standin_hub import COMMIT, StandinHub

from cookbook.cli import main
from cookbook.gates import data as gate_data

pa = pytest.importorskip("pyarrow", reason="the data extra: pip install -e '.[data]'")
pq = pytest.importorskip("pyarrow.parquet")
pytest.importorskip("huggingface_hub", reason="the data extra: pip install -e '.[data]'")


def parquet_bytes(rows: list[dict]) -> bytes:
    buf = io.BytesIO()
    pq.write_table(pa.table({"question": [r["question"] for r in rows], "answer": [r["answer"] for r in rows]}), buf)
    return buf.getvalue()


def problems(n: int, tag: str) -> list[dict]:
    return [
        {
            "question": f"{tag} {i}: Mia has {i} pears and buys {i + 2} more \u2014 how many pears has she?",
            "answer": f"{i} + {i + 2} = <<{i}+{i + 2}={2 * i + 2}>>{2 * i + 2}\n#### {2 * i + 2}",
        }
        for i in range(n)
    ]


@pytest.fixture
def hub(monkeypatch):
    hubs = []

    def make(files):
        h = StandinHub(files)
        hubs.append(h)
        monkeypatch.setenv("HF_ENDPOINT", h.url)
        return h

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    yield make
    for h in hubs:
        h.close()


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(".gsm8k")) if d.is_dir() else []


def test_fetch_gsm8k_from_a_standin_hub(hub, tmp_path, monkeypatch):
    test_rows, train_rows = problems(7, "test"), problems(5, "train")
    h = hub(
        {
            "main/test-00000-of-00001.parquet": parquet_bytes(test_rows),
            "main/train-00000-of-00001.parquet": parquet_bytes(train_rows),
        }
    )
    monkeypatch.setenv("COOKBOOK_DATA", str(tmp_path / "data"))  # the default `fetch` writes to
    res = CliRunner().invoke(main, ["maint", "data", "fetch"])
    assert res.exit_code == 0, res.output
    out = tmp_path / "data" / "gsm8k"
    assert sorted(p.name for p in out.iterdir()) == ["LICENSE", "SOURCE", "test.jsonl", "train.jsonl"]
    for split, rows in (("test", test_rows), ("train", train_rows)):
        lines = (out / f"{split}.jsonl").read_text(encoding="utf-8").splitlines()
        assert [json.loads(x) for x in lines] == rows  # valid jsonl, question + answer only
        assert ("GET", f"/datasets/openai/gsm8k/resolve/main/main/{split}-00000-of-00001.parquet") in h.requests
    assert "\\u2014" in (out / "test.jsonl").read_text()  # escaped as GSM8K's own files are
    assert (
        "MIT License" in (out / "LICENSE").read_text() and "Copyright (c) 2021 OpenAI" in (out / "LICENSE").read_text()
    )
    source = json.loads((out / "SOURCE").read_text())
    assert source["commit"] == COMMIT and source["endpoint"] == h.url and source["files"]["test.jsonl"]["rows"] == 7
    assert leftovers(tmp_path / "data") == []  # no temporary folder or Hub cache left
    # what the gates read
    assert gate_data.gsm8k(gate_data.DataPaths.from_data_dir(tmp_path / "data"), "test", 7)[6] == test_rows[6]
    # a second fetch sees the files and asks the Hub nothing
    n = len(h.requests)
    res = CliRunner().invoke(main, ["maint", "data", "fetch"])
    assert res.exit_code == 0 and "already in" in res.output and len(h.requests) == n


def test_failed_fetch_from_a_standin_hub_leaves_nothing_half_written(hub, tmp_path):
    good = parquet_bytes(problems(3, "test"))
    d = tmp_path / "data"
    hub({"main/test-00000-of-00001.parquet": good})  # train: 404
    res = CliRunner().invoke(main, ["maint", "data", "fetch", "--data-dir", str(d)])
    assert res.exit_code == 1, res.output
    assert "train split" in res.output and "404" in res.output and "by hand" in res.output
    assert "Traceback" not in res.output
    assert not (d / "gsm8k").exists() and leftovers(d) == []  # test.jsonl was written, then removed
    # --force over an existing gsm8k/: a bad download keeps the old files as they were
    (d / "gsm8k").mkdir()
    (d / "gsm8k" / "test.jsonl").write_text("old\n")
    (d / "gsm8k" / "train.jsonl").write_text("old\n")
    hub({"main/test-00000-of-00001.parquet": good, "main/train-00000-of-00001.parquet": good[: len(good) // 2]})
    res = CliRunner().invoke(main, ["maint", "data", "fetch", "--data-dir", str(d), "--force"])
    assert res.exit_code == 1 and "not GSM8K parquet" in res.output, res.output
    assert (d / "gsm8k" / "train.jsonl").read_text() == "old\n" and leftovers(d) == []
    # ... and a good one replaces them whole
    hub({"main/test-00000-of-00001.parquet": good, "main/train-00000-of-00001.parquet": good})
    res = CliRunner().invoke(main, ["maint", "data", "fetch", "--data-dir", str(d), "--force"])
    assert res.exit_code == 0, res.output
    assert len((d / "gsm8k" / "train.jsonl").read_text().splitlines()) == 3 and leftovers(d) == []


@pytest.mark.slow  # the Hub client retries a refused connection for about 25 s before it gives up
def test_fetch_with_the_hub_unreachable_says_what_failed_and_how_to_get_the_files(monkeypatch, tmp_path):
    with socket.socket() as s:  # a port where nothing listens
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    d = tmp_path / "data"
    res = CliRunner().invoke(main, ["maint", "data", "fetch", "--data-dir", str(d)])  # the client retries for ~25 s
    assert res.exit_code == 1
    err = res.output
    assert err.count("error:") == 1 and "Traceback" not in err and "Retrying" not in err
    assert f"could not download openai/gsm8k (config main, test split) from http://127.0.0.1:{port}" in err
    assert "ConnectError" in err or "refused" in err.lower()
    assert "by hand" in err and "grade-school-math" in err and "COOKBOOK_DATA" in err
    assert not (d / "gsm8k").exists() and leftovers(d) == []


def test_fetch_without_the_data_extra_says_how_to_install_it(tmp_path):
    code = (
        "import sys; sys.modules['pyarrow'] = None; sys.modules['pyarrow.parquet'] = None\n"
        "from cookbook.cli import main; main(['data', 'fetch', '--data-dir', sys.argv[1]])"
    )
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")], capture_output=True, text=True)
    assert p.returncode == 2 and "needs huggingface_hub and pyarrow" in p.stderr and ".[data]" in p.stderr
    assert not (tmp_path / "d" / "gsm8k").exists()


def test_fetch_help_documents_the_download():
    res = CliRunner().invoke(main, ["maint", "data", "fetch", "--help"])
    for s in (
        "openai/gsm8k",
        "config `main`",
        "test.jsonl",
        "train.jsonl",
        "MIT",
        "temporary name",
        "$COOKBOOK_DATA",
        ".cache/data",
        "HF_ENDPOINT",
        ".[data]",
    ):
        assert s in res.output, s
