"""Which argument snapshot judges a ``megatron rlhf`` launch, and the 3.x names that 4.x renamed.

Snapshots (``snapshots/megatron_args_<version>.json``) are written by ``scripts/gen_megatron_snapshot.py`` from
each release's ``MegatronRLHFArguments`` with ast. A release without its own snapshot is judged by the newest
snapshot of its minor line at or below it, else the newest below it; the finding says which one.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources

from ...errors import GuardError
from ...versions import version_tuple

SNAPSHOT_DIR = 'snapshots'


def available() -> list[str]:
    files = resources.files(__package__).joinpath(SNAPSHOT_DIR).iterdir()
    names = [f.name[len('megatron_args_') : -len('.json')] for f in files if f.name.startswith('megatron_args_')]
    return sorted(names, key=lambda v: version_tuple(v) or ())


@cache
def load(version: str) -> dict:
    path = resources.files(__package__).joinpath(SNAPSHOT_DIR).joinpath(f'megatron_args_{version}.json')
    return json.loads(path.read_text(encoding='utf-8'))


def snapshot_for(release: str | None) -> tuple[str, str | None]:
    """(snapshot version, a note when it is not the release's own)."""
    have = available()
    newest = have[-1]
    if release is None:
        return newest, None
    want = version_tuple(release)
    if want is None:
        raise GuardError(f'--swift-version {release!r}: not a version (expected e.g. 4.6.0)')
    if release in have:
        return release, None
    below = [v for v in have if (version_tuple(v) or ()) <= want]
    if not below:
        raise GuardError(
            f'ms-swift {release}: Megatron GRPO (`megatron rlhf --rlhf_type grpo`) needs ms-swift 3.11 '
            f'or newer here (snapshots: {", ".join(have)})'
        )
    pick = below[-1]
    return pick, f'ms-swift {release} is read with the {pick} argument snapshot (the nearest release below it)'


# 3.x Megatron names and their 4.x replacements: the fields 3.12.6 has and 4.0.4 lost, paired with the field 4.0.4
# gained that carries the same setting (compare snapshots/megatron_args_3.12.6.json and _4.0.4.json; ms-swift 4.0
# moved Megatron-SWIFT from Megatron-LM's own argument names to swift's). value: (4.x name, how the value maps).
# 'same' keeps the value; 'negate' turns a 3.x --no_X switch into `--X false`; 'drop' means 4.x reads it from the
# model's config.json instead (no flag).
RENAMED_4 = {
    'train_type': ('tuner_type', 'same'),
    'max_epochs': ('num_train_epochs', 'same'),
    'load': ('mcore_model', 'same'),
    'save': ('output_dir', 'same'),
    'ref_load': ('mcore_ref_model', 'same'),
    'adapter_load': ('mcore_adapter', 'same'),
    'ref_adapter_load': ('mcore_ref_adapter', 'same'),
    'save_interval': ('save_steps', 'same'),
    'eval_interval': ('eval_steps', 'same'),
    'log_interval': ('logging_steps', 'same'),
    'num_workers': ('dataloader_num_workers', 'same'),
    'manual_gc_interval': ('manual_gc_steps', 'same'),
    'microbatch_group_size_per_virtual_pipeline_stage': ('microbatch_group_size_per_vp_stage', 'same'),
    'num_virtual_stages_per_pipeline_rank': ('virtual_pipeline_model_parallel_size', 'same'),
    'no_initialization': ('perform_initialization', 'negate'),
    'no_gradient_accumulation_fusion': ('gradient_accumulation_fusion', 'negate'),
    'no_masked_softmax_fusion': ('masked_softmax_fusion', 'negate'),
    'no_bias_dropout_fusion': ('bias_dropout_fusion', 'negate'),
    'no_bias_swiglu_fusion': ('bias_activation_fusion', 'negate'),
    'no_rope_fusion': ('apply_rope_fusion', 'negate'),
    'load_safetensors': (None, 'drop'),
}
