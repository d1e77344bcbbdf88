"""When TRL runs a no-grad forward for the old policy's log-probabilities, held to TRL itself: a real
``GRPOTrainer`` (TRL 0.29, the tiny Qwen2 of tests/tiny_model.py, on CPU, rollouts by transformers' generate, beta 0)
against the guard's ``plan.old_logprobs_needed``, which the trace (``trace.trace_step(old_pass=...)``) and the speed
model both read. TRL computes them only when gradient accumulation is not a multiple of steps_per_generation x
num_iterations, or with vLLM's importance-sampling correction (trl/trainer/grpo_trainer.py
``_generate_and_score_completions``); ms-swift's count is held to a real ``swift rlhf`` in tests/test_logits_span.py.
Nothing is mocked: the trainer's own method is wrapped to count its calls."""

import pytest

from grpo_recipes.config import GRPOConfig as GuardConfig
from grpo_recipes.frontends import FRAMEWORKS
from grpo_recipes.hardware import Hardware
from grpo_recipes.plan import build_plan, old_logprobs_needed


def _no_grad_passes_per_generation(model_dir, out, accumulation: int, steps_per_generation: int) -> list[int]:
    """Run 2 optimizer steps; return, for each generation, how many log-probability forwards ran without autograd."""
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    args = GRPOConfig(
        output_dir=str(out),
        per_device_train_batch_size=2,
        num_generations=2,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=steps_per_generation,
        max_completion_length=4,
        max_steps=2,
        beta=0.0,
        use_cpu=True,
        bf16=False,
        report_to='none',
        logging_steps=1,
        save_strategy='no',
        use_vllm=False,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=lambda completions, **kw: [float(len(c)) for c in completions],
        args=args,
        train_dataset=Dataset.from_list([{'prompt': f'What is {i} + 1?'} for i in range(16)]),
    )
    counts: list[int] = []
    generate, logps = trainer._generate_and_score_completions, trainer._get_per_token_logps_and_entropies

    def counting_generate(*a, **kw):
        counts.append(0)
        return generate(*a, **kw)

    def counting_logps(*a, **kw):
        if not torch.is_grad_enabled() and counts:
            counts[-1] += 1
        return logps(*a, **kw)

    trainer._generate_and_score_completions = counting_generate
    trainer._get_per_token_logps_and_entropies = counting_logps
    trainer.train()
    return counts


@pytest.mark.parametrize('accumulation, steps_per_generation', [(2, 2), (2, 4)])
def test_trl_runs_the_old_policy_pass_when_the_guard_says(tiny_qwen2, tmp_path, accumulation, steps_per_generation):
    cfg = GuardConfig(
        per_device_train_batch_size=2,
        num_generations=2,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=steps_per_generation,
        beta=0.0,
        use_vllm=False,
    )
    expected = int(old_logprobs_needed(cfg, build_plan(cfg, {}, Hardware(gpus=1)), FRAMEWORKS['trl']))
    assert expected == int(accumulation % steps_per_generation != 0)  # one case of each
    counts = _no_grad_passes_per_generation(tiny_qwen2, tmp_path, accumulation, steps_per_generation)
    assert counts and all(c == expected for c in counts), counts
