"""The TRL front end: arguments (TRL's names from the snapshot, TRL's wording), accelerate (its options and
config file), reader (a launch or ``trl vllm-serve`` -> Launch/Rollout, and the typed GRPOConfig), script (a
script's own GRPOConfig(...) literals, read with ast)."""
