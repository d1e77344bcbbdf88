"""`grpo-guard trace`: the trainer step traced on the real model code, and the analytic memory model held to it.

The grid (tests/data/trace_grid.json, written by scripts/gen_trace_grid.py from fake-tensor traces of Qwen2.5
7B/32B, Qwen3-8B and Llama-3.1-8B, LoRA and full, checkpointing on and off, micro-batch 1-16, completions
512-8192) is the oracle: the analytic trainer peak, recomputed here from the current code, must be within 5% of
every traced point. The fake-tensor counter is checked against the same step on real CPU tensors."""

import json

import pytest
from conftest import ROOT, run_cli

from grpo_recipes.config import GRPOConfig
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.plan import build_plan

GRID = json.loads((ROOT / 'tests' / 'data' / 'trace_grid.json').read_text())


def _cfg(p):
    argv = [
        '--rlhf_type',
        'grpo',
        '--tuner_type',
        p['tuner'],
        '--per_device_train_batch_size',
        str(p['batch']),
        '--max_completion_length',
        str(p['completion']),
        '--gradient_checkpointing',
        str(p['gradient_checkpointing']).lower(),
        '--torch_dtype',
        'bfloat16',
        '--beta',
        '0',
    ]
    return GRPOConfig.from_argv(argv)[0]


@pytest.mark.parametrize(
    'point',
    GRID['points'],
    ids=lambda p: (
        f'{p["model"]}-{p["tuner"]}-gc{int(p["gradient_checkpointing"])}'
        f'-bs{p["batch"]}-{p["prompt"]}+{p["completion"]}-{p["loss"]}-{p["adamw"]}'
    ),
)
def test_analytic_trainer_peak_within_5pct_of_the_trace(point):
    from grpo_recipes.memory.trace import analytic_peak

    cfg = _cfg(point)
    arch = Arch.from_config(GRID['models'][point['model']])
    model = analytic_peak(
        cfg,
        build_plan(cfg, {}, Hardware(gpus=1)),
        arch,
        point['prompt'],
        sft=point['loss'] == 'sft',
        adamw=point['adamw'],
    )
    assert abs(model / point['traced_peak_gib'] - 1) <= 0.05, (model, point['traced_peak_gib'], point['peak_at'])


TINY = {
    'architectures': ['Qwen2ForCausalLM'],
    'model_type': 'qwen2',
    'hidden_size': 64,
    'intermediate_size': 160,
    'num_hidden_layers': 2,
    'num_attention_heads': 4,
    'num_key_value_heads': 2,
    'vocab_size': 512,
    'tie_word_embeddings': False,
    'max_position_embeddings': 2048,
    'torch_dtype': 'float32',
}


@pytest.mark.parametrize('tuner,gc', [('lora', True), ('lora', False), ('full', False)])
def test_fake_trace_counts_what_real_tensors_allocate(tuner, gc):
    from grpo_recipes.memory.trace import categorise, trace_step

    cfg = _cfg({'tuner': tuner, 'batch': 2, 'completion': 48, 'gradient_checkpointing': gc})
    cfg.torch_dtype = 'float32'
    fake, keys_f, _ = trace_step(cfg, TINY, 16, fake=True)
    real, keys_r, _ = trace_step(cfg, TINY, 16, fake=False)
    assert fake.peak > 0 and abs(fake.peak / real.peak - 1) <= 0.05, (fake.peak, real.peak)
    assert fake.peak_at == real.peak_at
    cf, cr = categorise(fake, keys_f), categorise(real, keys_r)
    assert cf['parameters'] == cr['parameters'] and cf['optimizer state'] == cr['optimizer state']


@pytest.mark.slow
def test_trace_cli_on_a_recipe():
    proc = run_cli('grpo_recipes.cli.guard', 'trace', '--json', 'recipes/qwen2.5-7b-instruct/lora-2xa100-80g.yaml')
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert out['traced_peak_gib'] > 14 and abs(out['model_peak_gib'] / out['traced_peak_gib'] - 1) <= 0.05
    cats = out['categories_gib']
    assert set(cats) == {'parameters', 'gradients', 'optimizer state', 'activations', 'temporaries'}
    # LoRA, checkpointing, micro-batch 16 x 1280: the peak is in the logits' backward, where the checkpointed layer
    # inputs kept from forward (activations) meet backward's fp32 buffers over the logits (temporaries); both are
    # gigabytes
    assert cats['activations'] > 1 and cats['temporaries'] > 1


