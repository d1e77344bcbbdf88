"""What TRL's GRPOTrainer runs between its train step, the weight sync and the rollout (colocate mode), by release.

Read in TRL's trainer at each tag: sleep mode (``vllm_enable_sleep_mode``) arrives in 0.23, and from then on the
weight sync empties the cache before it wakes the weights (``torch.cuda.empty_cache()  # required to avoid OOM in
some cases``: trl/trainer/grpo_trainer.py ``_move_model_to_vllm`` in 0.23-0.27, trl/generation/vllm_generation.py
``sync_weights`` from 0.28; 0.29.1 installed). Without sleep mode (every release before 0.23, and the default after)
the engine stays awake and nothing empties the cache between the train step, the sync and the rollout. TRL has no
offload of its own, and its HF-generate path (``unwrap_model_for_generation``) empties nothing either.
"""

from __future__ import annotations

from ...framework import Handover

HANDOVER = Handover(
    release='TRL',
    offload_before_sync=False,
    empty_before_sync=True,
    empty_before_rollout=True,
    empty_before_generate=False,
    offload_empties=(),
    source='trl/generation/vllm_generation.py@v0.28.0 sync_weights (empty_cache() before wake_up(tags=["weights"]))',
)


def handover(packages: dict) -> Handover:
    """One row for every TRL release: the releases before 0.23 have no sleep mode, so the sleeping-engine
    releases never apply to them."""
    return HANDOVER
