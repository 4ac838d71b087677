"""`cookbook serve`: run a recipe here end to end (fetch, convert, launch, gates, stop)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import click

from cookbook.cli_options import finite, quant_option, resolve_or_refuse, set_option
from cookbook.errors import FAILED, INTERRUPTED, CookbookError
from cookbook.recipe import paths


@click.command("serve")
@click.argument("slug")
@quant_option
@set_option
@click.option("--gates", "run_gates", is_flag=True, help="Run the recipe's gates against the server, then stop it.")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    help="GSM8K and haystack data for the gates (default $COOKBOOK_DATA, else .cache/data; "
    "`cookbook gates run` decides). Built-in gate data needs none.",
)
@click.option("--out", type=click.Path(path_type=Path), help="Evidence bundle folder (default runs/<slug>-<time>).")
@click.option(
    "--ready-timeout-s",
    default=900.0,
    show_default=True,
    type=click.FloatRange(min=1, max=7 * 86400),
    callback=lambda ctx, param, v: finite(param, v),
    help="How long to wait for the server.",
)
@click.option(
    "--calibrate",
    is_flag=True,
    help="Run the gates once to set the recipe's bars on this machine (`cookbook maint gates calibrate`), "
    "then again against them for the evidence bundle.",
)
@click.option("--keep-running", is_flag=True, help="Leave the server up (print how to stop it).")
@click.option(
    "--image",
    "use_image",
    is_flag=True,
    help="Serve from the recipe's image (`make image RECIPE=SLUG`) in Docker instead of this venv; "
    "the evidence names the image's ID and digest.",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="With --image: serve on this port instead of the recipe's (where that one is taken here).",
)
@click.option(
    "--dry-run", is_flag=True, help="Print the launch block serve would run (launch.sh) and stop; changes nothing."
)
def serve_cmd(
    slug, quant, sets, run_gates, data_dir, out, ready_timeout_s, calibrate, keep_running, use_image, port, dry_run
):
    """Fetch and convert the model, start the server from the recipe's own launch block,
    wait until it answers, optionally run the gates, and stop it.

    \b
    A second run reuses the fetched and converted model (.cache/).
      cookbook serve gemma3-270m-cpu --gates
      cookbook serve gemma3-270m-h200 --calibrate   # bars from this machine, then the evidence run
      cookbook serve gemma3-270m-cpu --image --gates   # the same, from its image
      cookbook serve glm52-2 --dry-run                 # the launch.sh it would run; nothing else
    """
    from cookbook import host_cpu, platforms
    from cookbook.plan.launch_block import refuse_unfit
    from cookbook.serving import local

    resolved = resolve_or_refuse(slug, quant, sets, f"cannot serve {slug}")
    note = refuse_unfit(resolved, f"cannot serve {slug}")
    if note:
        click.echo(note, err=True)
    if dry_run:  # before any check of this machine: the block is the same wherever it is printed
        click.echo(local.block_text(resolved), nl=False)
        return
    if (run_gates or calibrate) and (sets or quant):
        raise CookbookError(
            "--gates runs on the recipe as written, so its evidence matches the recipe's hash",
            help="drop --set/--quant, or serve without --gates and run `cookbook gates run` yourself",
        )
    if port and not use_image:
        raise CookbookError("--port is for --image", help="without --image, use --set port=N (and no --gates)")
    hw = resolved.recipe.hardware
    ok, reason = platforms.can_run(hw.platform, hw.gpus, hw.min_host_memory_gib)
    if ok and hw.platform == "cpu" and (why := host_cpu.unmet(slug)):
        ok, reason = False, why
    if not ok:
        raise refusal(resolved, reason, platforms.detect())
    workdir = paths.repo_root() / ".cache" / "serve" / slug
    workdir.mkdir(parents=True, exist_ok=True)
    server = None
    code = 0
    try:
        local.step(
            f"recipe {slug}"
            + (f" --quant {resolved.quant}" if resolved.quant else "")
            + f" ({resolved.content_hash[:19]})"
        )
        # /proc/cpuinfo is read only for the CPU recipes, not for every recipe served
        fits = host_cpu.cpu_recipe() if resolved.slug in host_cpu.CPU_RECIPES else None
        if fits and resolved.slug not in host_cpu.FASTEST_FIRST[fits]:
            local.step(f"note: this host's CPU is calibrated for {fits}; {slug} may miss its speed bars here")
        env = local.prepare(resolved, workdir)
        if use_image:
            if sets or quant:
                raise CookbookError(
                    "--image serves the image built from the recipe as written", help="drop --set/--quant"
                )
            from cookbook.serving import container

            checkpoint = Path(local.exported_env(resolved, env)["CHECKPOINT_DIR"])
            server = container.launch(resolved, checkpoint, workdir / "image-cache", workdir, port=port)
        else:
            server = local.launch(resolved, env, workdir)
        local.wait_ready(server, ready_timeout_s)
        if use_image:
            container.check_answering(server)
        if run_gates or calibrate:
            if use_image:
                environment = {"image_ref": server.image["ref"]}
            else:
                lock = workdir / "environment.lock"
                lock.write_text(local.env_lock(env))
                environment = {"env_lock": lock}
            code = _gates_phase(slug, resolved, server, out, environment, data_dir, calibrate)
        if keep_running and use_image and server is not None:
            local.step(
                f"container left running at {server.base_url}; stop it with: docker rm -f {server.container.name}"
            )
            server = None
        if keep_running and server is not None:
            local.step(
                f"server left running at {server.base_url} (pid {server.process.pid}); "
                f"stop it with: kill -TERM -{server.process.pid}"
            )
            server = None
    except KeyboardInterrupt:
        raise CookbookError("interrupted", exit_code=INTERRUPTED) from None
    finally:  # a ServeError (exit 1) reaches the user after the server is stopped
        if server is not None:
            server.stop()
    sys.exit(code)


def _gates_phase(
    slug: str, resolved, server, out: Path | None, environment: dict, data_dir: Path | None, calibrate: bool
) -> int:
    """serve's gates: with --calibrate a calibration run and the bars it sets first; then the evidence
    run into `out` (default runs/<slug>-<time>), the server's death said, and the recipe's status."""
    from cookbook.evidence.status import verified_status
    from cookbook.serving import local

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    bundle = out or paths.repo_root() / "runs" / f"{slug}-{stamp}"
    if calibrate:
        cal = bundle.with_name(bundle.name + "-calibration")
        code = _gates_run(slug, resolved, server, cal, environment, data_dir)
        local.step(f"calibration gates {'passed' if code == 0 else 'ran (some bars not met)'}: {cal}")
        _calibrate(slug, cal)
    # After --calibrate the bars (and so the content hash) changed: None resolves the recipe again.
    code = _gates_run(slug, None if calibrate else resolved, server, bundle, environment, data_dir)
    if not server.alive():
        died = f"the server died during the gates; last lines of {server.log}:\n{server.tail()}"
        click.echo(CookbookError(died).render(), err=True)
        code = code or FAILED
    local.step(f"gates {'passed' if code == 0 else 'FAILED'}; evidence bundle: {bundle}")
    status = verified_status(slug)
    if code:  # the recorded status stands; say so, lest "verified" read as this run's result
        local.step(f"recipe status: {status} (as recorded before; this run's gates failed and change nothing)")
    elif status in ("verified", "benchmark"):  # a benchmark-only recipe is never verified: no verify to suggest
        local.step(f"recipe status: {status}")
    else:
        local.step(f"recipe status: {status}  (to record it: cookbook gates verify {slug} {bundle})")
    return code


def _gates_run(slug: str, resolved, server, bundle: Path, environment: dict, data_dir: Path | None) -> int:
    """The recipe's gates against the server, in this process (cookbook.gates.suite), on the recipe
    already resolved (None: resolve it again): the exit code `cookbook gates run` would give. Its
    errors are printed and become the exit code, and serve goes on to stop the server and report."""
    from cookbook.gates.suite import SuiteOptions, run_reported
    from cookbook.serving import local

    flags = {"env_lock": "--env-lock", "image_ref": "--image"}
    argv = ["cookbook.cli", "gates", "run", slug, "--base-url", server.base_url, "--out", str(bundle)]
    argv += [x for key, value in environment.items() for x in (flags[key], str(value))]
    if data_dir:  # else the suite takes the one default (cookbook.gates.data.default_data_dir)
        argv += ["--data-dir", str(data_dir)]
    local.step("gates: " + local.quote_cmd(argv))
    if resolved is None:
        try:
            resolved = resolve_or_refuse(slug, None, (), f"cannot run the gates of {slug}")
        except CookbookError as e:
            e.show()
            return e.exit_code
    options = SuiteOptions(out=bundle, data_dir=data_dir, **environment)
    return run_reported(resolved, server.base_url, options, echo=click.echo)


def _calibrate(slug: str, bundle: Path) -> None:
    """`cookbook maint gates calibrate SLUG BUNDLE`, in this process; its refusal printed, then serve's."""
    from cookbook.gates.calibrate import calibrate_recipe
    from cookbook.serving import local

    local.step("calibrate: " + local.quote_cmd(["cookbook.cli", "maint", "gates", "calibrate", slug, str(bundle)]))
    try:
        calibrate_recipe(resolve_or_refuse(slug, None, (), f"cannot calibrate {slug}"), bundle, echo=click.echo)
    except CookbookError as e:
        e.show()
        raise CookbookError(f"calibration from {bundle} refused (above); the recipe is unchanged") from None


