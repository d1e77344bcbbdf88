"""Arguments the framework would not accept at all."""
from __future__ import annotations

from .. import swift_args
from ..findings import ERROR, WARNING, Finding
from ..frontends.trl.arguments import CLASSES, describe_unknown
from .registry import Context, rule


@rule('args.unknown')
def unknown_arguments(ctx: Context) -> list[Finding]:
    """An argument the framework's parser does not know. ms-swift stops with ``ValueError: remaining_argv``
    (swift/pipelines/base.py); TRL's TrlParser with "Some specified arguments are not used by the HfArgumentParser"
    (trl/scripts/utils.py)."""
    if ctx.launch.framework == 'trl':
        out = []
        for flag in ctx.remaining:
            msg, fatal = describe_unknown(flag, CLASSES, ctx.packages.get('trl'))
            if not msg:
                continue
            out.append(Finding(ERROR if fatal else WARNING, 'args.unknown', [flag.lstrip('-')],
                               msg + ('. TrlParser stops with "Some specified arguments are not used by the '
                                      'HfArgumentParser"' if fatal else ''),
                               f'remove {flag}' if fatal else None, 'trl/scripts/utils.py (TrlParser)'))
        return out
    out = []
    for u in swift_args.explain_remaining(ctx.remaining):
        fix = f'rename {u.flag} to {u.suggestion}' if u.suggestion else f'remove {u.flag}'
        out.append(Finding(ERROR, 'args.unknown', [u.flag.lstrip('-')],
                           f'{u.describe()}. ms-swift stops with `ValueError: remaining_argv: [...]`',
                           fix, 'swift/pipelines/base.py'))
    return out


@rule('args.rlhf-type')
def rlhf_type_is_grpo(ctx: Context) -> list[Finding]:
    """A ``swift rlhf`` launch that is not GRPO: ms-swift's default ``rlhf_type`` is dpo
    (swift/arguments/rlhf_args.py), so a GRPO config without it trains something else."""
    if ctx.cfg.rlhf_type != 'grpo':
        return [Finding(ERROR, 'args.rlhf-type', ['rlhf_type'],
                        f'rlhf_type is {ctx.cfg.rlhf_type!r}; this guard checks GRPO launches '
                        f'(ms-swift\'s default rlhf_type is dpo)', 'rlhf_type: grpo')]
    return []
