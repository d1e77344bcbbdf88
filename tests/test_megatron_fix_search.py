"""The fix search for Megatron-SWIFT GRPO launches (frontends/megatron/search.py): a launch that does not fit gets
changes that the guard's own check then accepts, read again from the fixed launch as the user would run it."""

import pathlib

from grpo_recipes.findings import ERROR
from grpo_recipes.frontends import megatron as mg
from grpo_recipes.frontends.megatron import search as ms
from grpo_recipes.hardware import Hardware
from grpo_recipes.models import load_model_config

A100_8 = Hardware(gpus=8, gpu_type='A100-80G', source='flags')
QWEN14 = 'Qwen/Qwen2.5-14B-Instruct'
OOM = (
    '--rlhf_type grpo --model Qwen/Qwen2.5-14B-Instruct --tensor_model_parallel_size 1 --global_batch_size 128 '
    '--micro_batch_size 4 --steps_per_generation 4 --num_generations 8 --reward_funcs accuracy format '
    '--use_vllm true --vllm_mode colocate --vllm_gpu_memory_utilization 0.5 --vllm_max_model_len 10240 '
    '--max_length 8192 --max_completion_length 2048 --tuner_type full --beta 0.001 --sleep_level 0 '
    '--recompute_granularity selective --padding_free true'
).split()
ENV = {'NPROC_PER_NODE': '8'}
DRAFT = pathlib.Path(__file__).parent / 'data' / 'megatron' / 'qwen2.5-32b-instruct-full-2x8xa100-80g-megatron.yaml'


def _errors(findings):
    return [f.rule for f in findings if f.severity == ERROR]


def test_an_oom_launch_gets_flags_the_check_then_accepts():
    la = mg.read(OOM, ENV)
    cfg = load_model_config(QWEN14)
    findings, plan, _ = mg.check(la, A100_8, cfg)
    assert 'megatron.memory' in _errors(findings)
    fixes = ms.search(la, A100_8, cfg)
    assert fixes
    for fix in fixes:
        # TP brings sequence_parallel with it, optimizer_cpu_offload the precision-aware optimizer
        companions = {'sequence_parallel', 'use_precision_aware_optimizer', 'optimizer_offload_fraction'}
        assert len(set(fix.changes) - companions) <= ms.MAX_CHANGES
        fixed = mg.read(OOM + fix.argv(), ENV)  # the flags after the launch's own, as the user pastes them
        f2, plan2, mem2 = mg.check(fixed, A100_8, cfg)
        assert _errors(f2) == [], fix.changes
        assert mem2['peak_gib'] <= mem2['capacity_gib']
        # the batch is kept: prompts per optimizer step and per rollout, generations
        for k in ('prompts_per_optimizer_step', 'prompts_per_rollout', 'generation_batch', 'num_generations'):
            assert plan2[k] == plan[k], k
    text = ms.fix_text(fixes[0], la)
    assert text.startswith('set --') and 'on the megatron rlhf command line' in text
    assert '--sequence_parallel false' not in text  # a default the launch never set is not quoted back


def test_the_report_carries_the_fix_and_write_fix_writes_a_launch_the_check_accepts(tmp_path):
    from grpo_recipes.frontends.megatron.checked import check_report
    from grpo_recipes.write_fix import fixed_text

    la = mg.read(OOM, ENV)
    rep = check_report(la, A100_8, model_config=load_model_config(QWEN14))
    assert rep.fixes and rep.to_dict()['fixes'][0]['changes']
    mem_findings = [f for f in rep.findings if f.rule == 'megatron.memory']
    assert mem_findings and all(f.fix == ms.fix_text(rep.fixes[0], la) for f in mem_findings)
    text, src = fixed_text(['NPROC_PER_NODE=8', 'megatron', 'rlhf', *OOM], la, rep.fixes[0])
    assert src is None
    import shlex

    words = shlex.split(text)
    assert words[:3] == ['NPROC_PER_NODE=8', 'megatron', 'rlhf']
    f2, _, _ = mg.check(mg.read(words[3:], ENV), A100_8, load_model_config(QWEN14))
    assert _errors(f2) == []


def test_a_yaml_launch_gets_key_value_lines_and_its_edited_config_is_accepted(tmp_path):
    from grpo_recipes.write_fix import fixed_text

    cfg_path = tmp_path / 'grpo.yaml'
    text = DRAFT.read_text().replace('tensor_model_parallel_size: 8', 'tensor_model_parallel_size: 2')
    text = text.replace('pipeline_model_parallel_size: 2', 'pipeline_model_parallel_size: 1')
    cfg_path.write_text(text)
    la = mg.read([str(cfg_path)], {})
    model = load_model_config('Qwen/Qwen2.5-32B-Instruct')
    assert 'megatron.memory' in _errors(mg.check(la, A100_8, model)[0])
    fixes = ms.search(la, A100_8, model)
    assert fixes
    shown = ms.fix_text(fixes[0], la)
    assert shown.splitlines()[0] == 'in grpo.yaml, set:'
    assert all(': ' in line and not line.startswith(('-', '+', ' ')) for line in shown.splitlines()[1:])
    edited, src = fixed_text([str(cfg_path)], la, fixes[0])
    assert src == cfg_path and '# Megatron-SWIFT GRPO' in edited  # comments kept
    out = tmp_path / 'fixed.yaml'
    out.write_text(edited)
    assert _errors(mg.check(mg.read([str(out)], {}), A100_8, model)[0]) == []


