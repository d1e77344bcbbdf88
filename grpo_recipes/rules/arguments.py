"""Arguments the framework would not accept at all."""
from __future__ import annotations

from ..findings import ERROR, INFO, WARNING, Finding
from ..frontends.swift import registry
from ..frontends.swift.versions import explain
from ..versions import version_tuple
from .registry import Context, rule


@rule('args.unknown', 'args.config-key', 'args.value')
def unknown_arguments(ctx: Context) -> list[Finding]:
    """An argument the framework's parser does not know. ms-swift stops with ``ValueError: remaining_argv``
    (swift/pipelines/base.py); TRL's TrlParser with "Some specified arguments are not used by the HfArgumentParser"
    (trl/scripts/utils.py), or argparse with a value it refuses (args.value: a bare ``--bf16``)."""
    if ctx.launch.fw.unknown_arguments is not None:  # whose parser reads each word (TRL: frontends/trl/verdicts.py)
        return ctx.launch.fw.call('unknown_arguments', ctx)
    out = []
    # --ignore_args_error true: ms-swift logs the leftovers instead of stopping (swift/pipelines/base.py,
    # 3.x: llm/base.py)
    ignored = ctx.cfg.ignore_args_error
    for u in explain(ctx.remaining, ctx.packages.get('ms-swift')):
        fix = f'rename {u.flag} to {u.suggestion}' if u.suggestion else f'remove {u.flag}'
        stops = getattr(u, 'stops', None)  # an ambiguous abbreviation: argparse stops first, whatever the setting
        out.append(Finding(WARNING if ignored and not stops else ERROR, 'args.unknown', [u.flag.lstrip('-')],
                           f'{u.describe()}. ' + (stops or ('ms-swift ignores it (--ignore_args_error true): it has no '
                                                            'effect' if ignored else
                                                            'ms-swift stops with `ValueError: remaining_argv: [...]`')),
                           fix, 'argparse (HfArgumentParser, allow_abbrev)' if stops else 'swift/pipelines/base.py'))
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


@rule('args.registry-unchecked', 'args.model-type', 'args.template')
def model_type_and_template(ctx: Context) -> list[Finding]:
    """--model_type / --template must be names ms-swift registers (swift/model/model_meta.py MODEL_MAPPING,
    swift/template/register.py TEMPLATE_MAPPING)."""
    if not ctx.launch.fw.registers_models:
        return []
    cfg = ctx.cfg
    given = [(n, v) for n, v in (('model_type', cfg.model_type), ('template', cfg.template)) if v]
    if not given:
        return []
    swift_v = version_tuple(ctx.packages.get('ms-swift'))
    snap_v = version_tuple(registry.snapshot()['ms_swift_version'])
    if swift_v is not None and snap_v is not None and swift_v[:1] != snap_v[:1]:
        return [Finding(INFO, 'args.registry-unchecked', [n for n, _ in given],
                        f'{", ".join(f"--{n} {v}" for n, v in given)}: not checked (the registry snapshot is ms-swift '
                        f'{registry.snapshot()["ms_swift_version"]}\'s; the launch is judged against ms-swift '
                        f'{ctx.packages.get("ms-swift")})')]
    out = []
    for name, value in given:
        problem = (registry.model_type_problem if name == 'model_type' else registry.template_problem)(value, cfg.model)
        if problem:
            src = 'swift/model/model_meta.py' if name == 'model_type' else 'swift/template/register.py'
            out.append(Finding(ERROR, f'args.{name.replace("_", "-")}', [name], problem[0], problem[1], src))
    return out


@rule('args.model-missing')
def model_given(ctx: Context) -> list[Finding]:
    """A ``swift rlhf`` or ``swift rollout`` launch without ``--model``: ms-swift stops at start-up with
    ``ValueError: Please set --model <model_id_or_path>`` (swift/arguments/base_args/model_args.py,
    ModelArguments.__post_init__). A checkpoint whose args.json it reads (``--adapters``, ``--resume_from_checkpoint``,
    ``--ckpt_dir`` in 3.x: BaseArguments._init_ckpt_dir, swift/arguments/base_args/base_args.py) may supply it."""
    if not ctx.launch.fw.requires_model_flag or ctx.cfg.model:
        return []
    from_ckpt = ('--adapters', '--ckpt_dir', '--resume_from_checkpoint', '--mcore_model', '--mcore_adapter')
    if any(a.split('=', 1)[0] in from_ckpt for a in ctx.launch.argv):
        return []
    return [Finding(ERROR, 'args.model-missing', ['model'],
                    'no --model: ms-swift stops with "ValueError: Please set --model <model_id_or_path>"',
                    'model: <hub id or local dir>, e.g. model: Qwen/Qwen2.5-7B-Instruct',
                    'swift/arguments/base_args/model_args.py')]


@rule('args.lora-rank')
def lora_rank_positive(ctx: Context) -> list[Finding]:
    """A LoRA rank of 0 or less: PEFT refuses it when it builds each adapter layer with ``ValueError: `r` should be a
    positive integer value but the value passed is 0`` (peft/tuners/lora/layer.py, LoraLayer.update_layer)."""
    cfg = ctx.cfg
    if cfg.tuner_type != 'lora' or cfg.lora_rank is None or cfg.lora_rank > 0:
        return []
    name = ctx.launch.name('lora_rank')  # TRL: lora_r
    return [Finding(ERROR, 'args.lora-rank', [name],
                    f'{name} is {cfg.lora_rank}: PEFT stops with "`r` should be a positive integer value but the '
                    f'value passed is {cfg.lora_rank}"', f'{name}: 16 (any integer >= 1; 8-64 is usual)',
                    'peft/tuners/lora/layer.py (LoraLayer.update_layer)')]
