"""Memory verdicts that need no memory plan: a capacity check over the model's weights and the GPU.
(The per-GPU memory verdicts are in :mod:`grpo_recipes.memory.verdicts`.)"""

from __future__ import annotations

from ..findings import ERROR, Finding
from ..gpu_names import lookup
from ..memory.arch import Arch
from .registry import Context, rule


@rule('trl.ds3-gather')
def trl_ds3_gather_whole_model(ctx: Context) -> list[Finding]:
    """TRL under ZeRO-3 gathers the whole model on every GPU for generation (unwrap_model_for_generation
    with ds3_gather_for_generation), and with PEFT for the vLLM weight sync too (it merges the adapter)."""
    cfg = ctx.cfg
    if not ctx.launch.fw.zero3_gathers_for_generation or cfg.zero_stage != 3 or not ctx.model:
        return []
    found = lookup(ctx.hw.gpu_type)
    cap = ctx.hw.gpu_mem_gib or (found[1] if found else None)
    try:
        whole = Arch.from_config(ctx.model).weight_bytes() / 2**30
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return []
    gathers = (not cfg.use_vllm and cfg.ds3_gather_for_generation) or (cfg.use_vllm and cfg.is_lora)
    if not cap or not gathers or whole < 0.9 * cap:
        return []
    why = (
        'generation gathers every ZeRO-3 shard (unwrap_model_for_generation, ds3_gather_for_generation true)'
        if not cfg.use_vllm
        else 'the vLLM weight sync gathers the whole model to merge the LoRA adapter'
    )
    return [
        Finding(
            ERROR,
            'trl.ds3-gather',
            ['ds3_gather_for_generation'],
            f'{why}: {whole:.1f} GiB of weights on each {cap:.1f} GiB GPU',
            '--ds3_gather_for_generation false (HF generate only; slower), or --use_vllm --vllm_mode '
            'server without PEFT, or larger GPUs',
            'trl/models/utils.py::unwrap_model_for_generation; trl GRPOConfig ds3_gather_for_generation',
        )
    ]
