"""The allocator setting as a memory fix: ``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``.

It changes no training setting, so it is the first candidate of the fix search (``fixes.search_fixes``) wherever it
is compatible with the launch:

- ms-swift colocate with sleep mode: only from ms-swift 4.6 on, which turns expandable segments off around creating
  and waking its vLLM engine when ``PYTORCH_CUDA_ALLOC_CONF`` names them (``set_expandable_segments``,
  swift/rlhf_trainers/utils.py); older ms-swift could free 0 GiB on sleep (modelscope/ms-swift#6636, the
  ``vllm.expandable-segments`` rule);
- TRL colocate with sleep mode: never; nothing turns them off and vLLM's ``CuMemAllocator`` asserts that
  ``PYTORCH_CUDA_ALLOC_CONF`` has no ``expandable_segments:True`` (vllm/device_allocator/cumem.py);
- only ``PYTORCH_ALLOC_CONF`` set: torch reads it, so the fix edits it, and not with a colocated vLLM (ms-swift only
  looks at the old name);
- ``backend:cudaMallocAsync``: CUDA's own pool; expandable segments do not apply.

How much the setting saves is the memory model's business: :func:`with_alloc` hands the trainer's and vLLM's
allocator to ``memory.estimate`` through ``Inputs.alloc`` / ``Inputs.alloc_vllm`` (the reserve term reads them).
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..allocconf import FIX_VALUE, FIX_VAR, NEW_VAR, OLD_VAR, AllocSetting, phases
from ..launch import CONFIG_SUFFIXES

# Prefix of a fix-search change key that is an environment variable, not a swift/TRL argument.
ENV_KEY = 'ENV:'


def _merged(text: str) -> str:
    """The variable's text with expandable segments on, its other keys kept."""
    if 'expandable_segments' in text:
        return re.sub(r'expandable_segments\s*:\s*[^,\s]*', FIX_VALUE, text)
    return f'{text},{FIX_VALUE}' if text.strip() else FIX_VALUE


def candidate(report) -> tuple[str, str] | None:
    """(variable, new text) to try first in the fix search, or None where the setting is on already or does not
    fit the launch (see the module docstring)."""
    from ..versions import version_tuple

    cfg, launch = report.cfg, report.launch
    if launch.kind != 'train':
        return None
    setting = launch.alloc or AllocSetting()
    conf = setting.conf
    ph = phases(setting, launch.framework, cfg.use_vllm, cfg.vllm_mode, cfg.effective_sleep_level)
    if ph.trainer.expandable_segments or conf.backend != 'native':
        return None
    colocate = cfg.rollout_mode == 'colocate'
    sleep = colocate and cfg.effective_sleep_level > 0
    if NEW_VAR in setting.values and OLD_VAR not in setting.values:
        return None if colocate else (NEW_VAR, _merged(setting.values[NEW_VAR]))
    toggle = launch.fw.expandable_toggle_from  # the release that turns them off around vLLM itself; None: nothing
    if toggle is None and sleep:
        return None
    if sleep:
        v = version_tuple(report.packages.get('ms-swift') or '')
        if v is not None and v[:2] < toggle:
            return None
    return FIX_VAR, _merged(setting.values.get(OLD_VAR, ''))


def with_alloc(inp, setting: AllocSetting | None, cfg, framework: str):
    """``inp`` with the trainer's and the colocated vLLM's allocator for this setting and config."""
    ph = phases(setting, framework, cfg.use_vllm, cfg.vllm_mode, cfg.effective_sleep_level)
    return replace(inp, alloc=ph.trainer, alloc_vllm=None if ph.vllm_pool else ph.vllm)


def with_env(inp, report, cfg, env: dict[str, str]):
    """``inp`` as if the launch also set ``env`` (a fix candidate)."""
    setting = report.launch.alloc or AllocSetting()
    for var, text in env.items():
        setting = setting.with_value(var, text, 'the proposed fix')
    return with_alloc(inp, setting, cfg, report.launch.framework)


