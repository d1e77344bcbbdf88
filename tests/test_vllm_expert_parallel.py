"""vLLM expert parallelism (``--vllm_enable_expert_parallel`` in ms-swift, ``--enable-expert-parallel`` in vLLM): a
MoE's routed experts are spread over the engine's TP x DP ranks (vLLM ``FusedMoEParallelConfig.make``: ``ep_size =
tp_size * dp_size``), each rank holding experts / (TP x DP) of them whole; attention, embeddings and the rest stay
split by TP alone. A published start (vllm-project/recipes#12: Qwen3-Coder-480B-A35B-FP8, ``-dp=8
--enable-expert-parallel`` on H20s) logged 48.66 GiB of KV cache per GPU, which no plan that keeps a 1/TP share of
all 160 experts on each rank can reach: the weights alone would exceed the card."""

import pytest

from grpo_recipes.config import GRPOConfig
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.vllm_startup import per_rank_weight_bytes, routed_expert_bytes, vllm_weight_bytes
from grpo_recipes.models import bundled_config

MOE, _ = bundled_config('Qwen/Qwen3-30B-A3B')


def cfg(*flags: str) -> GRPOConfig:
    return GRPOConfig.from_argv(['--rlhf_type', 'grpo', '--use_vllm', 'true', *flags])[0]


def test_the_flag_is_ms_swifts_own():
    assert cfg('--vllm_enable_expert_parallel', 'true').vllm_enable_expert_parallel is True
    assert cfg().vllm_enable_expert_parallel is False


def test_routed_experts_are_counted_from_the_config():
    a = Arch.from_config(MOE)
    routed = MOE['num_hidden_layers'] * MOE['num_experts'] * 3 * MOE['hidden_size'] * MOE['moe_intermediate_size']
    assert routed_expert_bytes(a, vllm_weight_bytes(cfg(), a, {})) == pytest.approx(routed * 2, rel=1e-6)  # bf16


@pytest.mark.parametrize('tp, dp', [(1, 4), (2, 4), (4, 2)])
def test_experts_spread_over_tp_times_dp(tp, dp):
    a = Arch.from_config(MOE)
    flags = ['--vllm_tensor_parallel_size', str(tp), '--vllm_data_parallel_size', str(dp)]
    total = vllm_weight_bytes(cfg(*flags), a, {})
    experts = routed_expert_bytes(a, total)
    assert per_rank_weight_bytes(cfg(*flags), a, {}) == pytest.approx(total / tp)  # EP off: every rank a 1/TP slice
    on = per_rank_weight_bytes(cfg(*flags, '--vllm_enable_expert_parallel', 'true'), a, {})
    assert on == pytest.approx((total - experts) / tp + experts / (tp * dp))
    assert on < total / tp


def test_a_dense_model_is_not_changed():
    from grpo_recipes.models import builtin_config

    a = Arch.from_config(builtin_config('Qwen2.5-7B-Instruct.json'))
    c = cfg('--vllm_data_parallel_size', '4', '--vllm_enable_expert_parallel', 'true')
    assert per_rank_weight_bytes(c, a, {}) == vllm_weight_bytes(c, a, {})
