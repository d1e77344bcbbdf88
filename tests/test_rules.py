"""The guard's rules on the reported failure cases, each with its fix (pure; no ms-swift import)."""

import pytest
from helpers import make, rules_of

from grpo_recipes.hardware import Hardware


def test_base_config_is_clean():
    _, report = make()
    assert report.ok, [f.message for f in report.findings]


def test_two_visible_gpus_nproc_unset_32b_int4():
    # Reported: 32B int4 on 2×A100-40G; one process saw both GPUs and wrapped the model across them.
    over = {'model': 'Qwen/Qwen2.5-32B-Instruct-GPTQ-Int4', 'per_device_train_batch_size': 4, 'num_generations': 4}
    # device rules only; memory: tests/test_memory.py
    _, report = make(over, env={'CUDA_VISIBLE_DEVICES': '0,1'}, hw=Hardware(gpus=2))
    assert 'device.single-process-multi-gpu' in rules_of(report)
    finding = next(f for f in report.findings if f.rule == 'device.single-process-multi-gpu')
    assert 'NPROC_PER_NODE: 2' in finding.fix and 'device_map' in finding.message
    _, fixed = make(
        over, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}, hw=Hardware(gpus=2)
    )  # device rules only; memory: tests/test_memory.py
    assert fixed.ok, [f.message for f in fixed.findings if f.severity == 'error']


def test_visible_more_than_nproc_enters_device_map():
    _, report = make(env={'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'NPROC_PER_NODE': 2})
    f = next(f for f in report.findings if f.rule == 'device.visible-vs-nproc')
    assert 'CUDA_VISIBLE_DEVICES: "0,1"' in f.fix


def test_uneven_visible_quotes_swift_assert():
    _, report = make(env={'CUDA_VISIBLE_DEVICES': '0,1,2', 'NPROC_PER_NODE': 2})
    f = next(f for f in report.findings if f.rule == 'device.visible-vs-nproc')
    assert 'n_gpu: 3, local_world_size: 2' in f.message


SERVER = {'vllm_mode': 'server', 'vllm_server_host': ['127.0.0.1'], 'vllm_server_port': [8000]}


def test_rollout_gpu_overlapping_training():
    _, report = make(
        SERVER, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}, hw=Hardware(gpus=3, rollout_gpus=(1,))
    )
    f = next(f for f in report.findings if f.rule == 'device.rollout-overlap')
    assert '1' in f.message and 'CUDA_VISIBLE_DEVICES: "0"' in f.fix
    _, fixed = make(
        SERVER, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}, hw=Hardware(gpus=3, rollout_gpus=(2,))
    )
    assert fixed.ok


def test_rollout_server_at_another_address_runs_on_another_machine():
    # ms-swift's multi_node/Qwen2_5_32B_full.sh: `swift rollout` on CUDA_VISIBLE_DEVICES=0,1 of a second node,
    # reached by its address; the trainer uses 0-7 of its own node
    env = {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}
    _, here = make(SERVER, env=env, hw=Hardware(gpus=2, rollout_gpus=(0, 1)))
    assert 'device.rollout-overlap' in rules_of(here)
    _, there = make({**SERVER, 'vllm_server_host': ['10.0.0.2']}, env=env, hw=Hardware(gpus=2, rollout_gpus=(0, 1)))
    assert not {'device.rollout-overlap', 'device.total'} & rules_of(there), rules_of(there)
    assert any('vllm_server_host 10.0.0.2 is not this machine' in a for a in there.assumptions)
    assert there.plan.rollout_remote
    # the server's own GPU count is still its start-up check
    _, short = make(
        {**SERVER, 'vllm_server_host': ['10.0.0.2'], 'vllm_tensor_parallel_size': 4},
        env=env,
        hw=Hardware(gpus=2, rollout_gpus=(0, 1)),
    )
    assert 'device.rollout-count' in rules_of(short)


