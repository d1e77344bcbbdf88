"""Megatron-SWIFT GRPO (`megatron rlhf --rlhf_type grpo`): the reader, the plan, every rule id, and the memory model's
behaviour. Launch shapes follow ms-swift's examples/megatron/grpo/dense_colocate.sh and moe_colocate_full.sh
(written here as our own variants)."""

import json

import pytest

from grpo_recipes.errors import GuardError, InvalidLaunch
from grpo_recipes.findings import ERROR, RULE_IDS
from grpo_recipes.frontends import megatron as mg
from grpo_recipes.hardware import Hardware
from grpo_recipes.models import load_model_config

A100_80 = Hardware(gpus=8, gpu_type='A100-80G', source='flags')
QWEN7 = 'Qwen/Qwen2.5-7B-Instruct'
QWEN32 = 'deepseek-ai/DeepSeek-R1-Distill-Qwen-32B'
ENV8 = {'NPROC_PER_NODE': '8', 'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7'}

# the shape of examples/megatron/grpo/dense_colocate.sh (its header works the batch out in a comment), on a text
# model we bundle: 8 ranks, TP 1, global 128 completions, micro 4, 4 steps per generation, 8 generations
DENSE = [
    'megatron',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    QWEN7,
    '--tensor_model_parallel_size',
    '1',
    '--global_batch_size',
    '128',
    '--micro_batch_size',
    '4',
    '--steps_per_generation',
    '4',
    '--num_generations',
    '8',
    '--reward_funcs',
    'accuracy',
    'format',
    '--use_vllm',
    'true',
    '--vllm_mode',
    'colocate',
    '--vllm_gpu_memory_utilization',
    '0.5',
    '--vllm_max_model_len',
    '10240',
    '--max_length',
    '8192',
    '--max_completion_length',
    '2048',
    '--tuner_type',
    'full',
    '--beta',
    '0.001',
    '--sleep_level',
    '2',
    '--offload_model',
    'true',
    '--offload_optimizer',
    'true',
    '--recompute_granularity',
    'selective',
    '--padding_free',
    'true',
]


# the flags with which DENSE fits with the data's 512-token prompts (test_the_example_shape_is_clean)
CLEAN = ('--tensor_model_parallel_size', '2', '--sequence_parallel', 'true', '--micro_batch_size', '2')
# the same launch with nothing bounding the prompts (no max_length, no vllm_max_model_len), as ms-swift's
# examples/megatron/grpo/real.sh leaves them: planned at the model context
UNBOUNDED = [
    a
    for i, a in enumerate(DENSE)
    if a not in ('--max_length', '--vllm_max_model_len')
    and DENSE[i - 1] not in ('--max_length', '--vllm_max_model_len')
]


def launch(*extra, env=None, base=DENSE, release=None):
    return mg.read([*base, *extra], env=ENV8 if env is None else env, release=release)


def run(*extra, env=None, hw=A100_80, base=DENSE, model='bundled', prompt_len=None):
    la = launch(*extra, env=env, base=base)
    cfg = load_model_config(la.args['model']) if model == 'bundled' else model
    return mg.check(la, hw, model=cfg, prompt_len=prompt_len)


def ids(result):
    return {f.rule for f in result[0]}


# ---- reader ----


def test_flags_parse_as_hf_argparser_does():
    la = launch(
        '--no_save_optim',
        '--finetune',
        '--micro_batch',
        '2',
        '--recompute-granularity',
        'full',
        '--no_gradient_accumulation_fusion',
    )
    a = la.args
    assert a['no_save_optim'] is True and a['finetune'] is True  # a bare bool flag is true
    assert a['micro_batch_size'] == 2 and la.abbreviated == [('--micro_batch', '--micro_batch_size')]
    assert a['recompute_granularity'] == 'full'  # the dash spelling
    assert a['gradient_accumulation_fusion'] is False  # the --no_ complement of a default-true bool
    assert a['reward_funcs'] == ['accuracy', 'format'] and a['sleep_level'] == 2
    assert a['steps_per_generation'] == 4 and a['global_batch_size'] == 128
    assert la.world_size == 8 and la.unknown == [] and la.renamed == []


def test_defaults_come_from_the_release_snapshot():
    a = mg.read(['megatron', 'rlhf', '--rlhf_type', 'grpo'], env={}).args
    assert a['vllm_mode'] is None and a['steps_per_generation'] is None and a['micro_batch_size'] == 1
    assert a['global_batch_size'] == 16 and a['recompute_granularity'] == 'selective'
    assert a['use_distributed_optimizer'] is True and a['vllm_gpu_memory_utilization'] == 0.9


def test_yaml_config_with_env_block(tmp_path):
    cfg = tmp_path / 'grpo.yaml'
    cfg.write_text(
        'ENV:\n  NPROC_PER_NODE: 4\n  NNODES: 2\n  MASTER_PORT: 29600\nrlhf_type: grpo\n'
        f'model: {QWEN7}\nreward_funcs: [accuracy, format]\nmicro_batch_size: 2\n'
        'vllm_engine_kwargs: {"max_num_batched_tokens": 8192}\n'
    )
    la = mg.read(['megatron', 'rlhf', str(cfg), '--global_batch_size', '64'], env={'NNODES': '1'})
    assert la.config_file == str(cfg)
    assert la.nproc_per_node == 4 and la.nnodes == 1  # the environment wins over the file's ENV block
    assert la.args['reward_funcs'] == ['accuracy', 'format'] and la.args['micro_batch_size'] == 2
    assert la.args['global_batch_size'] == 64
    assert json.loads(la.args['vllm_engine_kwargs']) == {'max_num_batched_tokens': 8192}


def test_json_config(tmp_path):
    cfg = tmp_path / 'grpo.json'
    cfg.write_text(json.dumps({'rlhf_type': 'grpo', 'tensor_model_parallel_size': 2, 'sequence_parallel': True}))
    la = mg.read([str(cfg)], env={'NPROC_PER_NODE': '2'})
    assert la.args['tensor_model_parallel_size'] == 2 and la.args['sequence_parallel'] is True


@pytest.mark.parametrize(
    'text, words',
    [
        ('rlhf_type: [grpo\n', 'not valid YAML'),
        ('- a\n- b\n', 'mapping'),
        ('ENV: 3\nrlhf_type: grpo\n', 'ENV must be a mapping'),
    ],
)
def test_bad_config_is_one_guard_error_line(tmp_path, text, words):
    cfg = tmp_path / 'bad.yaml'
    cfg.write_text(text)
    with pytest.raises(GuardError) as e:
        mg.read(['megatron', 'rlhf', str(cfg)], env={})
    assert words in str(e.value) and '\n' not in str(e.value)