def assumptions(report) -> list[str]:
    """One line on the allocator of each phase, for the verdict's Assumed block."""
    cfg, launch = report.cfg, report.launch
    setting = launch.alloc
    ph = phases(setting, launch.framework, cfg.use_vllm, cfg.vllm_mode, cfg.effective_sleep_level)
    where = (
        f'{ph.trainer.variable} from {setting.source}'
        if setting and setting.source
        else f'{OLD_VAR} and {NEW_VAR} not set'
    )
    line = f'CUDA allocator: training with {ph.trainer.label} ({where})'
    if ph.vllm is not None:
        line += (
            '; vLLM in its sleep-mode memory pool (no expandable segments)'
            if ph.vllm_pool
            else f"; vLLM's memory made with {ph.vllm.label}"
        )
    cache = []
    if not ph.trainer.expandable_segments:
        # bench/bench_reserve_windows.py against the H200 runs of 2026-11-27 (bench/results/gpu-h200-2026-11-27-
        # phases.jsonl): windows 566, 550, 568 reserved 105.6 GiB with 54.7 allocated; the replay runs under 64.2
        cache = [
            "torch's cache: planned at the longest logits window; on a card with room, a later window longer than "
            'any before keeps new segments (nvidia-smi shows more than planned), which torch frees and retries '
            'before an out-of-memory error'
        ]
    return [line, *ph.notes, *cache]


def style(launch) -> str:
    """How the launch sets its environment: ``script`` (export lines), ``yaml`` (ms-swift's ENV block) or
    ``command`` (a VAR=value prefix)."""
    src = launch.config_file or ''
    if (launch.alloc is not None and launch.alloc.script_line) or re.search(r'\.sh:\d+$', src):
        return 'script'
    if launch.fw.settings_yaml_in_config and src.endswith(CONFIG_SUFFIXES):
        return 'yaml'
    return 'command'


def render(env: dict[str, str], launch) -> str:
    """The environment line(s) to add, in the launch's own form."""
    how = style(launch)
    setting = launch.alloc or AllocSetting()
    if how == 'script':
        where = (setting.script_line or launch.config_file).rsplit(':', 1)
        return '\n'.join(f'export {k}={v}' for k, v in env.items()) + f'   (add above line {where[1]} of {where[0]})'
    if how == 'yaml' and not any(setting.sources.get(k) == 'environment' for k in env):
        from pathlib import Path

        return (
            f'in {Path(launch.config_file).name}, set (in its ENV: block, which ms-swift sets before it starts '
            'training):\nENV:\n' + '\n'.join(f"  {k}: '{v}'" for k, v in env.items())
        )
    head = ' '.join(launch.command[:2]) if launch.command else 'swift rlhf'
    return ' '.join(f'{k}={v}' for k, v in env.items()) + f' {head} ...   (as a prefix of the command)'


def verify(launch, report, check) -> dict:
    """``--verify`` for a fix that sets the environment: re-plan the launch with the line added (``check`` re-runs
    the whole check on a launch) and report the re-planned peak."""
    fix = report.fixes[0]
    env = {k: new for k, (_, new) in fix.env.items()}
    setting = launch.alloc or AllocSetting()
    for var, text in env.items():
        setting = setting.with_value(var, text, 'the proposed fix')
    fixed = replace(launch, argv=launch.argv + fix.argv(), alloc=setting, notes=list(launch.notes))
    again = check(fixed)
    train = [m for m in again.memory if m.role != 'rollout']
    fits = bool(train) and all(m.fits for m in train) and again.ok
    peak = max((m.peak_fraction for m in train), default=None)
    return {
        'ok': fits,
        'env': env,
        'replanned': {
            'fits': fits,
            'peak_fraction': peak,
            'errors': [f.rule for f in again.findings if f.severity == 'error'],
        },
    }