@pytest.mark.parametrize('gpus, rollout', [(6, (5,)), (5, (1,))])
def test_non_contiguous_training_ids_pass(gpus, rollout):
    _, report = make(
        SERVER,
        env={'CUDA_VISIBLE_DEVICES': '0,2,3,4', 'NPROC_PER_NODE': 4},
        hw=Hardware(gpus=gpus, rollout_gpus=rollout),
    )
    assert report.ok, [f.message for f in report.findings if f.severity == 'error']
    assert [p['gpu'] for p in report.plan.processes] == [0, 2, 3, 4]


def test_rollout_gpu_that_does_not_exist():
    _, report = make(
        SERVER, env={'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'NPROC_PER_NODE': 4}, hw=Hardware(gpus=4, rollout_gpus=(4,))
    )
    assert 'device.total' in rules_of(report)


def test_too_few_gpus_for_rollout_tp():
    over = {**SERVER, 'vllm_tensor_parallel_size': 2}
    _, report = make(
        over, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}, hw=Hardware(gpus=3, rollout_gpus=(2,))
    )
    f = next(f for f in report.findings if f.rule == 'device.rollout-count')
    assert 'local_device_count (1) must be greater than or equal to' in f.message
    _, fixed = make(
        over, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}, hw=Hardware(gpus=4, rollout_gpus=(2, 3))
    )
    assert fixed.ok


def test_indivisible_num_generations_lists_valid_values():
    _, report = make({'num_generations': 7})
    f = next(f for f in report.findings if f.rule == 'batch.num-generations-divides')
    assert f.message == (
        'generation_batch_size (8) must be evenly divisible by num_generations (7). Valid values: [2, 4, 8].'
    )


def test_a_batch_of_one_completion_is_fixed_by_the_batch_alone():
    # generation_batch_size 1: no num_generations >= 2 divides it, so the fix names the micro-batch only (not an
    # empty list of valid values)
    _, report = make(
        {'per_device_train_batch_size': 1, 'gradient_accumulation_steps': 1},
        env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1},
    )
    f = next(f for f in report.findings if f.rule == 'batch.num-generations-divides')
    assert 'Valid values: [].' in f.message and f.fix == 'per_device_train_batch_size: 8'


def test_prompt_plus_completion_over_vllm_len_caps_completions():
    # ms-swift's set_default_max_tokens caps max_tokens at max_model_len - prompt (a logged warning, not a
    # failure): the guard warns and says by how much, and keeps the launch.
    _, report = make({'max_length': 1536, 'max_completion_length': 1024, 'vllm_max_model_len': 2048})
    f = next(f for f in report.findings if f.rule == 'length.completion-capped')
    assert f.severity == 'warning' and report.ok
    assert 'longer than 1024 tokens gets its completion capped at 2048 - prompt tokens' in f.message
    assert f.fix.startswith('max_length: 1024') and 'vllm_max_model_len: 2560' in f.fix
    _, fixed = make({'max_length': 1536, 'max_completion_length': 1024, 'vllm_max_model_len': 2560})
    assert 'length.completion-capped' not in rules_of(fixed, 'warning')


def test_prompt_filling_the_vllm_context_is_an_error_only_when_the_data_has_one():
    # A prompt of max_model_len tokens stops the rollout ("Input length ... leaves no room for generation").
    over = {'max_length': 4096, 'max_completion_length': 1024, 'vllm_max_model_len': 2048}
    _, unknown_data = make(over)
    assert unknown_data.ok and 'length.completion-capped' in rules_of(unknown_data, 'warning')
    stats = {'max': 3000, 'count': 100, 'percentiles': {}, 'histogram': {'edges': [0, 3001], 'counts': [100]}}
    _, long_data = make(over, data_stats=stats)
    f = next(f for f in long_data.findings if f.rule == 'length.prompt-fills-context')
    assert f.severity == 'error' and 'leaves no room for generation' in f.message


