"""TRL launches, written as the users in the failure reports typed them (installed TRL, no GPU needed:
the guard reads the launch; nothing runs)."""

import json
import sys

import pytest
from conftest import run_cli

HW40 = ['--gpus', '2', '--gpu-type', 'A100-40G']
HW80 = ['--gpus', '6', '--gpu-type', 'A100-80G']
INT4 = 'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4'


def check(*args, env=None):
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *args, env=env)
    out = json.loads(proc.stdout) if proc.stdout.strip().startswith('{') else None
    return proc, out


def rules(out, severity='error'):
    return {f['rule'] for f in out['findings'] if f['severity'] == severity}


def test_python_with_two_visible_gpus_is_data_parallel():
    # Reported: 32B int4 LoRA, 2xA100-40G, `python train_grpo.py` with both GPUs visible: the HF Trainer
    # wraps the model in nn.DataParallel and the log-prob pass grows on the GPU meant for vLLM.
    proc, out = check(
        *HW40,
        '--',
        'CUDA_VISIBLE_DEVICES=0,1',
        'python',
        'train_grpo.py',
        '--model_name_or_path',
        INT4,
        '--use_peft',
        '--use_vllm',
        '--vllm_mode',
        'server',
        '--max_completion_length',
        '512',
        '--per_device_train_batch_size',
        '4',
        '--num_generations',
        '4',
    )
    assert proc.returncode == 1 and 'device.data-parallel' in rules(out)
    f = next(f for f in out['findings'] if f['rule'] == 'device.data-parallel')
    assert 'nn.DataParallel' in f['message'] and 'CUDA_VISIBLE_DEVICES=0 python' in f['fix']
    fixed, out = check(
        *HW40,
        '--rollout',
        f'CUDA_VISIBLE_DEVICES=1 trl vllm-serve --model {INT4} --max-model-len 4096',
        '--',
        'CUDA_VISIBLE_DEVICES=0',
        'python',
        'train_grpo.py',
        '--model_name_or_path',
        INT4,
        '--use_peft',
        '--use_vllm',
        '--vllm_mode',
        'server',
        '--max_completion_length',
        '512',
        '--per_device_train_batch_size',
        '4',
        '--num_generations',
        '4',
    )
    assert fixed.returncode == 0, [f['message'] for f in out['findings'] if f['severity'] == 'error']
    assert out['launch']['rollout']['gpus'] == [1] and out['memory']


def test_vllm_device_of_old_trl_is_rejected_with_the_current_equivalent():
    # Reported: accelerate launch --num_processes 4 --gpu_ids 0,2,3,4,5 ... --vllm_device auto
    proc, out = check(
        *HW80,
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        '--gpu_ids',
        '0,2,3,4,5',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_device',
        'auto',
    )
    assert proc.returncode == 1
    f = next(f for f in out['findings'] if f['rule'] == 'args.unknown')
    assert '--vllm_device' in f['message'] and '--vllm_mode server' in f['message'] and 'trl vllm-serve' in f['message']
    assert out['plan']['world_size'] == 4 and out['plan']['visible_gpus'] == [0, 2, 3, 4, 5]
    fixed, out = check(
        *HW80,
        '--rollout',
        'CUDA_VISIBLE_DEVICES=5 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct --max-model-len 4096',
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        '--gpu_ids',
        '0,2,3,4',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_mode',
        'server',
    )
    assert fixed.returncode == 0, [f['message'] for f in out['findings'] if f['severity'] == 'error']
    assert out['config']['deepspeed'] == 'zero3'


def test_rollout_gpus_overlapping_training_in_trl_server_mode():
    proc, out = check(
        *HW80,
        '--rollout',
        'CUDA_VISIBLE_DEVICES=3 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct',
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        '--gpu_ids',
        '0,1,2,3',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_mode',
        'server',
    )
    assert proc.returncode == 1 and 'device.rollout-overlap' in rules(out)


def test_num_generations_must_divide_the_generation_batch_as_grpoconfig_checks():
    proc, out = check(
        *HW80,
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '2',
        '--gpu_ids',
        '0,1',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--per_device_train_batch_size',
        '3',
        '--num_generations',
        '4',
    )
    assert proc.returncode == 1 and 'batch.num-generations-divides' in rules(out)


