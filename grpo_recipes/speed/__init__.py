"""The throughput planner: predicted seconds per optimizer step by phase (``model.predict``), the launch's own
inputs gathered from a check (``attach.attach_speed``), and the configurations that fit ranked by speed
(``fastest.rank``). Pure functions returning dataclasses; nothing here prints. See docs/throughput.md."""
