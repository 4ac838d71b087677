"""A recipe's gates against a scratch engine: fix profile applied, server from that venv, the gate suite.

The server is the recipe's own launch block (cookbook.serving.local), run with the scratch venv's
bin first on PATH, so its `vllm serve` is the new engine; the environment lock is that venv's pip
freeze, whose header names vLLM's version and commit, so the bundle names the engine it ran on.
The fix pack (cookbook.fixes.tree) and the gate suite (cookbook.gates.suite) run in this process;
each step prints the `cookbook` command line that does the same by hand.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cookbook.errors import CookbookError
from cookbook.serving import local
from cookbook.upgrade.scratch import ScratchEngine


@contextmanager
def _env(name: str, value: str | None) -> Iterator[None]:
    """os.environ[name] = value inside the block (nothing when value is None): the fix pack reads its
    folder from COOKBOOK_FIXES_DIR and the recipe chain its folder from COOKBOOK_RECIPES."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if value is not None and before is None:
            os.environ.pop(name, None)
        elif value is not None:
            os.environ[name] = before


def _fixes(action, *argv: str) -> bool:
    """A fix-pack action, its command line and outcome printed as `cookbook fixes` prints them; False
    when it refused (its error printed)."""
    local.step(local.quote_cmd(["cookbook", "fixes", *argv]))
    try:
        outcome = action()
    except CookbookError as e:
        e.show()
        return False
    for line in outcome.lines:
        print(line, flush=True)
    if outcome.set_hash:
        print(f"fix set hash: {outcome.set_hash}", flush=True)
    return True


def apply_profile(engine: ScratchEngine, profile_name: str | None, pack: Path | None = None) -> None:
    """Put the scratch tree in the state the gates need: pristine, then `profile_name` applied (from the
    pack folder `pack` when given: a candidate profile not yet in fixes/)."""
    from cookbook.fixes import tree
    from cookbook.serving.local import ServeError

    target = engine.vllm_dir
    with _env("COOKBOOK_FIXES_DIR", str(pack) if pack else None):
        if not _fixes(lambda: tree.revert(target), "revert", "--target", str(target)):
            raise ServeError(
                f"could not revert the fixes on the scratch engine {target}", help="remove it and run again"
            )
        if profile_name and not _fixes(
            lambda: tree.apply(profile_name, [], target), "apply", "--profile", profile_name, "--target", str(target)
        ):
            raise ServeError(
                f"fix profile {profile_name} did not apply to {target} (above)",
                help="run `cookbook upgrade --dry-run` to see each fix's status",
            )


def _suite(slug: str, base_url: str, options) -> int:
    """The gate suite on the recipe as written (no --set: its hash is the bundle's): its exit code, an
    error printed as `cookbook gates run SLUG` prints it."""
    from cookbook.gates.suite import run_reported
    from cookbook.recipe.errors import RecipeError
    from cookbook.recipe.resolve import resolve

    try:
        resolved = resolve(slug)
    except RecipeError as e:
        e.refusing(f"cannot run the gates of {slug}").show()
        return e.exit_code
    return run_reported(resolved, base_url, options)


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
    from cookbook.gates.suite import SuiteOptions
    from cookbook.recipe.resolve import resolve

    apply_profile(engine, profile_name, pack)
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
        local.step(local.quote_cmd(["cookbook", *args]))
        with _env("COOKBOOK_RECIPES", str(recipes) if recipes else None):  # the recipe as the bundle names it
            _suite(slug, server.base_url, SuiteOptions(only=tuple(only or ()), out=out, env_lock=lock))
        if not server.alive():
            local.note(f"the server died during the gates; last lines of {server.log}:\n{server.tail()}")
    finally:
        server.stop()
    return out