def test_script_argument_unknown_to_trl_is_a_warning_with_a_suggestion():
    proc, out = check(
        *HW80,
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '1',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--num_generation',
        '8',
    )
    f = next(f for f in out['findings'] if f['rule'] == 'args.unknown')
    assert f['severity'] == 'warning' and 'your script may define it' in f['message']
    assert 'did you mean --num_generations' in f['message']


def test_trl_grpo_config_yaml_is_read_as_trlparser_reads_it(tmp_path):
    cfg = tmp_path / 'grpo.yaml'
    cfg.write_text(
        'model_name_or_path: Qwen/Qwen2.5-7B-Instruct\nper_device_train_batch_size: 4\n'
        'num_generations: 8\nuse_vllm: true\nvllm_mode: colocate\nvllm_max_model_length: 2048\n'
    )
    proc, out = check(
        '--gpus',
        '1',
        '--gpu-type',
        'A100-80G',
        '--',
        'trl',
        'grpo',
        '--config',
        str(cfg),
        '--per_device_train_batch_size',
        '8',
    )
    assert out['config']['per_device_train_batch_size'] == 8  # the command line wins over the file
    assert out['config']['vllm_max_model_len'] == 2048 and out['config']['vllm_mode'] == 'colocate'


@pytest.mark.long
def test_trl_snapshot_matches_the_installed_trl():
    # a fresh process, as tests/test_snapshot.py does for ms-swift: other tests' imports must not matter
    import subprocess

    from conftest import ROOT

    proc = subprocess.run(
        [sys.executable, 'scripts/gen_trl_snapshot.py', '--print'],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    from grpo_recipes.frontends.trl.arguments import snapshot

    assert json.loads(proc.stdout) == snapshot(), (
        'TRL changed: run `python scripts/gen_trl_snapshot.py` and review the diff'
    )


def test_vllm_device_on_trl_0_15_is_checked_as_that_trl_did():
    # Reported: `accelerate launch --num_processes 4 ... --vllm_device auto` with training on every visible GPU:
    # "ValueError: The requested device for vllm (cuda:4) is not available" (TRL 0.14-0.15 GRPOTrainer).
    base = [
        'accelerate',
        'launch',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_device',
        'auto',
        '--dtype',
        'bfloat16',
        '--per_device_train_batch_size',
        '4',
        '--num_generations',
        '6',
    ]
    hw = ['--trl-version', '0.15.2', '--gpus', '4', '--gpu-type', 'A100-80G']
    proc, out = check(*hw, '--', 'CUDA_VISIBLE_DEVICES=0,1,2,3', base[0], base[1], '--num_processes', '4', *base[2:])
    assert proc.returncode == 1
    f = next(f for f in out['findings'] if f['rule'] == 'trl.vllm-device')
    assert 'The requested device for vllm (cuda:4) is not available' in f['message']
    assert '--num_processes 3' in f['fix'] and 'args.unknown' not in rules(out, 'warning') | rules(out)
    fixed, out = check(*hw, '--', 'CUDA_VISIBLE_DEVICES=0,1,2,3', base[0], base[1], '--num_processes', '3', *base[2:])
    assert fixed.returncode == 0, [f['message'] for f in out['findings'] if f['severity'] == 'error']
    roles = {m['role'] for m in out['memory']}
    assert roles == {'train', 'rollout'}  # vLLM on GPU 3 alone, at TRL 0.15's default utilisation 0.9
    assert out['config']['vllm_gpu_memory_utilization'] == 0.9


def test_findings_and_fixes_of_a_trl_launch_use_trl_flags():
    # the reported logits case as a TRL colocate launch: the fix must be TRL/accelerate flags, not ms-swift YAML
    proc, out = check(
        '--gpus',
        '4',
        '--gpu-type',
        'A100-80G',
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        'train_grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--dtype',
        'bfloat16',
        '--use_vllm',
        '--vllm_mode',
        'colocate',
        '--per_device_train_batch_size',
        '8',
        '--gradient_accumulation_steps',
        '8',
        '--num_generations',
        '8',
        '--max_completion_length',
        '2048',
        '--vllm_gpu_memory_utilization',
        '0.6',
        '--vllm_max_model_length',
        '2304',
    )
    assert proc.returncode == 1 and 'memory.oom' in rules(out)
    fix = next(f for f in out['findings'] if f['rule'] == 'memory.fix')
    assert fix['fix'].startswith('add --') and 'sleep_level' not in fix['fix']
    text = json.dumps(out['findings'])
    import re

    for swift_only in (
        'sleep_level:',
        r'vllm_max_model_len\b',
        'ENV:',
        'move_model_batches',
        'offload_model',
        'ms-swift logs',
    ):
        assert not re.search(swift_only, text), swift_only


def test_trls_documented_server_layout_is_accepted():
    # TRL's vLLM guide: the server on GPUs 0-3 (TP 2 x DP 2), training on 4-7; prompts unbounded (TRL has no
    # prompt limit) may make a warning, never a refusal, and every message keeps TRL's words
    proc, out = check(
        '--gpus',
        '8',
        '--gpu-type',
        'H100',
        '--rollout',
        'CUDA_VISIBLE_DEVICES=0,1,2,3 trl vllm-serve '
        '--model Qwen/Qwen2.5-7B-Instruct --tensor-parallel-size 2 --data-parallel-size 2',
        '--',
        'CUDA_VISIBLE_DEVICES=4,5,6,7',
        'accelerate',
        'launch',
        '--multi_gpu',
        '--num_processes',
        '4',
        'train.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_mode',
        'server',
        '--bf16',
        'true',
        '--dtype',
        'bfloat16',
    )  # a bare --bf16 stops TRL >= 0.19's parser:
    # tests/test_trl_script_parsers.py::test_bare_bf16_is_argparses_error,
    # [f['message'] for f in out['findings'] if f['severity'] == 'error']
    assert proc.returncode == 0
    assert out['launch']['rollout']['gpus'] == [0, 1, 2, 3] and out['plan']['world_size'] == 4
    assert 'model_name_or_path context' not in json.dumps(out['assumptions'])


def test_one_accelerate_process_seeing_two_gpus_is_data_parallel_too():
    # accelerate's simple launcher (one process, no --multi_gpu) leaves the run undistributed, and TrainingArguments
    # then counts every visible GPU (transformers/training_args.py _setup_devices): DataParallel, as with python
    args = ['train_grpo.py', '--model_name_or_path', INT4, '--use_peft', '--use_vllm', '--vllm_mode', 'server']
    # (--num_processes 1: with neither it nor a config file accelerate starts one process per visible GPU, issue 21)
    proc, out = check(*HW40, '--', 'CUDA_VISIBLE_DEVICES=0,1', 'accelerate', 'launch', '--num_processes', '1', *args)
    assert proc.returncode == 1 and 'device.data-parallel' in rules(out)
    proc, out = check(*HW40, '--', 'CUDA_VISIBLE_DEVICES=0,1', 'torchrun', '--nproc_per_node', '1', *args)
    assert 'device.data-parallel' not in rules(out) | rules(out, 'warning')  # torchrun: distributed, one GPU


def test_trl_cli_accelerate_config_by_name(tmp_path):
    # `trl grpo --accelerate_config zero3`: TRL's CLI resolves the name to the config it ships
    # (trl/cli/accelerate_config.py); without it (and no accelerate config file), accelerate starts one process per
    # visible GPU (accelerate/commands/launch.py _validate_launch_command; issue 21 item 4: was planned as one)
    args = [
        'trl',
        'grpo',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--dataset_name',
        'trl-lib/DeepMath-103K',
        '--use_vllm',
        '--vllm_mode',
        'colocate',
        '--dtype',
        'bfloat16',
        '--vllm_max_model_length',
        '2048',
    ]
    proc, out = check(*HW80, '--', *args[:2], '--accelerate_config', 'zero3', *args[2:])
    assert out['plan']['world_size'] == 8 and out['config']['deepspeed'] == 'zero3'
    assert 'accelerate_config' not in {n for f in out['findings'] for n in f['arguments']}
    assert any('trl/accelerate_configs/zero3.yaml' in a for a in out['assumptions'])
    _, one = check(*HW80, '--', *args, env={'HF_HOME': str(tmp_path)})
    assert one['plan']['world_size'] == 6 and one['config']['deepspeed'] is None
    bad, _ = check(*HW80, '--', *args[:2], '--accelerate_config', 'zero9', *args[2:])
    assert bad.returncode == 2 and '--accelerate_config zero9' in bad.stderr


def test_trl_docs_config_path_outside_a_checkout(tmp_path):
    # TRL's documented commands pass examples/accelerate_configs/deepspeed_zero3.yaml, a file of TRL's repository;
    # run elsewhere, it is read as the copy the installed TRL ships, and the verdict says so
    args = [
        'accelerate',
        'launch',
        '--config_file',
        'examples/accelerate_configs/deepspeed_zero3.yaml',
        'examples/scripts/grpo.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_mode',
        'colocate',
        '--vllm_max_model_length',
        '2048',
        '--dtype',
        'bfloat16',
    ]
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW80, '--', *args, cwd=tmp_path)
    out = json.loads(proc.stdout)
    assert out['plan']['world_size'] == 8 and out['config']['deepspeed'] == 'zero3'
    assert any('not found here; read as the installed TRL' in a for a in out['assumptions'])
    # a missing config of any other name is still bad input
    args[3] = 'configs/mine.yaml'
    proc = run_cli('grpo_recipes.cli.guard', 'check', *HW80, '--', *args, cwd=tmp_path)
    assert proc.returncode == 2 and 'configs/mine.yaml: no such file' in proc.stderr