def test_missing_config_and_bad_env():
    with pytest.raises(GuardError, match='no such config file'):
        mg.read(['megatron', 'rlhf', '/nonexistent/grpo.yaml'], env={})
    with pytest.raises(GuardError, match='NPROC_PER_NODE'):
        mg.read(['megatron', 'rlhf', '--rlhf_type', 'grpo'], env={'NPROC_PER_NODE': 'eight'})
    with pytest.raises(GuardError, match='NNODES'):
        mg.read(['megatron', 'rlhf', '--rlhf_type', 'grpo'], env={'NNODES': '0'})
    with pytest.raises(GuardError, match='megatron rlhf'):
        mg.read(['megatron', 'sft', '--model', QWEN7], env={})


def test_invalid_values_are_the_parsers_errors():
    with pytest.raises(InvalidLaunch, match="invalid choice: 'collocate'"):
        launch('--vllm_mode', 'collocate')
    with pytest.raises(InvalidLaunch, match='Truthy value expected'):
        launch('--offload_model', 'maybe')
    with pytest.raises(InvalidLaunch, match="invalid int value: '2.5'"):
        launch('--micro_batch_size', '2.5')
    with pytest.raises(InvalidLaunch, match='ambiguous option: --vllm_server could match'):
        launch('--vllm_server', 'x')  # argparse: a prefix of vllm_server_host, vllm_server_port, ...
    assert launch('--save', 'out').renamed[0]['fix'] == '--output_dir out'  # 3.x's --save, not a prefix


def test_3x_names_become_4x_fixes():
    la = launch('--max_epochs', '1', '--train_type', 'full', '--load_safetensors', 'true', '--eval_interval', '500')
    by = {r['old']: r for r in la.renamed}
    assert by['--max_epochs']['fix'] == '--num_train_epochs 1'
    assert by['--train_type']['fix'] == '--tuner_type full'
    assert by['--eval_interval']['fix'] == '--eval_steps 500'
    assert 'remove --load_safetensors' in by['--load_safetensors']['fix']
    assert la.args['num_train_epochs'] == 1 and la.args['eval_steps'] == 500 and la.unknown == []
    findings = [f for f in mg.check(la, A100_80)[0] if f.rule == 'megatron.renamed-args']
    assert len(findings) == 4 and all(f.severity == 'error' for f in findings)


def test_a_3x_release_keeps_its_own_names():
    i = DENSE.index('--tuner_type')
    la = launch('--max_epochs', '1', '--train_type', 'full', release='3.12.6', base=DENSE[:i] + DENSE[i + 2 :])
    assert la.snapshot == '3.12.6' and la.renamed == [] and la.unknown == []
    assert la.args['max_epochs'] == 1 and la.args['train_type'] == 'full'
    # 4.x's name is unknown to 3.12
    la = launch('--num_train_epochs', '1', release='3.12.6', base=DENSE[:i] + DENSE[i + 2 :])
    assert la.unknown == ['--num_train_epochs', '1']


def test_a_release_without_its_own_snapshot_says_which_one_read_it():
    la = launch(release='4.4.1')
    assert la.snapshot == '4.3.2' and '4.3.2' in la.snapshot_note
    assert 'megatron.snapshot' in ids(mg.check(la, A100_80))
    with pytest.raises(GuardError, match='3.11'):
        launch(release='3.9.0')


# ---- plan ----


def test_plan_of_the_dense_colocate_example():
    _, plan, _ = run()
    assert plan['parallel'] == {'tp': 1, 'pp': 1, 'cp': 1, 'ep': 1, 'etp': 1, 'dp': 8, 'vpp': None}
    # the example's own header: generation_batch 128 * 4 = 512, 64 prompts per rollout, 16 per optimizer step
    assert plan['generation_batch'] == 512 and plan['steps_per_generation'] == 4
    assert plan['prompts_per_rollout'] == 64 and plan['prompts_per_optimizer_step'] == 16
    assert plan['num_microbatches'] == 128 // (4 * 8)
    assert plan['prompts_per_rollout_per_dp_rank'] == 8
    assert plan['per_device_generation_batch'] == 64 and plan['vllm_max_num_seqs'] == 64  # x vllm TP 1


def test_plan_moe_layout_ep_does_not_reduce_dp():
    la = launch(
        '--tensor_model_parallel_size',
        '4',
        '--pipeline_model_parallel_size',
        '2',
        '--expert_model_parallel_size',
        '4',
        '--global_batch_size',
        '8',
        '--micro_batch_size',
        '1',
        '--steps_per_generation',
        '1',
        '--vllm_tensor_parallel_size',
        '8',
    )
    plan = mg.check(la, A100_80)[1]
    assert plan['parallel']['dp'] == 1 and plan['expert_dp'] == 1 and plan['num_microbatches'] == 8
    assert plan['generation_batch'] == 8 and plan['prompts_per_rollout'] == 1
    assert plan['vllm_engines'] == 1 and plan['vllm_max_num_seqs'] == 8  # (8 // 8) x vllm TP 8


def test_steps_per_generation_defaults_to_one():
    la = mg.read(
        [a for a in DENSE if a not in ('--steps_per_generation',)][:0]
        + ['megatron', 'rlhf', '--rlhf_type', 'grpo', '--global_batch_size', '32', '--num_generations', '8'],
        env={'NPROC_PER_NODE': '4'},
    )
    plan = mg.check(la, A100_80, model=load_model_config(QWEN7))[1]
    assert plan['steps_per_generation'] == 1 and plan['generation_batch'] == 32
    la = mg.read(
        ['megatron', 'rlhf', '--rlhf_type', 'grpo', '--global_batch_size', '32', '--generation_batch_size', '96'],
        env={'NPROC_PER_NODE': '4'},
    )
    assert mg.check(la, A100_80, model=load_model_config(QWEN7))[1]['steps_per_generation'] == 3


# ---- rules: every id, from a launch that makes it ----

LLAMA_SHAPE = {
    'model_type': 'llama',
    'hidden_size': 4096,
    'num_attention_heads': 32,
    'num_key_value_heads': 8,
    'num_hidden_layers': 30,
    'intermediate_size': 11008,
    'vocab_size': 32000,
    'max_position_embeddings': 4096,
    'torch_dtype': 'bfloat16',
}
MOE_SHAPE = {
    **LLAMA_SHAPE,
    'model_type': 'qwen3_moe',
    'num_experts': 6,
    'num_experts_per_tok': 2,
    'moe_intermediate_size': 768,
    'num_hidden_layers': 32,
}

