"""The no-grad passes and the weight loading the trace runs, held to the frameworks themselves.

First, when TRL runs a no-grad forward for the old policy's log-probabilities: a real
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
from grpo_recipes.plan import build_plan, loads_with_device_map, old_logprobs_needed

# Run in a fresh interpreter: ms-swift, once imported by another test in the same process, patches transformers'
# trainer callbacks (swift/trainers/patcher.py) in ways plain TRL does not expect.
TRL_RUN = """
import json, sys
import torch
from datasets import Dataset
from trl import GRPOConfig, GRPOTrainer

model_dir, out, accumulation, steps_per_generation = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
args = GRPOConfig(
    output_dir=out, per_device_train_batch_size=2, num_generations=2, gradient_accumulation_steps=accumulation,
    steps_per_generation=steps_per_generation, max_completion_length=4, max_steps=2, beta=0.0, use_cpu=True,
    bf16=False, report_to='none', logging_steps=1, save_strategy='no', use_vllm=False,
)
trainer = GRPOTrainer(
    model=model_dir,
    reward_funcs=lambda completions, **kw: [float(len(c)) for c in completions],
    args=args,
    train_dataset=Dataset.from_list([{'prompt': f'What is {i} + 1?'} for i in range(16)]),
)
counts = []
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
print(json.dumps(counts))
"""


def _no_grad_passes_per_generation(model_dir, out, accumulation: int, steps_per_generation: int) -> list[int]:
    """Run 2 optimizer steps; return, for each generation, how many log-probability forwards ran without autograd."""
    import json
    import os
    import subprocess
    import sys

    argv = [sys.executable, '-c', TRL_RUN, str(model_dir), str(out), str(accumulation), str(steps_per_generation)]
    env = {**os.environ, 'CUDA_VISIBLE_DEVICES': ''}
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


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


def test_swift_loads_onto_the_gpu_with_a_device_map_unless_zero3_or_fsdp(monkeypatch):
    """The trace loads the weights into one segment of their size where ``plan.loads_with_device_map`` says the
    trainer passes a device_map (transformers' caching_allocator_warmup runs only then). Held to ms-swift's own
    ``get_default_device_map`` under each condition it reads: DeepSpeed's ZeRO-3 config (transformers'
    ``HfDeepSpeedConfig``, which ms-swift's trainer setup creates) and accelerate's FSDP variable."""
    import gc

    from swift.model.utils import get_default_device_map
    from transformers.integrations import HfDeepSpeedConfig

    def guard(*argv):
        cfg, _ = GuardConfig.from_argv(['--rlhf_type', 'grpo', *argv])
        return loads_with_device_map(cfg, build_plan(cfg, {}, Hardware(gpus=1)), FRAMEWORKS['swift'])

    assert guard() and get_default_device_map() is not None
    for stage in (2, 3):
        ds = HfDeepSpeedConfig({'zero_optimization': {'stage': stage}, 'train_micro_batch_size_per_gpu': 1})
        assert guard('--deepspeed', f'zero{stage}') == (get_default_device_map() is not None) == (stage != 3)
        del ds
        gc.collect()  # transformers keeps the config by weak reference
    monkeypatch.setenv('ACCELERATE_USE_FSDP', 'true')
    assert not guard('--fsdp', 'full_shard') and get_default_device_map() is None
