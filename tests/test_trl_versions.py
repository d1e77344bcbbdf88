"""--trl-version: an older TRL's defaults and semantics (read in TRL's source at each tag; see
grpo_recipes/frontends/trl_versions.py for the file and line of each)."""

import json

from conftest import run_cli

M = 'Qwen/Qwen2.5-7B-Instruct'
LAUNCH = [
    'accelerate',
    'launch',
    '--num_processes',
    '8',
    '--use_deepspeed',
    '--zero_stage',
    '3',
    'train.py',
    '--model_name_or_path',
    M,
    '--max_completion_length',
    '1024',
    '--num_generations',
    '8',
]


def check(version, *args):
    v = ['--trl-version', version] if version else []
    proc = run_cli(
        'grpo_recipes.cli.guard', 'check', '--json', '--gpus', '8', '--gpu-type', 'A100-80G', *v, '--', *LAUNCH, *args
    )
    return json.loads(proc.stdout)


def errors(out):
    return {f['rule']: f for f in out['findings'] if f['severity'] == 'error'}


def test_max_prompt_length_truncates_until_0_25_and_is_ignored_in_0_26_0_27():
    args = ['--max_prompt_length', '256', '--use_vllm', '--vllm_mode', 'colocate']
    old = check('0.20.0', *args)
    assert old['config']['max_length'] == 256
    assert old['config']['vllm_max_model_len'] == 256 + 1024  # colocate: max_prompt_length + max_completion_length
    assert 'args.unknown' not in errors(old)
    assert check('0.20.0', '--use_vllm', '--vllm_mode', 'colocate')['config']['max_length'] == 512  # its default
    dep = check('0.26.2', *args)
    assert dep['config']['max_length'] is None and 'args.unknown' not in errors(dep)
    assert any('deprecated and ignored' in n for n in dep['launch']['notes'])
    new = check(None, *args)  # the installed 0.29: TrlParser rejects the name
    assert 'max_prompt_length' in errors(new)['args.unknown']['message']


def test_torch_dtype_is_the_dtype_until_0_26():
    for version in ('0.20.0', '0.26.2'):
        out = check(version, '--torch_dtype', 'bfloat16')
        assert out['config']['torch_dtype'] == 'bfloat16', version
        assert 'args.unknown' not in errors(out)
    assert check('0.20.0')['config']['torch_dtype'] == 'float32'  # unset: from_pretrained's float32
    assert 'args.unknown' in errors(check(None, '--torch_dtype', 'bfloat16'))  # removed in 0.27
    # model_init_kwargs: the key was torch_dtype up to 0.22
    out = check('0.20.0', '--model_init_kwargs', '{"torch_dtype": "bfloat16"}')
    assert out['config']['torch_dtype'] == 'bfloat16'


def test_trl_0_14_counts_prompts_per_device():
    out = check('0.14.0', '--per_device_train_batch_size', '2', '--torch_dtype', 'bfloat16')
    c = out['config']
    assert c['per_device_train_batch_size'] == 16 and c['steps_per_generation'] == 1  # 2 prompts x 8 generations
    assert c['gradient_accumulation_steps'] == 8 and c['beta'] == 0.04  # 0.14's defaults
    # the same flags on 0.15 count completions: 2 per micro-batch
    c15 = check('0.15.2', '--per_device_train_batch_size', '2', '--torch_dtype', 'bfloat16')['config']
    assert c15['per_device_train_batch_size'] == 2 and c15['steps_per_generation'] == 1
    peak14 = max(m['total_gib'] for m in out['memory'])
    peak15 = max(
        m['total_gib']
        for m in check('0.15.2', '--per_device_train_batch_size', '2', '--torch_dtype', 'bfloat16')['memory']
    )
    assert peak14 > peak15  # 16 completions per micro-batch against 2


def test_trl_0_15_generates_per_micro_step():
    # 0.15's own check: (processes x per_device_train_batch_size) divisible by num_generations, whatever the
    # accumulation; 8 x 1 = 8 is not divisible by 16 even with 4 accumulation steps (0.16+ would accept 32)
    args = ['--per_device_train_batch_size', '1', '--gradient_accumulation_steps', '4', '--num_generations', '16']
    assert 'batch.num-generations-divides' in errors(check('0.15.2', *args))
    assert 'batch.num-generations-divides' not in errors(check('0.20.0', *args))
