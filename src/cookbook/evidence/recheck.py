"""Re-check an evidence bundle: `verified` is earned from the evidence, never from its status strings.

`recheck(resolved, bundle)` lists every reason the bundle cannot stand behind the recipe:

- results.json's own claims (complete, every declared gate passed, this recipe's hash, an
  environment recorded: cookbook.evidence.claims);
- the manifest: every file listed with its sha256 and size, present and unchanged, and no
  file that is not listed (a bundle without manifest.json is refused: it cannot be checked);
- the environment: environment.lock's sha256 equals the one in results.json, or an image
  digest of the form sha256:<64 hex>;
- recipe.resolved.json: its content hash, recomputed, equals results.json's and the recipe's;
- every declared gate: its measured values recomputed from the transcripts and saved
  /metrics snapshots where they hold the raw data (a disagreement with results.json is a
  refusal), then judged again by the gate's own verdict() against the recipe's CURRENT
  thresholds (not the bundle's copy of them): cookbook.evidence.recompute;
- the served model name is the recipe's;
- the server it measured is the recipe's: what it reported of its own configuration (/v1/models
  max_model_len, vLLM's cache_config_info, the spec-decode positions, /version) against the
  resolved recipe (cookbook.evidence.server_config, which lists what it cannot detect).

What this cannot prove: settings the server does not report (max_num_seqs, parallel sizes,
environment variables), and that the server was really this model and engine. A server that
imitates one, or a bundle forged consistently from scratch, cannot be told apart without
attestation; that is why CI rebuilds the CPU recipe's evidence from scratch on every landing.
"""

from __future__ import annotations

from pathlib import Path

from cookbook.evidence.claims import refusals, served_model_refusals, served_name
from cookbook.evidence.environment import check_environment
from cookbook.evidence.manifest import check_manifest
from cookbook.evidence.recompute import check_gates
from cookbook.evidence.resolved_recipe import check_resolved
from cookbook.evidence.server_config import check_server
from cookbook.gates.bundle import RESULTS
from cookbook.gates.recorded import read_json


def recheck(resolved, bundle: Path, doc=None, manifest: list[str] | None = None) -> list[str]:
    """Every reason `bundle` cannot verify `resolved` (empty: it can). `doc` (results.json) and
    `manifest` (check_manifest's reasons): what a caller has read and checked already, so one status
    check reads and hashes each file once (cookbook.evidence.status)."""
    root = Path(bundle)
    if doc is None:
        if not (root / RESULTS).is_file():
            return [f"{root}: no {RESULTS}, so not an evidence bundle"]
        try:
            doc = read_json(root / RESULTS)
        except (ValueError, UnicodeDecodeError) as e:
            return [f"{RESULTS} cannot be read ({e})"]
    if not isinstance(doc, dict) or not isinstance(doc.get("gates", {}), dict):
        return [f"{RESULTS} cannot be read (not a results mapping)"]
    try:
        out = refusals(resolved, doc)
    except (AttributeError, TypeError) as e:
        out = [f"{RESULTS} is malformed ({type(e).__name__}: {e})"]
    out += check_manifest(root) if manifest is None else manifest
    out += check_environment(root, doc)
    out += check_resolved(root, doc, resolved)
    out += check_gates(root, doc, resolved)
    out += served_model_refusals(resolved, doc)
    out += check_server(root, doc, resolved, served_name(resolved))
    return out