# the dense shape as ms-swift 3.12 reads it (3.x names: `--tuner_type` is 4.x's; 3.12's default train_type is full)
AT_3X = {
    'base': DENSE[: DENSE.index('--tuner_type')] + DENSE[DENSE.index('--tuner_type') + 2 :],
    'release': '3.12.6',
}

CASES = {
    'megatron.rlhf-type': lambda: run('--rlhf_type', 'dpo'),
    'megatron.unknown-args': lambda: run('--vllm_gpu_memory_utilisation', '0.5'),
    'megatron.renamed-args': lambda: run('--max_epochs', '1'),
    'megatron.abbreviated-args': lambda: run('--micro_batch', '4'),
    'megatron.snapshot': lambda: mg.check(launch(release='4.4.0'), A100_80),
    'megatron.not-supported': lambda: run('--num_iterations', '2'),
    'megatron.vllm-required': lambda: run('--use_vllm', 'false'),
    'megatron.vllm-mode-unset': lambda: run(base=[a for a in DENSE if a not in ('--vllm_mode', 'colocate')]),
    'megatron.vllm-tp-world': lambda: run('--vllm_tensor_parallel_size', '3'),
    'megatron.reward-funcs': lambda: run(base=[a for a in DENSE if a not in ('--reward_funcs', 'accuracy', 'format')]),
    'megatron.server-address': lambda: run('--vllm_mode', 'server'),
    'megatron.world-divisible': lambda: run('--tensor_model_parallel_size', '3'),
    'megatron.expert-world-divisible': lambda: run('--expert_model_parallel_size', '3', model=MOE_SHAPE),
    'megatron.gpus': lambda: run(env={'NPROC_PER_NODE': '16'}),
    'megatron.generation-batch': lambda: run('--generation_batch_size', '100'),
    'megatron.dp-alignment': lambda: run(
        '--global_batch_size', '64', '--steps_per_generation', '1', '--micro_batch_size', '1', '--num_generations', '16'
    ),
    'megatron.num-microbatches': lambda: run(
        '--global_batch_size', '64', '--steps_per_generation', '3', '--num_generations', '8', '--micro_batch_size', '3'
    ),
    'megatron.recompute': lambda: run('--recompute_method', 'uniform'),
    'megatron.sequence-parallel-off': lambda: run('--sequence_parallel', 'true'),
    'megatron.tp-comm-overlap': lambda: run('--tp_comm_overlap', 'true', '--tensor_model_parallel_size', '2'),
    'megatron.pp-layers': lambda: run('--decoder_first_pipeline_num_layers', '10'),
    'megatron.group-by-length': lambda: run('--group_by_length', 'true'),
    'megatron.ep-tp-sequence-parallel': lambda: run(
        '--expert_model_parallel_size', '2', '--tensor_model_parallel_size', '2', model=MOE_SHAPE
    ),
    'megatron.vpp-beta': lambda: run(
        '--pipeline_model_parallel_size',
        '2',
        '--virtual_pipeline_model_parallel_size',
        '2',
        '--global_batch_size',
        '64',
    ),
    'megatron.ref-model': lambda: run('--beta', '0'),
    'megatron.tuner-switched': lambda: run('--adapters', 'output/checkpoint-100'),
    'megatron.heads-tp': lambda: run(
        '--tensor_model_parallel_size',
        '8',
        '--global_batch_size',
        '16',
        '--steps_per_generation',
        '8',
        '--micro_batch_size',
        '1',
    ),
    'megatron.layers-pp': lambda: run(
        '--pipeline_model_parallel_size',
        '8',
        '--global_batch_size',
        '16',
        '--steps_per_generation',
        '8',
        '--micro_batch_size',
        '1',
    ),
    'megatron.experts-ep': lambda: run('--expert_model_parallel_size', '4', model=MOE_SHAPE),
    'megatron.vllm-heads': lambda: run(
        '--vllm_tensor_parallel_size', '8', model={**LLAMA_SHAPE, 'num_attention_heads': 28, 'hidden_size': 3584}
    ),
    'megatron.memory': lambda: run(base=[QWEN32 if a == QWEN7 else a for a in DENSE]),
    'megatron.oom-if-long-prompts': lambda: run(*CLEAN, base=UNBOUNDED),
    'megatron.vllm-startup-memory': lambda: run(
        '--offload_model', 'false', '--offload_optimizer', 'false', '--vllm_gpu_memory_utilization', '0.8'
    ),
    'megatron.vllm-no-kv': lambda: run('--vllm_gpu_memory_utilization', '0.1'),
    'megatron.vllm-kv-one-sequence': lambda: run(
        '--vllm_gpu_memory_utilization', '0.205', '--vllm_max_model_len', '32768'
    ),
    'megatron.vllm-kv-concurrency': lambda: run(),
    'megatron.model-unavailable': lambda: run(
        model=None, base=[a if a != QWEN7 else 'no-such/model-xyz' for a in DENSE]
    ),
    'megatron.recompute-config': lambda: run('--recompute_granularity', 'full'),
    'megatron.uneven-pp': lambda: run(
        '--pipeline_model_parallel_size', '4', '--decoder_first_pipeline_num_layers', '7', model=LLAMA_SHAPE
    ),
    'megatron.moe-config': lambda: run('--moe_pad_expert_input_to_capacity', 'true', model=MOE_SHAPE),
    'megatron.recompute-modules': lambda: run(
        '--recompute_modules', 'moe_act', '--moe_grouped_gemm', 'false', model=MOE_SHAPE
    ),
    'megatron.deepep-dispatcher': lambda: run('--moe_enable_deepep', 'true', model=MOE_SHAPE),
    'megatron.cpu-offload-precision': lambda: mg.check(launch('--optimizer_cpu_offload', 'true', **AT_3X), A100_80),
}


@pytest.mark.parametrize('rule_id', sorted(CASES))
def test_megatron_rule_id_is_emitted(rule_id):
    assert rule_id in ids(CASES[rule_id]()), [(f.rule, f.message) for f in CASES[rule_id]()[0]]


def test_every_megatron_rule_id_has_a_case():
    declared = {i for i in RULE_IDS if i.startswith('megatron.')}
    assert declared == set(CASES)


def test_the_example_shape_is_clean():
    # TP 2 with sequence parallelism, 2 completions per micro-batch, prompts of at most 512 tokens (the data's)
    result = run(
        '--tensor_model_parallel_size', '2', '--sequence_parallel', 'true', '--micro_batch_size', '2', prompt_len=512
    )
    assert [f for f in result[0] if f.severity != 'info'] == []
    assert result[2]['sequence_tokens'] == 512 + 2048 and result[2]['peak_gib'] < 80