def test_unknown_rollout_server_is_planned_at_its_defaults_and_never_refused():
    # TRL's multi-node docs: the trainer reaches `trl vllm-serve` on another node and its command is not given.
    # The trainer's vllm_gpu_memory_utilization (0.3, for colocate) does not apply to the server (its default is
    # 0.9); what the server might refuse at start-up with assumed settings is a warning, not a refusal.
    R1 = 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B'
    train = [
        'accelerate',
        'launch',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        '--num_processes',
        '8',
        'train.py',
        '--model_name_or_path',
        R1,
        '--use_vllm',
        '--vllm_mode',
        'server',
        '--vllm_server_host',
        '10.0.0.5',
        '--dtype',
        'bfloat16',
        '--max_completion_length',
        '1024',
        '--per_device_train_batch_size',
        '1',
    ]
    proc, out = check('--gpus', '8', '--gpu-type', 'A100-80G', '--', *train)
    assert proc.returncode == 0, [(f['rule'], f['message']) for f in out['findings'] if f['severity'] == 'error']
    f = next(f for f in out['findings'] if f['rule'] == 'vllm.kv-one-sequence')
    assert f['severity'] == 'warning' and 'settings assumed' in f['message'] and '--rollout' in f['fix']
    assert any("0.9 (the servers' default)" in a for a in out['assumptions'])
    # the same server given: its own start-up failure (one 131072-token sequence does not fit beside 61 GiB of
    # weights on one A100-80G) is a refusal
    proc, out = check(
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--rollout',
        f'CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model {R1}',
        '--',
        *train,
    )
    assert proc.returncode == 1 and 'vllm.kv-one-sequence' in rules(out)


def test_trl_zero3_weight_sync_gathers_one_parameter_at_a_time():
    # trl/generation/vllm_generation.py sync_weights: without PEFT, `with gather_if_zero3([param])` per parameter,
    # so the sync holds the largest parameter (the 152064 x 3584 embedding), not the whole model as ms-swift's
    # batched gather does; with PEFT it gathers the whole model to merge the adapters
    args = [
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        'train.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
        '--use_vllm',
        '--vllm_mode',
        'colocate',
        '--dtype',
        'bfloat16',
        '--vllm_max_model_length',
        '2048',
    ]
    _, full = check('--gpus', '4', '--gpu-type', 'A100-80G', '--', *args)
    gib = full['memory'][0]['components']['zero3_sync_gather']
    assert abs(gib - 152064 * 3584 * 2 / 2**30) < 0.02, gib
    _, lora = check('--gpus', '4', '--gpu-type', 'A100-80G', '--', *args, '--use_peft')
    assert lora['memory'][0]['components']['zero3_sync_gather'] > 10 * gib  # the whole base model
