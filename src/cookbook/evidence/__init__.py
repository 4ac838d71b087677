"""The evidence wing: whether a gate run's bundle may stand behind a recipe, and the status that follows.

    claims           results.json's own claims (complete, every declared gate passed, this recipe, an environment)
    manifest         every file listed with its sha256 and size, present and unchanged, nothing unlisted
    environment      the environment lock or image digest results.json records, and how the verified block names it
    resolved_recipe  recipe.resolved.json: its content hash recomputed, against results.json's and the recipe's
    recompute        every declared gate's figures again from the raw evidence (the gate module's own recompute),
                     judged again by its verdict against the recipe's current thresholds
    server_config    the server the bundle measured, as it reported itself (max_model_len, cache config,
                     speculation, version), against the resolved recipe; what it cannot detect
    recheck          all of the above: every reason a bundle cannot verify a recipe
    verify           `cookbook gates verify`: the verified block, written only when the re-check passes
    passed_cache     a passed re-check remembered under .cache/evidence/
    status           verified / stale / unverified (...): the one answer every command shows, and the
                     word the lists print (shown_status: the engine check's beside a recipe not verified)
    engine_check     engine-checked / engine-check stale / refused: a launch block served on its GPU kind, KV vs
                     plan; the one module here that asks the planner (cookbook.plan) itself

It sits above the gate suite (cookbook.gates) and the recipe package, which never import it, and
below the commands and `cookbook upgrade`.
"""
