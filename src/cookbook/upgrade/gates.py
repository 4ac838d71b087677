"""A recipe's gates against a scratch engine: fix profile applied, server from that venv, `cookbook gates run`.

The server is the recipe's own launch block (cookbook.serving.local), run with the scratch venv's
bin first on PATH, so its `vllm serve` is the new engine; the environment lock is that venv's pip
freeze, whose header names vLLM's version and commit, so the bundle names the engine it ran on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cookbook.serving import local
from cookbook.upgrade.scratch import ScratchEngine


def _cookbook(*args: str, env: dict[str, str] | None = None) -> int:
    argv = [sys.executable, "-m", "cookbook.cli", *args]
    local.step(local.quote_cmd(["cookbook", *args]))
    return subprocess.run(argv, env=env).returncode


def apply_profile(engine: ScratchEngine, profile_name: str | None, pack: Path | None = None) -> None:
    """Put the scratch tree in the state the gates need: pristine, then `profile_name` applied (from the
    pack folder `pack` when given: a candidate profile not yet in fixes/)."""
    from cookbook.serving.local import ServeError

    env = {**os.environ, "COOKBOOK_FIXES_DIR": str(pack)} if pack else None
    target = str(engine.vllm_dir)
    if _cookbook("fixes", "revert", "--target", target, env=env) != 0:
        raise ServeError(f"could not revert the fixes on the scratch engine {target}", help="remove it and run again")
    if profile_name and _cookbook("fixes", "apply", "--profile", profile_name, "--target", target, env=env) != 0:
        raise ServeError(
            f"fix profile {profile_name} did not apply to {target} (above)",
            help="run `cookbook upgrade --dry-run` to see each fix's status",
        )


def run_gates(
    slug: str,
    engine: ScratchEngine,
    out: Path,
    only: list[str] | None,
    profile_name: str | None,
    *,
    pack: Path | None = None,
    recipes: Path | None = None,
    ready_timeout_s: float = 900.0,
) -> Path:
    """Apply the profile (or none), start the recipe's server from the scratch venv, run its gates
    (only `only` when given) into the bundle `out`, stop the server; return `out`.

    `recipes`: a recipes folder to read the recipe from (COOKBOOK_RECIPES), e.g. a candidate with the
    new pin, so the bundle's recipe hash is the upgraded recipe's. A gate that fails is in the bundle
    (results.json); a server that does not start raises ServeError."""
    from cookbook.recipe.resolve import resolve

    apply_profile(engine, profile_name, pack)
    env_over = {"COOKBOOK_RECIPES": str(recipes)} if recipes else {}
    # The block checks the scratch engine for the fixes applied to it just now (or none), not for the
    # recipe's own pin, which this engine is not; from `pack` when the profile lives there.
    fixes = [f"image.fixes.profile={profile_name}"] if profile_name else ["image.fixes.profile=null"]
    resolved = resolve(Path(recipes) / slug / "recipe.yaml" if recipes else slug, sets=fixes)
    workdir = engine.root.parent / "serve" / f"{slug}-{engine.version}"
    workdir.mkdir(parents=True, exist_ok=True)
    env = local.prepare(resolved, workdir, engine.bin_dir)
    if pack:
        env["COOKBOOK_FIXES_DIR"] = str(pack)
    server = local.launch(resolved, env, workdir)
    try:
        local.wait_ready(server, ready_timeout_s)
        lock = workdir / "environment.lock"
        lock.write_text(local.env_lock(env, engine.python))
        args = ["gates", "run", slug, "--base-url", server.base_url, "--out", str(out), "--env-lock", str(lock)]
        for name in only or []:
            args += ["--only", name]
        _cookbook(*args, env={**os.environ, **env_over})
        if not server.alive():
            local.note(f"the server died during the gates; last lines of {server.log}:\n{server.tail()}")
    finally:
        server.stop()
    return out