def test_prompts_are_planned_at_their_bound():
    m = run()[2]  # max_length 8192, vllm_max_model_len 10240 - 2048: prompts of 8192, sequences of 10240
    assert (m['prompt_tokens'], m['sequence_tokens']) == (8192, 10240)
    assert 'megatron.memory' in {f.rule for f in run()[0]}


def test_memory_findings_carry_a_fix():
    f = next(f for f in run(base=[QWEN32 if a == QWEN7 else a for a in DENSE])[0] if f.rule == 'megatron.memory')
    assert f.fix and f.fix.startswith('--')
    f = next(f for f in CASES['megatron.vllm-startup-memory']()[0] if f.rule == 'megatron.vllm-startup-memory')
    assert '--vllm_gpu_memory_utilization' in f.fix and 'after the Megatron model has loaded' in f.message


def test_findings_quote_ms_swift_with_a_fix():
    f = next(f for f in run('--vllm_tensor_parallel_size', '3')[0] if f.rule == 'megatron.vllm-tp-world')
    assert 'vllm_tensor_parallel_size (3) must divide world size (8) evenly.' in f.message
    assert f.fix == '--vllm_tensor_parallel_size 2' and f.source.endswith('rollout_mixin.py')
    f = next(
        f
        for f in run(
            '--global_batch_size',
            '64',
            '--steps_per_generation',
            '1',
            '--micro_batch_size',
            '3',
            '--num_generations',
            '8',
        )[0]
        if f.rule == 'megatron.dp-alignment'
    )
    assert 'must be divisible by micro_batch_size (3)' in f.message and f.fix == '--micro_batch_size 1'
    f = next(f for f in run('--vllm_gpu_memory_utilisation', '0.5')[0] if f.rule == 'megatron.unknown-args')
    assert "remaining_argv: ['--vllm_gpu_memory_utilisation', '0.5']" in f.message
    assert '--vllm_gpu_memory_utilization' in f.fix


def test_release_specific_checks():
    no_mode = [a for a in DENSE if a not in ('--vllm_mode', 'colocate')]
    early = next(
        f for f in mg.check(launch(base=no_mode, release='4.0.4'), A100_80)[0] if f.rule == 'megatron.vllm-mode-unset'
    )
    late = next(
        f for f in mg.check(launch(base=no_mode, release='4.6.0'), A100_80)[0] if f.rule == 'megatron.vllm-mode-unset'
    )
    assert early.message.startswith('vllm_mode is required for Megatron GRPO')  # 3.12-4.0: at parsing
    assert late.message.startswith('Invalid vllm_mode: None') and 'after the Megatron model' in late.message
    both = ('--generation_batch_size', '512')  # with steps_per_generation 4: 128 x 4, consistent
    assert 'megatron.generation-batch' in ids(mg.check(launch(*both, release='4.0.4'), A100_80))
    assert 'megatron.generation-batch' not in ids(mg.check(launch(*both, release='4.6.0'), A100_80))
    shuffle = mg.check(launch('--dataset_shuffle', 'false', release='3.12.6'), A100_80)[0]
    assert any('dataset_shuffle false is not supported' in f.message for f in shuffle)


def test_layers_by_virtual_stages():
    f = [
        f
        for f in run(
            '--pipeline_model_parallel_size',
            '2',
            '--virtual_pipeline_model_parallel_size',
            '4',
            '--beta',
            '0',
            '--global_batch_size',
            '64',
        )[0]
        if f.rule == 'megatron.layers-pp'
    ]
    assert 'num_layers_per_pipeline_rank should be divisible by vp_size' in f[0].message  # 28 layers: 14 per rank
    assert f[0].fix == '--virtual_pipeline_model_parallel_size 2'


def test_unknown_args_with_ignore_args_error_warn():
    f = next(f for f in run('--bogus', '1', '--ignore_args_error', 'true')[0] if f.rule == 'megatron.unknown-args')
    assert f.severity == 'warning' and 'only logs it' in f.message


def test_nproc_beyond_visible_devices():
    f = next(f for f in run(env={'NPROC_PER_NODE': '4', 'CUDA_VISIBLE_DEVICES': '0,1'})[0] if f.rule == 'megatron.gpus')
    assert f.fix == 'NPROC_PER_NODE=2' and 'CUDA_VISIBLE_DEVICES=0,1' in f.message


def test_server_mode_addresses():
    assert 'megatron.server-address' not in ids(run('--vllm_mode', 'server', '--vllm_server_host', '127.0.0.1'))
    f = next(
        f
        for f in run('--vllm_mode', 'server', '--vllm_server_host', 'a', 'b')[0]
        if f.rule == 'megatron.server-address'
    )
    assert f.message == 'host and server_port must have same length when lists are provided'
    assert f.fix == '--vllm_server_port 8000 8001'
    m = run('--vllm_mode', 'server', '--vllm_server_host', '127.0.0.1')[2]
    assert set(m['phases']) == {'train', 'weight_sync'} and m['vllm'] == {}


def test_vpp_with_beta_zero_is_allowed():
    assert 'megatron.vpp-beta' not in ids(
        run(
            '--pipeline_model_parallel_size',
            '2',
            '--beta',
            '0',
            '--virtual_pipeline_model_parallel_size',
            '2',
            '--global_batch_size',
            '64',
        )
    )


# ---- memory ----


def mem(*extra, **kw):
    return run(*extra, **kw)[2]


def test_distributed_optimizer_splits_only_the_optimizer_states_by_dp():
    m8 = mem('--tensor_model_parallel_size', '1')
    m4 = mem('--tensor_model_parallel_size', '2')  # DP 4, weights halved by TP
    t8, t4 = m8['terms']['train'], m4['terms']['train']
    assert t4['weights'] == pytest.approx(t8['weights'] / 2, rel=0.05)
    # 12 bytes / DP of the TP shard: (N/2) x 12 / 4 against N x 12 / 8 -> the same
    assert t4['optimizer'] == pytest.approx(t8['optimizer'], rel=0.05)
    assert t8['grads'] == pytest.approx(2 * t8['weights'], rel=0.01)  # fp32 grad buffer vs bf16 weights
    assert t8['optimizer'] == pytest.approx(6 * t8['weights'] / 8, rel=0.01)  # 12/DP bytes vs 2 bytes
    no_dist = mem('--use_distributed_optimizer', 'false')['terms']['train']
    assert no_dist['optimizer'] == pytest.approx(8 * t8['optimizer'], rel=0.01)


def test_full_tuning_keeps_a_reference_model_even_with_beta_zero():
    assert mem('--beta', '0')['terms']['train']['ref_model'] > 0
    assert mem('--adapters', 'out/ckpt')['terms']['train']['ref_model'] == 0  # switched to LoRA
    lora = mem('--tuner_type', 'lora')['terms']['train']
    assert lora['ref_model'] == 0 and lora['grads'] < 0.5 and lora['optimizer'] < 0.1


