"""plan.prompt_bound: the one place the longest prompt is worked out (the memory verdict, the estimate's default,
the fix search and the length rules all call it). Expected values are worked out by hand from the rule in its
docstring."""

from dataclasses import replace

from grpo_recipes.config import GRPOConfig
from grpo_recipes.plan import prompt_bound

BASE = replace(
    GRPOConfig(),
    max_completion_length=1000,
    max_length=None,
    use_vllm=True,
    vllm_mode='colocate',
    vllm_max_model_len=None,
)


def test_max_length_bounds_and_is_capped_at_the_context():
    b = prompt_bound(replace(BASE, max_length=3000), 32768)
    assert (b.tokens, b.why, b.bounded) == (3000, 'max_length', True)
    assert prompt_bound(replace(BASE, max_length=40000), 32768).tokens == 32768
    assert prompt_bound(replace(BASE, max_length=40000), 32768, clamp=False).tokens == 40000


def test_vllm_context_leaves_room_for_the_completion():
    cfg = replace(BASE, max_length=3000, vllm_max_model_len=2500)
    b = prompt_bound(cfg, 32768)
    assert b.tokens == 1500 and b.why == 'vllm_max_model_len 2500 - max_completion_length 1000'
    assert prompt_bound(cfg, 32768, vllm=False).tokens == 3000
    assert prompt_bound(replace(cfg, vllm_mode='server'), 32768).why.startswith("the rollout server's max_model_len")
    assert prompt_bound(replace(cfg, use_vllm=False), 32768).tokens == 3000


def test_the_data_bounds_it():
    b = prompt_bound(replace(BASE, max_length=3000), 32768, data_max=700)
    assert (b.tokens, b.bounded) == (700, True)
    assert prompt_bound(BASE, 32768, data_max=40000).tokens == 32768


def test_unbounded_falls_back_to_the_model_context():
    b = prompt_bound(BASE, 32768)
    assert (b.tokens, b.bounded) == (31768, False)
    assert b.why == 'the model context 32768 - max_completion_length 1000'
    assert prompt_bound(BASE, 32768, leave_room=False).tokens == 32768
    assert prompt_bound(BASE, None).tokens is None
    assert prompt_bound(replace(BASE, max_completion_length=40000), 32768).tokens == 1


def test_the_estimates_default_is_max_length_and_leaves_the_inputs_as_given():
    import json
    from pathlib import Path

    from grpo_recipes.hardware import Hardware
    from grpo_recipes.memory.arch import Arch
    from grpo_recipes.memory.estimate import estimate
    from grpo_recipes.memory.inputs import Inputs
    from grpo_recipes.plan import build_plan

    arch = Arch.from_config(
        json.loads(
            (Path(__file__).resolve().parents[1] / 'grpo_recipes/model_configs/Qwen2.5-7B-Instruct.json').read_text()
        )
    )
    cfg, _ = GRPOConfig.from_argv(['--rlhf_type', 'grpo', '--max_length', '3000', '--max_completion_length', '1000'])
    plan = build_plan(cfg, {}, Hardware(gpus=1))
    inp = Inputs(arch=arch, capacity_gib=79.15, gpu_name='A100-80G')
    default = estimate(cfg, plan, inp)
    assert inp.prompt_len is None
    assert [m.total_gib for m in default] == [m.total_gib for m in estimate(cfg, plan, replace(inp, prompt_len=3000))]
    assert [m.total_gib for m in default] != [m.total_gib for m in estimate(cfg, plan, replace(inp, prompt_len=100))]