def test_tp_not_dividing_heads():
    over = {'vllm_tensor_parallel_size': 8}
    _, report = make(over, env={'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8})
    f = next(f for f in report.findings if f.rule == 'vllm.tp-heads')
    assert 'Total number of attention heads (28) must be divisible by tensor parallel size (8).' in f.message
    _, fixed = make(
        {'vllm_tensor_parallel_size': 4}, env={'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8}
    )
    assert fixed.ok


def test_vllm_len_over_model_context():
    _, report = make({'vllm_max_model_len': 40000, 'max_length': 4096})
    assert 'length.vllm-exceeds-model' in rules_of(report)


def test_unset_vllm_len_warns_with_cost():
    _, report = make(drop=('vllm_max_model_len',))
    f = next(f for f in report.findings if f.rule == 'length.vllm-unset')
    assert '32768' in f.message and 'GiB' in f.message and f.fix == 'vllm_max_model_len: 1536'


def test_unset_vllm_len_counts_the_kv_cache_as_the_vllm_model_does():
    """One owner of KV bytes per token (memory.vllm.vllm_kv_bytes_per_token): an fp8 cache holds half, and each of
    TP ranks holds 1/TP of a token's KV (deliberately new: the rule used to count 16-bit on one GPU)."""

    def per_token(over, env=None):
        _, report = make(over, drop=('vllm_max_model_len',), env=env)
        f = next(f for f in report.findings if f.rule == 'length.vllm-unset')
        return int(f.message.split(' KiB/token')[0].rsplit(' at ', 1)[1])

    full = per_token({})
    assert per_token({'vllm_engine_kwargs': '{"kv_cache_dtype": "fp8"}'}) == full // 2
    assert (
        per_token({'vllm_tensor_parallel_size': 2}, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2})
        == full // 2
    )


def test_colocate_tp_must_divide_world():
    _, report = make({'vllm_tensor_parallel_size': 4}, env={'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2})
    assert 'vllm.colocate-tp' in rules_of(report)


def test_multi_node_needs_rank_and_master():
    env = {'NNODES': 2, 'NPROC_PER_NODE': 4, 'CUDA_VISIBLE_DEVICES': '0,1,2,3'}
    _, report = make(env=env)
    assert 'launch.multi-node' in rules_of(report)
    _, fixed = make(env={**env, 'NODE_RANK': 1, 'MASTER_ADDR': '10.0.0.1'})
    assert fixed.ok
    assert fixed.plan.world_size == 8 and [p['rank'] for p in fixed.plan.processes] == [4, 5, 6, 7]


def test_server_ports_one_per_host():
    _, report = make(
        {**SERVER, 'vllm_server_host': ['10.0.0.2', '10.0.0.3']}, env={'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1}
    )
    assert 'server.ports' in rules_of(report)


@pytest.mark.parametrize(
    'over, rule',
    [
        ({'truncation_strategy': 'right'}, 'length.truncation'),
        ({'ref_model': 'Qwen/Qwen2.5-7B-Instruct'}, 'tuner.ref-model'),
        ({'async_generate': True}, 'vllm.async-generate'),
        ({'ds3_gather_for_generation': False}, 'vllm.ds3-gather'),
        ({'reward_funcs': ['acuracy']}, 'reward.unknown'),
        ({**SERVER, 'quant_method': 'bnb', 'quant_bits': 4}, 'quant.qlora-server'),
        ({'vllm_gpu_memory_utilization': 1.5}, 'vllm.utilization'),
    ],
)
def test_known_problem_rules(over, rule):
    _, report = make(over)
    assert rule in rules_of(report)


def test_colocate_only_options_warn_in_server_mode():
    _, report = make({**SERVER, 'sleep_level': 1, 'offload_model': True})
    assert {'vllm.colocate-only'} <= rules_of(report, 'warning')


def test_use_vllm_without_mode():
    _, report = make(drop=('vllm_mode',))
    f = next(f for f in report.findings if f.rule == 'vllm.mode')
    assert f.message == 'vllm_mode is required when use_vllm is true'


@pytest.mark.parametrize(
    'packages, rule',
    [
        ({'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': None, 'msgspec': '0.22'}, 'reward.math-verify'),
        ({'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9', 'msgspec': None}, 'version.msgspec'),
        ({'ms-swift': '4.6.0', 'trl': '0.24.0', 'math-verify': '0.9', 'msgspec': '0.22'}, 'version.trl'),
        ({'ms-swift': '3.12.3', 'trl': '0.24.0', 'math-verify': '0.9', 'msgspec': '0.22'}, 'known.zero3-sync-3.12'),
    ],
)
def test_version_rules(packages, rule):
    _, report = make({'reward_funcs': ['accuracy'], 'deepspeed': 'zero3'}, packages=packages)
    assert rule in rules_of(report)


def test_accuracy_needs_solution_column(tmp_path):
    data = tmp_path / 'd.jsonl'
    data.write_text('{"question": "1+1?", "answer": "2"}\n')
    _, report = make({'reward_funcs': ['accuracy'], 'dataset': [str(data)]})
    assert 'reward.solution-column' in rules_of(report)
    _, fixed = make({'reward_funcs': ['accuracy'], 'dataset': [str(data)], 'columns': {'answer': 'solution'}})
    assert 'reward.solution-column' not in rules_of(fixed)


def test_plan_batch_arithmetic():
    _, report = make(
        {'per_device_train_batch_size': 4, 'gradient_accumulation_steps': 4, 'num_generations': 8},
        env={'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'NPROC_PER_NODE': 4},
    )
    p = report.plan
    assert (p.world_size, p.optimizer_batch, p.generation_batch, p.steps_per_generation) == (4, 64, 64, 4)
    assert p.prompts_per_rollout == 8 and p.prompts_per_optimizer_step == 8


def test_data_stats_drive_length_findings_and_memory(tmp_path):
    import json

    from conftest import ROOT

    from data_tools.pipeline import run_stats
    from data_tools.tokenize import ChatTokenizer
    from grpo_recipes.check import check_launch

    st, lengths = run_stats(ROOT / 'data_tools' / 'sample' / 'gsm8k_train_300.jsonl', ChatTokenizer(None))
    stats = json.loads(json.dumps(st.to_dict()))  # what `grpo-data stats --json` writes
    launch, plain = make({'max_length': 4096, 'vllm_max_model_len': 8192}, hw=Hardware(gpus=1, gpu_type='A100-80G'))
    aware = check_launch(launch, Hardware(gpus=1, gpu_type='A100-80G'), packages=plain_packages(), data_stats=stats)
    assert aware.memory[0].components['activations'] < plain.memory[0].components['activations']
    assert 'length.data-vllm-len' in rules_of(aware, 'info')
    launch, _ = make({'max_length': 100}, hw=Hardware(gpus=1, gpu_type='A100-80G'))
    short = check_launch(launch, Hardware(gpus=1, gpu_type='A100-80G'), packages=plain_packages(), data_stats=stats)
    f = next(f for f in short.findings if f.rule == 'length.data-over-max-length')
    import re

    exact = sum(1 for n in lengths if n > 100)
    reported = int(re.search(r'up to ([\d,]+) of 300', f.message).group(1).replace(',', ''))
    edges, counts = stats['histogram']['edges'], stats['histogram']['counts']
    straddling = sum(c for lo, hi, c in zip(edges, edges[1:], counts) if lo <= 100 < hi)
    assert exact <= reported <= exact + straddling  # exact but for the one histogram bin that holds 100
    assert f.severity == 'warning' and 'grpo-data filter' in f.fix


def plain_packages():
    from helpers import PACKAGES_OK

    return PACKAGES_OK


@pytest.mark.parametrize(
    'over, rollout_argv, severity',
    [
        ({}, None, 'error'),  # colocate, no reward at all
        ({'teacher_model': 'Qwen/Qwen2.5-7B-Instruct'}, None, None),  # OPD-RL: the teacher is the signal
        ({'use_gym_env': True}, None, None),  # the trainer says its rewards come from a gym
        ({**SERVER}, None, 'warning'),  # server mode, server unknown: it may run a gym
        ({**SERVER}, ['--model', 'm', '--use_gym_env', 'true'], None),  # ms-swift's external/vllm_gym.sh
        ({**SERVER}, ['--model', 'm', '--use_gym_env', 'false'], 'error'),
        ({**SERVER, 'use_gym_env': False}, ['--model', 'm', '--use_gym_env', 'true'], 'error'),  # the trainer's wins
    ],
)
def test_no_reward_function(over, rollout_argv, severity):
    # grpo_trainer.py: `if not self.reward_funcs and not self.use_gym_env and not self._has_teacher: raise
    # ValueError('You must specify reward_funcs or reward_model')`; in server mode use_gym_env is the rollout
    # server's unless the trainer sets it (rollout_mixin.py)
    from dataclasses import replace as _replace

    from helpers import BASE, PACKAGES_OK

    from grpo_recipes.check import check_launch
    from grpo_recipes.frontends.swift.reader import launch_from_mapping, read_rollout

    cfg = {
        **{k: v for k, v in BASE.items() if k != 'reward_funcs'},
        **over,
        'ENV': {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 1 if 'vllm_server_host' in over else 2},
    }
    launch = launch_from_mapping(cfg, [], environ={}, source='test.yaml')
    if rollout_argv is not None:
        launch = _replace(launch, rollout=read_rollout(rollout_argv, {'CUDA_VISIBLE_DEVICES': '1'}, 'test'))
    report = check_launch(launch, Hardware(gpus=2, gpu_type='A100-80G', source='flags'), packages=PACKAGES_OK)
    found = [f.severity for f in report.findings if f.rule == 'reward.none']
    assert found == ([severity] if severity else []), found


def test_opd_rl_with_a_teacher_takes_one_generation():
    """ms-swift 4.6 examples/train/grpo/opd_rl.sh shape: --teacher_model with --num_generations 1 is OPD-RL, which
    rlhf_args.py::_check_teacher accepts (the 'greater than 1' check runs only without a teacher)."""
    from grpo_recipes.check import check_launch
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.hardware import Hardware

    base = [
        'swift',
        'rlhf',
        '--rlhf_type',
        'grpo',
        '--model',
        'Qwen/Qwen2.5-7B-Instruct',
        '--tuner_type',
        'lora',
        '--dataset',
        'AI-MO/NuminaMath-TIR',
        '--num_generations',
        '1',
        '--per_device_train_batch_size',
        '2',
    ]
    hw = Hardware(gpus=4, gpu_type='A100-80G', source='flags')
    with_teacher = check_launch(read_launch(base + ['--teacher_model', 'Qwen/Qwen2.5-14B-Instruct'], environ={}), hw)
    alone = check_launch(read_launch(base + ['--reward_funcs', 'accuracy'], environ={}), hw)
    assert 'batch.num-generations' not in {f.rule for f in with_teacher.findings}
    assert 'batch.num-generations' in {f.rule for f in alone.findings}


@pytest.mark.parametrize(
    'card, over, fires',
    [
        ('V100-32G', {}, True),  # the bundled Qwen2.5-7B config is bfloat16: ms-swift hands vLLM bfloat16
        ('T4', {}, True),
        ('V100-16G', {'torch_dtype': 'float16'}, False),  # the fix
        ('A100-80G', {}, False),
        ('L4', {}, False),  # Ada, 8.9
        ('V100-32G', {'use_vllm': False}, False),  # training alone runs there (torch emulates bfloat16)
    ],
)
def test_vllm_refuses_bfloat16_below_ampere(card, over, fires):
    """vllm/v1/worker/gpu_worker.py _check_if_gpu_supports_dtype: "Bfloat16 is only supported on GPUs with compute
    capability of at least 8.0", at engine start; ms-swift passes the model's torch_dtype as vLLM's dtype."""
    _, report = make(over, hw=Hardware(gpus=8, gpu_type=card, source='flags'))
    assert ('vllm.bf16-card' in rules_of(report)) is fires
    if fires:
        f = next(f for f in report.findings if f.rule == 'vllm.bf16-card')
        assert 'torch_dtype: float16' in f.fix and '7.' in f.message
