"""What an older TRL release (``--trl-version``) did differently, where it changes the plan.

The flags are read with the installed TRL's snapshot (trl_args_snapshot.json); this module puts back the
defaults and the semantics of the release the launch runs. Every entry was read in TRL's source at the tags
named (github.com/huggingface/trl):

- ``max_prompt_length`` truncates prompts, default 512, up to 0.25.x (v0.25.1 trl/trainer/grpo_trainer.py:
  ``"max_length": self.max_prompt_length`` in the tokenizer call, ``truncate_prompt_tokens`` for vLLM); in colocate
  mode (0.18-0.25) vLLM's ``max_model_len`` is ``max_prompt_length + max_completion_length`` (same file, where the
  ``LLM`` is built). 0.26 and 0.27 keep the field with default None and ignore it (v0.26.0 grpo_config.py: "The
  `max_prompt_length` argument is deprecated and will be removed in version 0.28.0. You should instead filter your
  dataset"); 0.28 removed it.
- the model's dtype: ``ModelConfig.torch_dtype`` up to 0.22, a deprecated alias of ``dtype`` from 0.23 to 0.26
  (v0.26.0 trl/trainer/model_config.py ``__post_init__``: ``self.dtype = self.torch_dtype``), removed in 0.27. In
  ``GRPOConfig.model_init_kwargs`` the key is ``torch_dtype`` up to 0.22 and ``dtype`` from 0.23
  (grpo_trainer.py ``model_init_kwargs.get(...)``). TRL's own ``trl grpo`` script passes the ModelConfig dtype to
  the trainer only from 0.23 (v0.23.0 trl/scripts/grpo.py); scripts such as open-r1's pass it themselves. Unset,
  ``from_pretrained`` loads float32 up to 0.25 (transformers 4.x's default), the checkpoint's dtype in 0.26
  (v0.26.0 trl/trainer/utils.py ``create_model_from_path``: ``kwargs.get("dtype", "auto")``) and float32 from 0.27.
- 0.14: ``per_device_train_batch_size`` counts prompts, default 1, and ``gradient_accumulation_steps`` defaults to 8
  (v0.14.0 grpo_config.py: "Number of prompts sampled per device ... multiplied by `num_generations`"); each
  micro-step generates its own completions (v0.14.0 grpo_trainer.py ``compute_loss``).
- 0.15: the batch counts completions, and every micro-step generates its own (v0.15.0 grpo_trainer.py
  ``_prepare_inputs`` generates for each batch; 0.16 buffers a generation over ``gradient_accumulation_steps``,
  ``_buffered_inputs``). Its check: "The global train batch size (N x B) must be evenly divisible by the number
  of generations per prompt (G)".
- ``beta`` defaults to 0.04 up to 0.18 and to 0.0 from 0.19; ``gradient_checkpointing`` defaults to False up to
  0.21 (TrainingArguments' default) and True from 0.22 (grpo_config.py at each tag).
"""

from __future__ import annotations

import json
from dataclasses import replace

# (first release, last release, GRPOConfig field, that release's default), where it differs from today's.
DEFAULTS = [
    ((0, 14), (0, 14), 'per_device_train_batch_size', 1),
    ((0, 14), (0, 14), 'gradient_accumulation_steps', 8),
    ((0, 14), (0, 18), 'beta', 0.04),
    ((0, 14), (0, 21), 'gradient_checkpointing', False),
]
PROMPT_TRUNCATED_UNTIL = (0, 26)
"""First release in which max_prompt_length no longer truncates prompts."""
PROMPT_LENGTH_REMOVED = (0, 28)
TORCH_DTYPE_REMOVED = (0, 27)
DTYPE_KEY_FROM = (0, 23)
"""First release whose model_init_kwargs key (and trl grpo's pass-through) is ``dtype``."""


def _vt(v):
    from ...versions import version_tuple

    return version_tuple(v)


def checked_packages(version: str, packages: dict) -> dict:
    """The packages a check sees with ``--trl-version V`` (or a project's pin): the installed ones, with trl at V (a
    version, else one line)."""
    from ...errors import GuardError

    if _vt(version) is None:
        raise GuardError(f'--trl-version {version!r}: not a version (e.g. 0.15.2)')
    return {**packages, 'trl': version}


