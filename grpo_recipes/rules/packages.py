"""Installed packages and versions."""

from __future__ import annotations

from ..findings import ERROR, WARNING, Finding
from ..versions import version_tuple
from .registry import Context, rule


@rule(
    'version.swift-missing',
    'version.swift-3x',
    'known.zero3-sync-3.12',
    'version.trl',
    'version.msgspec',
    'version.deepspeed',
)
def package_rules(ctx: Context) -> list[Finding]:
    """Installed versions: ms-swift 3.x names, trl too old for ms-swift 4.2+ (swift/rlhf_trainers/arguments.py),
    msgspec missing (swift/rlhf_trainers/utils.py imports it), deepspeed missing, and the ms-swift 3.12.0-3.12.5
    ZeRO-3 weight-sync OOM (ms-swift issue #7986)."""
    pk = ctx.packages
    out = []
    if not ctx.launch.fw.checks_packages:
        return []
    swift_v = version_tuple(pk.get('ms-swift'))
    if 'ms-swift' in pk and swift_v is None:
        out.append(
            Finding(
                ERROR,
                'version.swift-missing',
                ['ms-swift'],
                'ms-swift is not installed here',
                'pip install "ms-swift>=4.6,<4.7"',
            )
        )
        return out
    if (
        swift_v is not None
        and swift_v < (4,)
        and any(a.split('=')[0] in ('--tuner_type', '--tuner-type') for a in ctx.launch.argv)
    ):  # a 4.x launch on a 3.x ms-swift
        out.append(
            Finding(
                ERROR,
                'version.swift-3x',
                ['tuner_type'],
                f'ms-swift {pk["ms-swift"]} is 3.x: it knows --train_type, not --tuner_type, and the '
                f'recipes here are written for 4.x names',
                'pip install "ms-swift>=4.6,<4.7"',
                'ms-swift.md §1.11',
            )
        )
        if (3, 12, 0) <= swift_v <= (3, 12, 5) and ctx.cfg.zero_stage == 3 and ctx.cfg.vllm_mode == 'colocate':
            out.append(
                Finding(
                    ERROR,
                    'known.zero3-sync-3.12',
                    ['deepspeed', 'vllm_mode'],
                    f'ms-swift {pk["ms-swift"]} gathers the whole ZeRO-3 model at once for the vLLM weight '
                    f'sync and OOMs (fixed in 3.12.6 and 4.0.0)',
                    'upgrade ms-swift',
                    'https://github.com/modelscope/ms-swift/issues/7986 (#7926, PR #8078/#8091)',
                )
            )
    trl_v = version_tuple(pk.get('trl'))
    if swift_v is not None and swift_v >= (4, 2) and trl_v is not None and trl_v < (0, 26):
        out.append(
            Finding(
                ERROR,
                'version.trl',
                ['trl'],
                f'ms-swift {pk["ms-swift"]} requires trl>=0.26 (found {pk["trl"]})',
                'pip install "trl>=0.26,<1.0"',
                'swift/rlhf_trainers/arguments.py',
            )
        )
    if 'msgspec' in pk and pk['msgspec'] is None:
        out.append(
            Finding(
                ERROR,
                'version.msgspec',
                ['msgspec'],
                'msgspec is not installed: the GRPO trainer import '
                'fails with ModuleNotFoundError (ms-swift does not declare it)',
                'pip install msgspec',
                'swift/rlhf_trainers/utils.py',
            )
        )
    if ctx.cfg.deepspeed and 'deepspeed' in pk and pk['deepspeed'] is None:
        out.append(
            Finding(
                WARNING,
                'version.deepspeed',
                ['deepspeed'],
                'deepspeed is not installed here; ms-swift '
                'fails with "The \'deepspeed\' distribution was not found" on a machine without it',
                'pip install "grpo-recipes[gpu]" on the training machine',
            )
        )
    return out