def refusal(resolved, reason: str, here) -> CookbookError:
    """serve's refusal on a machine the recipe is not written for: why, and the closest recipe that
    runs here (the same model first; cookbook.plan.elsewhere judges). Where the recipe's own plan fits
    this GPU kind (an H200 recipe on an H100), it says so: the block can start here, and serve refuses
    because the recipe's bars and evidence are for its own platform, not because it cannot run."""
    from cookbook import host_cpu, platforms
    from cookbook.plan import elsewhere
    from cookbook.recipe.resolve import all_slugs, resolve

    slug, hw = resolved.slug, resolved.recipe.hardware
    recipes = []
    for other in all_slugs():
        try:
            x = resolve(other, check=False)
        except CookbookError:
            continue
        if not x.recipe.abstract:
            recipes.append(x)
    message = f"cannot serve {slug} on this machine: {reason}"
    own = None
    if elsewhere.same_kind(hw.platform, here.platform):
        own = elsewhere.fit_on(resolved, here.platform, here.devices)
    if own is not None and own.verdict == elsewhere.PLAN:
        message += (
            f". Its block can start here: an {here.platform} is the same GPU kind as an {hw.platform} "
            f"({' '.join(elsewhere.kind(here.platform))}) and its plan fits {hw.gpus}x {here.platform} "
            f"(`cookbook plan {slug} --platform {here.platform}`); serve refuses because the recipe's gate bars "
            f"and evidence are for {hw.gpus}x {hw.platform}, and a run here would be judged against them"
        )
    near = elsewhere.closest(resolved, here.platform, here.devices, recipes)
    if near is not None and here.platform == "cpu":  # of the two CPU recipes, the one this CPU is calibrated for
        fits = host_cpu.cpu_recipe()
        same = [x for x in recipes if x.slug == fits and x.recipe.model.name == near[0].recipe.model.name]
        near = (same[0], elsewhere.fit_on(same[0], "cpu")) if same else near
    helps = []
    if near is not None and near[1].verdict == elsewhere.YES:
        x = near[0]
        on = f"{x.recipe.hardware.gpus}x {x.recipe.hardware.platform}" if x.recipe.hardware.gpus else "the CPU"
        helps.append(f"`cookbook serve {x.slug}`, the closest recipe that runs here ({x.recipe.model.name} on {on})")
    if own is not None and own.verdict == elsewhere.PLAN:
        helps.append(
            f"to start this block here anyway, without gates: `cookbook serve {slug} --set hardware.platform={here.platform}`"
        )
    elif near is not None and near[1].verdict == elsewhere.PLAN:
        helps.append(f"{near[0].slug} plans to fit here: {near[1].reason}")
    target = f"{hw.gpus}x {hw.platform}" if hw.gpus else "a CPU it names"
    helps.append(f"`cookbook launch {slug}` prints the block to run on {target}")
    if near is None and here.platform in platforms.CATALOGUE and here.platform != "cpu":
        helps.append(f"`cookbook list --platform {here.platform} --gpus {here.devices}` lists what runs on these GPUs")
    return CookbookError(message, help="; or ".join(helps))