def test_no_search_when_the_launch_fits_and_none_found_when_nothing_can():
    la = mg.read([str(DRAFT)], {})
    model = load_model_config('Qwen/Qwen2.5-32B-Instruct')
    assert ms.search(la, A100_8, model) == []
    # full tuning of a 72B model on two GPUs: no layout, offload or recompute within three changes fits
    hopeless = mg.read(
        (
            '--rlhf_type grpo --model Qwen/Qwen2.5-72B-Instruct --global_batch_size 16 --micro_batch_size 1 '
            '--num_generations 8 --reward_funcs accuracy --use_vllm true --vllm_mode colocate '
            '--max_completion_length 1024 --max_length 2048 --tuner_type full'
        ).split(),
        {'NPROC_PER_NODE': '2'},
    )
    two = Hardware(gpus=2, gpu_type='A100-80G', source='flags')
    assert 'megatron.memory' in _errors(mg.check(hopeless, two, load_model_config('Qwen/Qwen2.5-72B-Instruct'))[0])
    assert ms.search(hopeless, two, load_model_config('Qwen/Qwen2.5-72B-Instruct')) == []


def test_layout_moves_respect_the_node_and_the_world():
    la = mg.read(OOM, ENV)
    moves = dict(ms._moves(la))
    assert [m['tensor_model_parallel_size'] for m in moves['tensor_model_parallel_size']] == [2, 4, 8]
    assert all(m['sequence_parallel'] for m in moves['tensor_model_parallel_size'])
    assert [m['micro_batch_size'] for m in moves['micro_batch_size']] == [2, 1]
    # never a knob that changes the batch
    keys = {k for _, ms_ in ms._moves(la) for m in ms_ for k in m}
    assert not keys & {'global_batch_size', 'num_generations', 'steps_per_generation', 'generation_batch_size'}


def test_verify_reads_the_fixed_launch_again():
    from grpo_recipes.fix_syntax import fixed_launch

    la = mg.read(OOM, ENV)
    fix = ms.search(la, A100_8, load_model_config(QWEN14))[0]
    fixed, outside = fixed_launch(la, fix)
    assert outside == []
    for k, (_, new) in fix.changes.items():
        assert fixed.args[k] == new, k
    assert fixed.argv[len(la.argv) :] == fix.argv()


def test_optimizer_cpu_offload_is_a_move_until_the_launch_sets_it():
    knobs = [k for k, opts in ms._moves(mg.read(OOM, ENV)) if opts]
    assert 'optimizer_cpu_offload' in knobs
    offloaded = mg.read(OOM + ['--optimizer_cpu_offload', 'true', '--optimizer_offload_fraction', '1'], ENV)
    assert 'optimizer_cpu_offload' not in [k for k, _ in ms._moves(offloaded)]


def test_the_optimizer_cpu_offload_move_carries_the_precision_aware_optimizer():
    (opts,) = [o for k, o in ms._moves(mg.read(OOM, ENV)) if k == 'optimizer_cpu_offload']
    assert opts == [
        {'optimizer_cpu_offload': True, 'optimizer_offload_fraction': 1.0, 'use_precision_aware_optimizer': True}
    ]


def test_vllm_tensor_parallel_moves_stay_in_the_node_and_only_for_colocate():
    moves = dict(ms._moves(mg.read(OOM, ENV)))
    assert [m['vllm_tensor_parallel_size'] for m in moves['vllm_tensor_parallel_size']] == [2, 4, 8]
    four = dict(ms._moves(mg.read(OOM + ['--vllm_tensor_parallel_size', '4'], {'NPROC_PER_NODE': '4'})))
    assert 'vllm_tensor_parallel_size' not in four  # vTP 4 already spans the node
    server = [a if a != 'colocate' else 'server' for a in OOM]
    assert 'vllm_tensor_parallel_size' not in dict(ms._moves(mg.read(server, ENV)))


def test_a_colocated_engine_without_kv_room_is_fixed_by_vllm_tensor_parallel(tmp_path):
    # the 32B draft with one GPU per engine: the bf16 weights fill the engine's share, no KV cache is left
    cfg_path = tmp_path / 'vtp1.yaml'
    text = DRAFT.read_text()
    assert '\nvllm_tensor_parallel_size: 8\n' in text
    cfg_path.write_text(text.replace('\nvllm_tensor_parallel_size: 8\n', '\nvllm_tensor_parallel_size: 1\n'))
    la = mg.read([str(cfg_path)], {})
    model = load_model_config('Qwen/Qwen2.5-32B-Instruct')
    assert 'megatron.vllm-no-kv' in _errors(mg.check(la, A100_8, model)[0])
    fixes = ms.search(la, A100_8, model)
    assert fixes and all(set(f.changes) == {'vllm_tensor_parallel_size'} for f in fixes)
    for fix in fixes:
        fixed = mg.read([str(cfg_path), *fix.argv()], {})
        assert _errors(mg.check(fixed, A100_8, model)[0]) == [], fix.changes
