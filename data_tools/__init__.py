"""Token-length tools for GRPO datasets (``grpo-data``)."""