def _measured_swift_step(tmp_path, tiny, command: str, rows: list[dict], args: list[str], plugins: tuple = ()):
    """Build the tiny Qwen2, run `swift <command>` on ``rows`` for 2 steps on CPU with the measuring plugin
    (tests/standins/measure_step.py, after ``plugins``) and return (the tiny model's dir, the last step's measurement:
    peak bytes, input shape, kept positions)."""
    import os
    import subprocess

    data = tmp_path / 'data.jsonl'
    data.write_text(''.join(json.dumps(row) + '\n' for row in rows))
    out = tmp_path / 'measure.jsonl'
    env = {**os.environ, 'GRPO_MEASURE_OUT': str(out), 'HF_HUB_OFFLINE': '1', 'PYTHONPATH': str(ROOT)}
    for k in ('NPROC_PER_NODE', 'CUDA_VISIBLE_DEVICES', 'NNODES'):
        env.pop(k, None)
    argv = [
        'swift',
        command,
        '--model',
        str(tiny),
        '--model_type',
        'qwen2',
        '--template',
        'qwen2_5',
        '--dataset',
        str(data),
        '--tuner_type',
        'lora',
        '--max_steps',
        '2',
        '--per_device_train_batch_size',
        '2',
        '--gradient_accumulation_steps',
        '1',
        '--external_plugins',
        *[str(ROOT / 'tests' / 'standins' / p) for p in (*plugins, 'measure_step.py')],
        '--check_model',
        'false',
        '--report_to',
        'none',
        '--save_strategy',
        'no',
        '--dataloader_num_workers',
        '0',
        '--output_dir',
        str(tmp_path / 'run'),
        '--use_cpu',
        'true',
        '--torch_dtype',
        'float32',
        '--gradient_checkpointing',
        'false',
        *args,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(steps) == 2
    return tiny, steps[-1]


def _lora_fp32(bs: int, completion: int) -> GRPOConfig:
    return GRPOConfig.from_argv(
        [
            '--rlhf_type',
            'grpo',
            '--tuner_type',
            'lora',
            '--per_device_train_batch_size',
            str(bs),
            '--max_completion_length',
            str(completion),
            '--gradient_checkpointing',
            'false',
            '--torch_dtype',
            'float32',
            '--beta',
            '0',
        ]
    )[0]


@pytest.mark.slow
def test_trace_matches_the_real_swift_rlhf_step(tmp_path, tiny_qwen2):
    """Parity with ms-swift itself: `swift rlhf` trains the tiny Qwen2 for 2 GRPO steps on CPU with a plugin
    (tests/standins/measure_step.py) that runs its compute_loss + backward under the same live-bytes counter,
    on real tensors; the fake-tensor trace of the same micro-batch shape must allocate within 5% of it. CPU
    means fp32 and CPU dropout here (the trace's CUDA-like bool-mask dropout is turned off for the comparison)."""
    from grpo_recipes.memory.trace import trace_step

    rows = [
        {'messages': [{'role': 'user', 'content': f'What is {a} + {b}?'}], 'solution': str(a + b)}
        for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]
    ]
    tiny, real = _measured_swift_step(
        tmp_path,
        tiny_qwen2,
        'rlhf',
        rows,
        [
            '--rlhf_type',
            'grpo',
            '--use_vllm',
            'false',
            '--num_generations',
            '2',
            '--max_completion_length',
            '16',
            '--max_length',
            '64',
            '--reward_funcs',
            'toy_distinct',
            '--beta',
            '0',
        ],
        plugins=('toy_reward.py',),
    )
    bs, total = real['shape']
    C = real['completion']
    counter, _, _ = trace_step(
        _lora_fp32(bs, C), json.loads((tiny / 'config.json').read_text()), total - C, cuda_dropout=False
    )
    assert abs(counter.step_peak / real['peak_bytes'] - 1) <= 0.05, (counter.step_peak, real)


@pytest.mark.slow
def test_sft_trace_matches_the_real_swift_sft_step(tmp_path, tiny_qwen2):
    """The SFT loss path the calibration's SFT cases ran: `swift sft` trains the tiny Qwen2 with LoRA for 2 steps
    on CPU under the measuring plugin; the fake-tensor trace of the same micro-batch in SFT mode
    (trace_step(sft=True): the model's own loss over the kept positions) must allocate within 5% of it."""
    from grpo_recipes.memory.trace import trace_step

    answer = '{a} + {b} = {s}. The answer is \\boxed{{{s}}}. ' * 3
    rows = [
        {
            'messages': [
                {'role': 'user', 'content': f'What is {a} + {b}?'},
                {'role': 'assistant', 'content': answer.format(a=a, b=b, s=a + b)},
            ]
        }
        for a, b in [(1, 2), (3, 4), (5, 6), (7, 8)]
    ]
    tiny, real = _measured_swift_step(tmp_path, tiny_qwen2, 'sft', rows, ['--max_length', '512'])
    bs, total = real['shape']
    C = real['completion'] - 1  # logits_to_keep = the labelled positions + 1
    counter, _, _ = trace_step(
        _lora_fp32(bs, C), json.loads((tiny / 'config.json').read_text()), total - C, cuda_dropout=False, sft=True
    )
    assert abs(counter.step_peak / real['peak_bytes'] - 1) <= 0.05, (counter.step_peak, real)
