"""Arguments the framework would not accept at all. Whose parser reads a word, and which names the framework
registers, is its front end's business (``Framework.unknown_arguments``, ``Framework.registry_check``)."""

from __future__ import annotations

from ..findings import ERROR, Finding
from .registry import Context, rule


@rule('args.unknown', 'args.config-key', 'args.value', 'args.release')
def unknown_arguments(ctx: Context) -> list[Finding]:
    """An argument the framework's parser does not know. ms-swift stops with ``ValueError: remaining_argv``
    (swift/pipelines/base.py); TRL's TrlParser with "Some specified arguments are not used by the HfArgumentParser"
    (trl/scripts/utils.py), or argparse with a value it refuses (args.value: a bare ``--bf16``)."""
    return ctx.launch.fw.call('unknown_arguments', ctx)  # whose parser reads each word


@rule('args.rlhf-type')
def rlhf_type_is_grpo(ctx: Context) -> list[Finding]:
    """A ``swift rlhf`` launch that is not GRPO: ms-swift's default ``rlhf_type`` is dpo
    (swift/arguments/rlhf_args.py), so a GRPO config without it trains something else."""
    if ctx.cfg.rlhf_type != 'grpo':
        return [
            Finding(
                ERROR,
                'args.rlhf-type',
                ['rlhf_type'],
                f'rlhf_type is {ctx.cfg.rlhf_type!r}; this guard checks GRPO launches '
                f"(ms-swift's default rlhf_type is dpo)",
                'rlhf_type: grpo',
            )
        ]
    return []


@rule('args.registry-unchecked', 'args.model-type', 'args.template')
def model_type_and_template(ctx: Context) -> list[Finding]:
    """--model_type / --template must be names ms-swift registers (swift/model/model_meta.py MODEL_MAPPING,
    swift/template/register.py TEMPLATE_MAPPING)."""
    hook = ctx.launch.fw.registry_check  # ms-swift: its registry snapshot (frontends/swift/registry.py)
    return ctx.launch.fw.call('registry_check', ctx) if hook else []


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
    return [
        Finding(
            ERROR,
            'args.model-missing',
            ['model'],
            'no --model: ms-swift stops with "ValueError: Please set --model <model_id_or_path>"',
            'model: <hub id or local dir>, e.g. model: Qwen/Qwen2.5-7B-Instruct',
            'swift/arguments/base_args/model_args.py',
        )
    ]


@rule('args.lora-rank')
def lora_rank_positive(ctx: Context) -> list[Finding]:
    """A LoRA rank of 0 or less: PEFT refuses it when it builds each adapter layer with ``ValueError: `r` should be a
    positive integer value but the value passed is 0`` (peft/tuners/lora/layer.py, LoraLayer.update_layer)."""
    cfg = ctx.cfg
    if cfg.tuner_type != 'lora' or cfg.lora_rank is None or cfg.lora_rank > 0:
        return []
    name = ctx.launch.name('lora_rank')  # TRL: lora_r
    return [
        Finding(
            ERROR,
            'args.lora-rank',
            [name],
            f'{name} is {cfg.lora_rank}: PEFT stops with "`r` should be a positive integer value but the '
            f'value passed is {cfg.lora_rank}"',
            f'{name}: 16 (any integer >= 1; 8-64 is usual)',
            'peft/tuners/lora/layer.py (LoraLayer.update_layer)',
        )
    ]