def _older(version: str | None) -> tuple[int, ...] | None:
    """The release as a tuple when it is older than the snapshot's TRL, else None (nothing to change)."""
    from .arguments import snapshot

    vt, st = _vt(version), _vt(snapshot()['trl_version'])
    return vt if vt is not None and st is not None and vt[:2] < st[:2] else None


def apply_defaults(d: dict, m: dict, values: dict, old: dict, version: str | None, script: str | None) -> list[str]:
    """Put the release's defaults and names into ``d`` (GRPOConfig) and ``m`` (ModelConfig) before the config is
    built. ``values``: flags the snapshot's TRL knows; ``old``: values of flags it does not. Returns notes."""
    vt = _older(version)
    if vt is None:
        return []
    notes = []
    for first, last, key, default in DEFAULTS:
        if first <= vt[:2] <= last and key not in values:
            d[key] = default
    given = old.get('max_prompt_length', values.get('max_prompt_length'))
    if vt[:2] < PROMPT_TRUNCATED_UNTIL:
        d['max_prompt_length'] = int(given) if str(given).isdigit() else 512
        notes.append(
            f'TRL {version}: prompts are truncated to max_prompt_length {d["max_prompt_length"]} '
            f'({"given" if given is not None else "its default"})'
        )
        if (
            d.get('use_vllm')
            and d.get('vllm_mode') == 'colocate'
            and (0, 18) <= vt[:2]
            and 'vllm_max_model_length' not in values
        ):
            d['vllm_max_model_length'] = d['max_prompt_length'] + int(d['max_completion_length'])
    elif given is not None and vt[:2] < PROMPT_LENGTH_REMOVED:
        d['max_prompt_length'] = None
        notes.append(
            f'TRL {version}: --max_prompt_length is deprecated and ignored (prompts are not truncated); '
            f'filter the data to the prompt length you plan for'
        )
    # the model's dtype
    if 'dtype' not in values:
        dtype = None
        kwargs = values.get('model_init_kwargs')
        if isinstance(kwargs, str):
            try:
                kwargs = json.loads(kwargs)
            except ValueError:
                kwargs = None
        if isinstance(kwargs, dict):
            dtype = kwargs.get('dtype' if vt[:2] >= DTYPE_KEY_FROM else 'torch_dtype')
        passes_model_args = script != 'trl grpo' or vt[:2] >= DTYPE_KEY_FROM
        if dtype is None and old.get('torch_dtype') is not None and vt[:2] < TORCH_DTYPE_REMOVED:
            if passes_model_args:
                dtype = old['torch_dtype']
            else:
                notes.append(
                    f'TRL {version}: `trl grpo` does not pass --torch_dtype to the trainer (trl/scripts/'
                    f'grpo.py before 0.23); the model loads in float32'
                )
        if dtype is None:
            dtype = 'auto' if vt[:2] == (0, 26) else 'float32'
        m['dtype'] = str(dtype)
    return notes


def apply_semantics(cfg, version: str | None) -> tuple:
    """The release's batch semantics on the built config (counted in completions, as the rest of the guard):
    (the config with them, a copy made with ``dataclasses.replace``; the notes)."""
    vt = _older(version)
    if vt is None:
        return cfg, []
    if vt[:2] == (0, 14):
        prompts = cfg.per_device_train_batch_size
        cfg = replace(
            cfg,
            per_device_train_batch_size=prompts * cfg.num_generations,
            steps_per_generation=1,
            generation_batch_size=None,
        )
        return cfg, [
            f'TRL {version}: per_device_train_batch_size counts prompts ({prompts} prompts x '
            f'{cfg.num_generations} generations = {cfg.per_device_train_batch_size} completions per '
            f'micro-batch), generated at every micro-step'
        ]
    if vt[:2] == (0, 15):
        return replace(cfg, steps_per_generation=1, generation_batch_size=None), [
            f'TRL {version}: completions are generated at every micro-step (per_device_train_batch_size x '
            f'processes per generation; buffering over gradient_accumulation_steps came in 0.16)'
        ]
    return cfg, []