def test_offload_and_sleep_shape_the_phases():
    off = mem()
    on = mem('--offload_model', 'false', '--offload_optimizer', 'false', '--vllm_gpu_memory_utilization', '0.3')
    assert 'weights' not in off['terms']['rollout'] and 'weights' in on['terms']['rollout']
    assert off['terms']['train']['vllm_asleep'] < 2  # sleep level 2: graphs and non-torch memory only
    awake = mem('--sleep_level', '0', '--vllm_gpu_memory_utilization', '0.3')['terms']['train']
    assert awake['vllm'] > 20  # no sleep: the whole reservation stays through training
    # weight sync: the trainer's whole state plus the engine's woken weights (no KV)
    sync = off['terms']['weight_sync']
    assert sync['vllm_weights'] < off['terms']['rollout']['vllm'] and sync['optimizer'] > 0


def test_recompute_and_sequence_parallel_shrink_activations():
    sel = mem('--tensor_model_parallel_size', '2')['terms']['train']['activations']
    sp = mem('--tensor_model_parallel_size', '2', '--sequence_parallel', 'true')['terms']['train']['activations']
    full = mem(
        '--tensor_model_parallel_size',
        '2',
        '--recompute_granularity',
        'full',
        '--recompute_method',
        'uniform',
        '--recompute_num_layers',
        '1',
    )['terms']['train']['activations']
    # per token per layer (megatron-core 0.19, flash attention, selective recompute): the norms' inputs and outputs
    # 8h, replicated by TP unless sequence parallelism splits them; attention's q, k, v, output and fp32 log-sum-exp
    # (4q + 4kv + 4 x heads) and the gated MLP's 8I, per TP rank. Qwen2.5-7B: h 3584, q 3584, kv 512, 28 heads,
    # I 18944
    h, q, kv, heads, inter, t = 3584, 3584, 512, 28, 18944, 2
    split = (4 * q + 4 * kv + 4 * heads + 8 * inter) / t
    assert sp / sel == pytest.approx((8 * h / t + split) / (8 * h + split), rel=0.01)
    assert full < sp


def test_vllm_startup_check_counts_what_megatron_holds():
    m = mem('--offload_model', 'false', '--offload_optimizer', 'false', '--vllm_gpu_memory_utilization', '0.8')
    assert m['vllm']['free_at_start_gib'] < 0.8 * 80
    assert any(p['check'] == 'vllm-startup' for p in m['problems'])
    assert not any(p['check'] == 'vllm-startup' for p in mem('--vllm_gpu_memory_utilization', '0.8')['problems'])


def test_no_memory_without_a_capacity():
    assert run(hw=Hardware())[2] is None


# ---- the module's own command and the adapters for check.py ----


