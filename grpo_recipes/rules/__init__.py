"""The guard's rules: one pure function per rule, over one :class:`~.registry.Context`, grouped by concern
(arguments, devices, batch, lengths, vllm, rewards, packages, memory, rollout, signal).

Each rule returns :class:`~grpo_recipes.findings.Finding` objects naming the argument(s), the rule id, the message
and the fix as the exact YAML/CLI change. Where ms-swift, vLLM or DeepSpeed have their own check, the message
quotes their wording (and the source file), so what the guard says before launch is what the framework would say
minutes later. Each rule declares the ids it can emit (``@rule(...)``); a grep for an id finds the code.
"""

from __future__ import annotations

from ..findings import SEVERITY_ORDER, Finding
from . import arguments, batch, devices, lengths, memory, packages, rewards, rollout, signal, vllm
from .registry import Context, Rule

RULES: list[Rule] = [
    arguments.unknown_arguments,
    arguments.rlhf_type_is_grpo,
    arguments.model_given,
    arguments.lora_rank_positive,
    devices.visible_gpus_match_nproc,
    memory.trl_ds3_gather_whole_model,
    devices.visible_gpus_exist,
    devices.rollout_gpus,
    rollout.rollout_server_arguments,
    rollout.rollout_in_the_foreground,
    vllm.colocate_tp_divides_world,
    vllm.tp_divides_heads,
    vllm.tp_positive,
    devices.multi_node_env,
    vllm.trl_old_vllm_device,
    vllm.server_endpoints,
    batch.batch_rules,
    batch.batch_shape_warnings,
    lengths.length_rules,
    lengths.data_lengths,
    vllm.vllm_mode_rules,
    vllm.colocate_only_options,
    vllm.async_generate_needs_server,
    vllm.ds3_gather,
    vllm.expandable_segments_with_sleep,
    vllm.qlora_server,
    vllm.bf16_needs_ampere,
    vllm.quantization_needs_capability,
    rewards.ref_model_with_lora,
    rewards.reward_rules,
    packages.package_rules,
    arguments.model_type_and_template,
    devices.in_trainer_vllm_layout,
    signal.learning_signal,
]
"""Every rule, in the order their findings are listed within one severity."""


def run_rules(ctx: Context) -> list[Finding]:
    findings: list[Finding] = []
    for fn in RULES:
        findings.extend(fn(ctx))
    findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return findings
