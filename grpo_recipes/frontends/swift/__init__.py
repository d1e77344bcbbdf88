"""The ms-swift front end: reader (``swift rlhf`` YAML/JSON/argv + ENV, ``swift rollout`` -> Launch/Rollout) and
worker (ms-swift's own parser, run in a subprocess by :mod:`grpo_recipes.realparse`). The argument snapshot the
typed config is built from is :mod:`grpo_recipes.swift_args`."""