def test_command_line_exit_codes(capsys):
    from grpo_recipes.frontends.megatron.__main__ import main

    assert (
        main(
            [
                '--gpus',
                '8',
                '--gpu-type',
                'A100-80G',
                '--prompt-len',
                '512',
                '--json',
                '--',
                'NPROC_PER_NODE=8',
                *DENSE,
                '--tensor_model_parallel_size',
                '2',
                '--sequence_parallel',
                'true',
                '--micro_batch_size',
                '2',
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out['ok'] and out['plan']['parallel']['dp'] == 4 and out['memory']['peak_gib'] < 80
    assert main(['--', 'NPROC_PER_NODE=8', *DENSE, '--max_epochs', '1']) == 1
    assert main(['--', 'NPROC_PER_NODE=eight', *DENSE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith('error: NPROC_PER_NODE=') and '\n' not in err and 'Traceback' not in err


def test_memory_as_the_guards_gpu_memory():
    m = run(
        '--tensor_model_parallel_size', '2', '--sequence_parallel', 'true', '--micro_batch_size', '2', prompt_len=512
    )[2]
    g = mg.as_gpu_memory(m)
    assert g.role == 'train+vllm' and g.phase == m['peak_phase'] and g.fits
    assert g.total_gib == pytest.approx(sum(g.components.values()), abs=0.1)


def test_a_launcher_script_through_the_shell_reader():
    """The shell reader's commands feed read() unchanged: argv from `megatron`, the prefixes as environment."""
    import pathlib

    from grpo_recipes.frontends.shell import read_script

    path = pathlib.Path(__file__).parent / 'data' / 'megatron' / 'moe_colocate_full_variant.sh'
    cmd = next(c for c in read_script(path.read_text(), {}, source=str(path)) if c.argv[:2] == ['megatron', 'rlhf'])
    la = mg.read(cmd.argv, {**cmd.env}, f'{path}:{cmd.line}')
    moe = {
        **MOE_SHAPE,
        'num_experts': 128,
        'num_experts_per_tok': 8,
        'num_hidden_layers': 48,
        'hidden_size': 2048,
        'num_key_value_heads': 4,
        'head_dim': 128,
        'vocab_size': 151936,
        'max_position_embeddings': 262144,
    }
    findings, plan, mem = mg.check(la, Hardware(gpus=8, gpu_type='H100', source='flags'), model=moe)
    assert la.world_size == 8 and la.env['PYTORCH_CUDA_ALLOC_CONF'] == 'expandable_segments:True'
    assert plan['parallel']['dp'] == 1 and plan['num_microbatches'] == 8 and plan['vllm_max_num_seqs'] == 8
    assert {f.rule for f in findings if f.severity == 'error'} == {'megatron.renamed-args'}  # --max_epochs
    assert mem['terms']['train']['optimizer'] == 0  # optimizer_cpu_offload with offload fraction 1.0
    assert 'megatron.ref-model' in {f.rule for f in findings}  # beta 0, full: the reference model still loads


def test_the_engine_starts_before_the_optimizer_exists():
    m = mem('--offload_model', 'false', '--offload_optimizer', 'false', '--vllm_gpu_memory_utilization', '0.3')
    assert 'optimizer' not in m['terms']['startup'] and 'optimizer' in m['terms']['train']
    assert 'grads' in m['terms']['startup'] and 'ref_model' in m['terms']['startup']


def test_the_32b_two_node_recipe_candidate():
    import pathlib

    path = pathlib.Path(__file__).parent / 'data' / 'megatron' / 'qwen2.5-32b-instruct-full-2x8xa100-80g-megatron.yaml'
    la = mg.read([str(path)], {})
    # Qwen2.5-32B-Instruct has the architecture of the bundled DeepSeek-R1-Distill-Qwen-32B (Qwen2, 64 layers,
    # hidden 5120, 40 heads / 8 KV heads, vocab 152064)
    findings, plan, m = mg.check(la, A100_80, model=load_model_config(QWEN32))
    assert [f for f in findings if f.severity != 'info'] == []
    assert la.world_size == 16 and plan['parallel']['dp'] == 1 and plan['vllm_engines'] == 2
    assert plan['prompts_per_rollout'] == 16 and plan['num_microbatches'] == 64
    # the train step (its activations counted from megatron-core's layers) and the weight sync are within 0.2 GiB
    assert m['peak_phase'] == 'train' and 0.5 < m['peak_gib'] / m['capacity_gib'] < 0.9
    assert abs(sum(m['terms']['train'].values()) - sum(m['terms']['weight_sync'].values())) < 0.2


def test_the_dispatchers_allocator_reading_accepts_a_megatron_launch(tmp_path):
    """frontends/__init__.py sets launch.alloc from the environment and the config's ENV block on every launch."""
    from grpo_recipes.frontends import _alloc

    cfg = tmp_path / 'grpo.yaml'
    cfg.write_text('ENV:\n  PYTORCH_CUDA_ALLOC_CONF: expandable_segments:True\nrlhf_type: grpo\n')
    la = mg.read(['megatron', 'rlhf', str(cfg)], env={})
    assert la.file_env == {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'} and la.argv == [str(cfg)]
    la.alloc = _alloc({}, {}, {}, la)
    assert la.alloc is not None


def test_pipeline_stages_first_holds_micro_batches_last_holds_logits():
    from grpo_recipes.frontends.megatron.memory import activations
    from grpo_recipes.memory.arch import Arch

    a = Arch.from_config(load_model_config(QWEN7))
    args = {'micro_batch_size': 1, 'recompute_granularity': 'selective'}
    par = {'tp': 1, 'pp': 1, 'cp': 1, 'sequence_parallel': False}
    one = activations(args, a, par, 4096, 8)
    pp4 = activations(args, a, {**par, 'pp': 4}, 4096, 8)
    # the first of 4 stages: a quarter of the layers, 4 micro-batches in flight -> the same bytes as PP 1,
    # and no logits there; with 2 micro-batches per step only 2 are ever in flight
    assert pp4['activations'] == pytest.approx(one['activations'], rel=0.01) and pp4['logits'] == 0
    pp4_short = activations(args, a, {**par, 'pp': 4}, 4096, 2)
    assert pp4_short['activations'] + pp4_short['logits'] < pp4['activations']


def test_any_token_soup_reads_or_fails_with_one_line():
    """Seeded fuzz: flags, prefixes, values and junk in any order never raise anything but GuardError."""
    import random

    rng = random.Random(29)
    pool = [
        '--micro_batch_size',
        '--micro',
        '--vllm_mode',
        '--sleep_level',
        '--reward_funcs',
        '--use_vllm',
        '--no_',
        '--',
        '-',
        '--=',
        '--tensor_model_parallel_size',
        '--max_epochs',
        '--no_use_vllm',
        '--beta',
        'colocate',
        '2',
        '-1',
        '0',
        'true',
        'maybe',
        '',
        '1e-3',
        '{"a": 1}',
        '--vllm_engine_kwargs',
        'x.yaml',
        '--save',
    ]
    for _ in range(300):
        argv = ['megatron', 'rlhf', *rng.choices(pool, k=rng.randint(0, 8))]
        if argv[2:3] == ['x.yaml']:
            argv[2] = '--beta'
        try:
            la = mg.read(argv, env={'NPROC_PER_NODE': str(rng.randint(1, 8))})
        except GuardError as e:
            assert '\n' not in str(e)
            continue
        mg.check(la, A100_80, model=LLAMA_SHAPE)


def test_server_mode_without_reward_funcs_takes_the_gym_reward_of_a_gym_rollout_server():
    """examples/megatron/grpo/multi_turn/frozen_lake_server.sh shape: no --reward_funcs on the trainer, the rollout
    server runs --use_gym_env true, and the trainer asks the server (grpo_trainer.py _resolve_use_gym_env): no error.
    The server unknown: a warning; a server known to run no gym: the trainer's assertion, an error."""
    from grpo_recipes.findings import ERROR, WARNING
    from grpo_recipes.launch import Rollout

    base = [a for a in DENSE if a not in ('--reward_funcs', 'accuracy', 'format')]
    server = ['--vllm_mode', 'server', '--vllm_server_host', '127.0.0.1', '--vllm_server_port', '8000']

    def severity(rollout):
        la = launch(*server, base=base)
        la.rollout = rollout
        got = [f for f in mg.check(la, A100_80, model=load_model_config(QWEN7))[0] if f.rule == 'megatron.reward-funcs']
        return got[0].severity if got else None

    gym = Rollout(framework='swift', argv=[], env={}, source='run.sh:2', use_gym_env=True)
    plain = Rollout(framework='swift', argv=[], env={}, source='run.sh:2')
    assert severity(gym) is None
    assert severity(None) == WARNING
    assert severity(plain) == ERROR


def _not_supported(result):
    return [f for f in result[0] if f.rule == 'megatron.not-supported' and f.severity == ERROR]


def test_parse_time_stops_on_freeze_ratio_under_pp_and_on_checkpoint_rotation():
    # one-edit variants of examples/megatron/grpo/dense_colocate.sh that megatron_args.py stops at parse
    assert not _not_supported(run())
    (f,) = _not_supported(run('--freeze_parameters_ratio', '0.5', '--pipeline_model_parallel_size', '2'))
    assert f.message.startswith('`freeze_parameters_ratio` is not supported when `pipeline_model_parallel_size` > 1')
    assert '--freeze_parameters_ratio 0' in f.fix
    assert not _not_supported(run('--freeze_parameters_ratio', '0.5'))  # no pipeline: allowed
    assert not _not_supported(run('--freeze_parameters_ratio', '1', '--pipeline_model_parallel_size', '2'))
    (f,) = _not_supported(run('--save_total_limit', '3', '--async_save', 'true'))
    assert 'async_save is not supported with save_total_limit' in f.message and '--async_save false' in f.fix
    (f,) = _not_supported(run('--save_total_limit', '1'))
    assert 'save_total_limit must be greater than or equal to 2' in f.message and f.fix == '--save_total_limit 2'
    assert not _not_supported(run('--save_total_limit', '2'))


def test_rollout_importance_sampling_needs_vllm_0_10_2_when_the_version_is_known():
    la = launch('--rollout_importance_sampling_mode', 'token_truncate')
    cfg = load_model_config(QWEN7)
    old = _not_supported(mg.check(la, A100_80, cfg, vllm_version='0.10.1.1'))
    assert [f.arguments for f in old] == [['rollout_importance_sampling_mode']]
    assert 'not supported in vLLM version < 0.10.2' in old[0].message and 'vllm>=0.10.2' in old[0].fix
    assert not _not_supported(mg.check(la, A100_80, cfg, vllm_version='0.10.2'))
    assert not _not_supported(mg.check(la, A100_80, cfg))  # version unknown: not judged
    assert not _not_supported(mg.check(launch(), A100_80, cfg, vllm_version='0.8.5'))


def test_a_3x_release_plans_the_freed_parameter_storage_in_the_train_phase():
    # ms-swift 3.x trains through Megatron-LM's pretrain (no empty_cache between DDP's wrap and the first step); with
    # the optimizer on the CPU and vLLM awake, nothing reuses the policy's pre-DDP storage but the step's transients
    i = DENSE.index('--tuner_type')
    base = DENSE[:i] + DENSE[i + 2 :]
    extra = (
        '--sleep_level',
        '0',
        '--offload_model',
        'false',
        '--offload_optimizer',
        'false',
        '--optimizer_cpu_offload',
        'true',
        '--use_precision_aware_optimizer',
        'true',
        '--optimizer_offload_fraction',
        '1',
        '--micro_batch_size',
        '1',
        '--max_length',
        '2048',
        '--max_completion_length',
        '512',
        '--vllm_max_model_len',
        '4096',
        '--recompute_granularity',
        'full',
        '--recompute_method',
        'uniform',
        '--recompute_num_layers',
        '1',
    )
    old = mg.check(launch(*extra, base=base, release='3.12.6'), A100_80)[2]['terms']['train']
    new = mg.check(launch(*extra, base=base, release='4.6.0'), A100_80)[2]['terms']['train']
    assert 'freed_params' not in new
    assert 0 < old['freed_params'] <= old['weights']
    # sleeping between rollouts empties the cache at the first rollout, before the first train step
    slept = mg.check(launch(*extra, '--sleep_level', '1', base=base, release='3.12.6'), A100_80)[2]['terms']['train']
    assert 'freed_params' not in slept


def test_cpu_offload_without_the_precision_aware_optimizer_is_refused_where_megatron_lm_validates():
    # Megatron-LM validate_args (core_r0.14/0.15, run by ms-swift 3.x's pretrain) asserts the pair
    def rule(*extra, **kw):
        return [f for f in mg.check(launch(*extra, **kw), A100_80)[0] if f.rule == 'megatron.cpu-offload-precision']

    good = ('--optimizer_cpu_offload', 'true', '--use_precision_aware_optimizer', 'true')
    assert rule(*good, **AT_3X) == []
    (refused,) = rule('--optimizer_cpu_offload', 'true', **AT_3X)
    assert refused.severity == 'error'
    assert refused.message.startswith('The optimizer cpu offload must be used in conjunction with')
    assert refused.fix.startswith('--use_precision_aware_optimizer true')
    # ms-swift 4.x builds megatron-core's OptimizerConfig itself, which has no such check: nothing refuses it
    assert rule('--optimizer_cpu_offload', 'true', release='4.6.0') == []
    assert rule('--optimizer_cpu_offload', 'true') == []


def test_recompute_settings_megatron_core_refuses_when_it_builds_the_model():
    # TransformerConfig.__post_init__: full needs a method and a layer count, selective takes no layer count
    def rule(*extra):
        return [f for f in run(*extra)[0] if f.rule == 'megatron.recompute-config']

    assert rule('--recompute_granularity', 'full', '--recompute_method', 'uniform', '--recompute_num_layers', '1') == []
    assert rule() == []  # the base launch: selective, no method, no layer count
    (no_method,) = rule('--recompute_granularity', 'full')
    assert no_method.message.startswith('Using recompute_granularity: full so recompute_method must be')
    assert no_method.fix == '--recompute_method uniform --recompute_num_layers 1'
    (no_layers,) = rule('--recompute_granularity', 'full', '--recompute_method', 'block')
    # Qwen2.5-7B: 28 layers on one pipeline stage
    assert 'recompute_num_layers must be between 1 and num_layers_per_pipeline_rank: 28' in no_layers.message
    assert no_layers.fix == '--recompute_num_layers 1'
    (selective,) = rule('--recompute_num_layers', '2')
    assert selective.message.startswith('When using recompute_granularity: selective recompute_num_layers must be None')
    # ms-swift's own parse-time check speaks first for selective with a method
    assert rule('--recompute_method', 'uniform', '--recompute_num_layers', '1') == []
    # none: nothing to check
    assert rule('--recompute_granularity', 'none', '--recompute_num_layers', '2') == []


def test_moe_settings_megatron_core_refuses_when_it_builds_the_model():
    # TransformerConfig.__post_init__, MoE part; a dense model is never judged by it
    def rule(*extra, model=MOE_SHAPE):
        return [f for f in run(*extra, model=model)[0] if f.rule == 'megatron.moe-config']

    shared = {**MOE_SHAPE, 'shared_expert_intermediate_size': 1024}
    overlap = ('--moe_shared_expert_overlap', 'true')
    assert rule(*overlap, model=shared) == []  # the default dispatcher is alltoall
    (refused,) = rule(*overlap, '--moe_token_dispatcher_type', 'allgather', model=shared)
    assert refused.message.startswith('moe_shared_expert_overlap only works with alltoall')
    assert refused.fix.startswith('--moe_token_dispatcher_type alltoall')
    # no shared expert: the check is inside megatron-core's shared-expert branch
    assert rule(*overlap, '--moe_token_dispatcher_type', 'allgather') == []

    pad = ('--moe_pad_expert_input_to_capacity', 'true')
    (no_factor,) = rule(*pad)
    assert no_factor.message.startswith(
        'moe_expert_capacity_factor must be set to use moe_pad_expert_input_to_capacity'
    )
    assert rule(*pad, '--moe_expert_capacity_factor', '1.0') == []
    assert len(rule(*pad, '--moe_expert_capacity_factor', '-1')) == 1  # a negative factor is dropless: None
    assert rule(*pad, model=LLAMA_SHAPE) == []

    factor = ('--moe_expert_capacity_factor', '1.0')
    (balancing,) = rule(*factor, '--moe_router_load_balancing_type', 'sinkhorn')
    assert balancing.message.startswith('moe_expert_capacity_factor only works with aux_loss')
    assert rule(*factor, '--moe_router_load_balancing_type', 'seq_aux_loss') == []
    assert rule('--moe_router_load_balancing_type', 'sinkhorn') == []

    two = ('--moe_router_load_balancing_type', 'aux_loss', 'seq_aux_loss')
    (coeffs,) = rule(*two, '--moe_aux_loss_coeff', '1e-3')
    assert coeffs.message.startswith('moe_aux_loss_coeff must be a list of the same length as')
    assert coeffs.fix.startswith('--moe_aux_loss_coeff 0.001 0.001')
    assert rule(*two, '--moe_aux_loss_coeff', '1e-3', '1e-4') == []
    # one type and one coefficient: ms-swift passes both as scalars
    assert rule('--moe_router_load_balancing_type', 'aux_loss', '--moe_aux_loss_coeff', '1e-3') == []


def test_recompute_modules_and_deepep_megatron_core_refuses_when_it_builds_the_model():
    # TransformerConfig.__post_init__: selective recompute's modules, moe_layer_recompute, DeepEP's dispatcher
    def rule(*extra, model=MOE_SHAPE):
        found = run(*extra, model=model)[0]
        return [f for f in found if f.rule in ('megatron.recompute-modules', 'megatron.deepep-dispatcher')]

    assert rule() == []  # ms-swift's defaults: selective, core_attn, grouped GEMM, alltoall
    (moe_act,) = rule('--recompute_modules', 'moe_act', '--moe_grouped_gemm', 'false')
    assert moe_act.message.startswith('moe_act in recompute_modules is only supported with moe_grouped_gemm.')
    assert moe_act.fix.startswith('--moe_grouped_gemm true')
    assert rule('--recompute_modules', 'moe_act') == []  # grouped GEMM is ms-swift's default
    # the modules are read only with selective granularity
    full = ('--recompute_granularity', 'full', '--recompute_method', 'uniform', '--recompute_num_layers', '1')
    assert rule(*full, '--recompute_modules', 'moe_act', '--moe_grouped_gemm', 'false') == []

    (invalid,) = rule('--recompute_modules', 'core_attn', 'attention')
    assert invalid.message.startswith("Invalid choices for recompute_modules: {'attention'}. Allowed modules are: {")
    assert invalid.fix == '--recompute_modules core_attn'
    assert rule('--recompute_modules', 'core_attn', 'mlp', 'moe', 'layernorm') == []

    shared = {**MOE_SHAPE, 'shared_expert_intermediate_size': 1024}
    both = ('--recompute_modules', 'shared_experts', '--moe_shared_expert_overlap', 'true')
    (overlap,) = rule(*both, model=shared)
    assert overlap.message.startswith('shared_experts recompute cannot work with --moe-shared-expert-overlap.')
    assert rule(*both) == []  # no shared expert: megatron-core's check needs its size
    assert rule('--recompute_modules', 'shared_experts', model=shared) == []

    (layer,) = rule('--moe_layer_recompute', 'true', *full)
    assert layer.message.startswith('Do not set --moe-layer-recompute with full recompute granularity.')
    assert rule('--moe_layer_recompute', 'true') == []  # selective: megatron-core adds "moe" to the modules

    (deepep,) = rule('--moe_enable_deepep', 'true')
    assert deepep.message.startswith('DeepEP backend is only supported with flex token dispatcher.')
    assert deepep.fix == '--moe_token_dispatcher_type flex (or --moe_enable_deepep false)'
    assert rule('--moe_enable_deepep', 'true', '--moe_token_dispatcher_type', 'flex') == []


def test_uneven_pipeline_stages_megatron_core_refuses_when_it_builds_the_model():
    # TransformerConfig.__post_init__ "Uneven PP", on a 30-layer model over 4 stages
    def rule(*extra):
        found = run('--pipeline_model_parallel_size', '4', *extra, model=LLAMA_SHAPE)[0]
        return [f for f in found if f.rule == 'megatron.uneven-pp']

    first = '--decoder_first_pipeline_num_layers'
    assert rule(first, '6') == []  # 24 layers over 3 middle stages
    (middle,) = rule(first, '7')
    assert middle.message.startswith(
        'number of layers at middle stage: 23 must be divisible bythe middle pipeline model parallel size 3'
    )
    (zero,) = rule(first, '0')
    assert zero.message.startswith('num_layers_in_first_pipeline_stage must be larger than 0')
    vpp = ('--virtual_pipeline_model_parallel_size', '2', '--beta', '0')
    (edge,) = rule(first, '7', *vpp)
    assert edge.message.startswith('number of layers at first stage: 7must be divisible by virtual pipelineparallel')
    (per_rank,) = rule(first, '6', '--decoder_last_pipeline_num_layers', '6', *vpp)  # 18 over 2 middle stages: 9
    assert per_rank.message.startswith('number of layers on each middle pipeline rank:9 must be divisible by virtual')
    assert rule(first, '6', *vpp) == []  # 8 per middle stage, 2 virtual stages
    # PP 2 with the first stage given: the one other stage takes the other 17 layers
    assert [
        f
        for f in run('--pipeline_model_parallel_size', '2', first, '13', model=LLAMA_SHAPE)[0]
        if f.rule == 'megatron.uneven-pp'
    ] == []


def test_an_oom_only_long_prompts_reach_is_a_warning_with_the_length_that_fits():
    # nothing bounds the prompts: the OOM at the model context needs prompts that long (as the ZeRO verdict's
    # memory.oom-if-long-prompts), and the length the warning names is where the model itself stops fitting
    findings, _, mem = run(*CLEAN, base=UNBOUNDED)
    assert mem['prompt_tokens'] == 32768 - 2048 and 'megatron.memory' not in {f.rule for f in findings}
    (f,) = [f for f in findings if f.rule == 'megatron.oom-if-long-prompts']
    assert f.severity == 'warning'
    longest = int(f.fix.split()[1])
    assert not [p for p in run(*CLEAN, base=UNBOUNDED, prompt_len=longest)[2]['problems'] if p['check'] == 'oom']
    assert [p for p in run(*CLEAN, base=UNBOUNDED, prompt_len=longest + 1)[2]['problems'] if p['check'] == 'oom']
    # a launch that allows prompts that long (max_length) is refused, as before
    assert 'megatron.memory' in {x.rule for x in run(*CLEAN, '--max_length', '30720', base=UNBOUNDED)[0]}


def test_an_oom_short_prompts_also_reach_stays_an_error():
    # DENSE as written (TP 1, micro-batch 4): its weight sync runs out of memory whatever the prompts
    findings, _, mem = run(base=UNBOUNDED)
    assert 'weight_sync' in {p['phase'] for p in mem['problems'] if p['check'] == 'oom'}
    errors = [f.message for f in findings if f.rule == 'megatron.memory']
    assert any(m.startswith('weight_sync') for m in errors)
