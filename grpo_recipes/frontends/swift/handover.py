"""What ms-swift's GRPO trainer runs between its train step, the weight sync and the rollout (colocate mode), by
release: which ``empty_cache()`` and offload calls release the train step's cached blocks before the next phase.

Read in ms-swift's ``_fast_infer`` (swift/trainers/rlhf_trainer/grpo_trainer.py to 3.9, rollout_mixin.py from 3.10,
swift/rlhf_trainers/rollout_mixin.py from 4.0) and ``offload_context`` / ``offload_model`` at each tag:

- 3.0-3.5: ``offload_model`` / ``offload_optimizer`` run before the engine wakes and the weights are synced; the only
  cache release there is ``gc_collect()`` under ``gc_collect_after_offload`` (default False; the typed config does
  not read it, so a launch that sets it is planned as if it did not: too high at the rollout).
- 3.6-3.9: the weights wake and ``_move_model_to_vllm`` runs first, with no ``empty_cache()``; then
  ``offload_context`` offloads and calls ``empty_cache()``; the KV cache wakes inside it.
- 3.10: as 3.6, but ``offload_context`` empties nothing; ``aggressive_empty_cache()`` runs before the KV cache wakes.
- 3.11-3.12: ``aggressive_empty_cache()`` also runs before the weights wake (sleep_level > 0).
- 4.0 on (4.6 installed): as 3.11, and ``offload_model`` calls ``torch.cuda.empty_cache()`` when it moved weights
  (``offload_optimizer`` does not).

Without vLLM (the trainer's own HF generate) no release empties the cache between the train step and generation
(the only ``empty_cache()`` calls are the ones above: grpo_trainer.py@v3.8.0, rollout_mixin.py@v3.12.0, 4.6).
With sleep_level 0 the engine never sleeps or wakes, so none of the wake-time releases run at any release.
"""

from __future__ import annotations

from ...framework import Handover
from ...versions import version_tuple

_GRPO = 'swift/trainers/rlhf_trainer/grpo_trainer.py'
_MIXIN = 'swift/trainers/rlhf_trainer/rollout_mixin.py'
_MIXIN4 = 'swift/rlhf_trainers/rollout_mixin.py'

# (first release, Handover): each row holds until the next one's release
RELEASES: tuple[tuple[tuple[int, int], Handover], ...] = (
    (
        (3, 0),
        Handover(
            release='ms-swift 3.0-3.5',
            offload_before_sync=True,
            empty_before_sync=False,
            empty_before_rollout=False,
            empty_before_generate=False,
            offload_empties=(),
            source=f'{_GRPO}@v3.5.0 _fast_infer (offload, then wake_up, then _move_model_to_vllm)',
        ),
    ),
    (
        (3, 6),
        Handover(
            release='ms-swift 3.6-3.9',
            offload_before_sync=False,
            empty_before_sync=False,
            empty_before_rollout=False,
            empty_before_generate=False,
            offload_empties=('offload_model', 'offload_optimizer'),
            source=f'{_GRPO}@v3.8.0 _fast_infer and offload_context (empty_cache() after offloading)',
        ),
    ),
    (
        (3, 10),
        Handover(
            release='ms-swift 3.10',
            offload_before_sync=False,
            empty_before_sync=False,
            empty_before_rollout=True,
            empty_before_generate=False,
            offload_empties=(),
            source=f'{_MIXIN}@v3.10.0 _fast_infer (aggressive_empty_cache() before wake_up(tags=["kv_cache"]))',
        ),
    ),
    (
        (3, 11),
        Handover(
            release='ms-swift 3.11-3.12',
            offload_before_sync=False,
            empty_before_sync=True,
            empty_before_rollout=True,
            empty_before_generate=False,
            offload_empties=(),
            source=f'{_MIXIN}@v3.11.0 _fast_infer (aggressive_empty_cache() before wake_up(tags=["weights"]))',
        ),
    ),
    (
        (4, 0),
        Handover(
            release='ms-swift 4.x',
            offload_before_sync=False,
            empty_before_sync=True,
            empty_before_rollout=True,
            empty_before_generate=False,
            offload_empties=('offload_model',),
            source=f'{_MIXIN4}@v4.0.0 _fast_infer and offload_model (torch.cuda.empty_cache() when moved)',
        ),
    ),
)


def handover(packages: dict) -> Handover | None:
    """The row for the ms-swift release that judges the launch (installed or ``--swift-version``; none named: 4.6,
    as versions.py judges it); None for a release named without its minor ("3.x"): the rows differ within 3.x."""
    v = version_tuple(packages.get('ms-swift') or '') or (4, 6)
    if len(v) < 2:
        return None
    row = RELEASES[0][1]
    for since, h in RELEASES:
        if v[:2] >= since:
            row = h
    return row
