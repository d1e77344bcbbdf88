"""Expandable segments as the first memory fix (issue 20, item 4): where it is offered, how it is printed, and
``check --verify`` re-planning with it.

The savings come from the memory model's own reserve term (memory/reserve.py): the 7B LoRA launch below, micro-batch
16 and 1,024-token completions, is planned near 76 GiB on the device with torch's default allocator and near 60 GiB
with expandable segments, so a 70 GiB card fits it only with the setting and a 50 GiB card not even then."""

import json

from grpo_recipes.allocconf import AllocSetting
from grpo_recipes.frontends import read_launch as load_launch
from grpo_recipes.memory.envfix import candidate, render
from grpo_recipes.memory.inputs import Inputs

HF = (
    'swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --use_vllm false '
    '--reward_funcs format --dataset d.jsonl --max_length 256 --max_completion_length 1024 --num_generations 16 '
    '--per_device_train_batch_size 16 --gradient_checkpointing true --torch_dtype bfloat16'
)
COLOCATE = HF.replace('--use_vllm false', '--use_vllm true --vllm_mode colocate --sleep_level 1')


def _report(cmd, packages=None, environ=None, gpu_mem=70.0):
    from grpo_recipes.check import check_launch
    from grpo_recipes.hardware import Hardware

    launch = load_launch(cmd.split() if isinstance(cmd, str) else cmd, environ=environ or {})
    pk = {
        'ms-swift': '4.6.0',
        'trl': '0.29.1',
        'math-verify': '0.9.0',
        'msgspec': '0.22.0',
        'torch': '2.13.0',
        'transformers': '5.19.0',
        **(packages or {}),
    }
    return check_launch(launch, Hardware(gpus=1, gpu_mem_gib=gpu_mem, source='flags'), packages=pk)


def test_offered_first_where_compatible():
    assert candidate(_report(HF)) == ('PYTORCH_CUDA_ALLOC_CONF', 'expandable_segments:True')
    # ms-swift 4.6 turns them off around its sleeping engine; older ms-swift could free 0 GiB on sleep (#6636)
    assert candidate(_report(COLOCATE)) == ('PYTORCH_CUDA_ALLOC_CONF', 'expandable_segments:True')
    assert candidate(_report(COLOCATE, packages={'ms-swift': '3.12.0'})) is None
    # the user's other keys are kept
    kept = _report(HF, environ={'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:128'})
    assert candidate(kept) == ('PYTORCH_CUDA_ALLOC_CONF', 'max_split_size_mb:128,expandable_segments:True')
    assert candidate(_report(HF, environ={'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'})) is None
    assert candidate(_report(HF, environ={'PYTORCH_CUDA_ALLOC_CONF': 'backend:cudaMallocAsync'})) is None
    # only the new name set: torch reads it, ms-swift does not, so never beside a colocated engine
    assert candidate(_report(HF, environ={'PYTORCH_ALLOC_CONF': 'max_split_size_mb:64'})) == (
        'PYTORCH_ALLOC_CONF',
        'max_split_size_mb:64,expandable_segments:True',
    )
    assert candidate(_report(COLOCATE, environ={'PYTORCH_ALLOC_CONF': 'max_split_size_mb:64'})) is None


def test_not_offered_beside_trl_sleep_mode():
    trl = (
        'accelerate launch --num_processes 1 train_grpo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct '
        '--use_vllm --vllm_mode colocate --vllm_enable_sleep_mode true --use_peft'
    )
    assert candidate(_report(trl)) is None  # vLLM's CuMemAllocator asserts; TRL never turns them off
    assert candidate(_report(trl.replace(' --vllm_enable_sleep_mode true', ''))) is not None


def test_rendered_in_the_launch_own_form(tmp_path, write_yaml):
    env = {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}
    sh = tmp_path / 'run.sh'
    sh.write_text('export CUDA_VISIBLE_DEVICES=0\n' + HF + '\n')
    assert render(env, load_launch([str(sh)], environ={})).startswith(
        f'export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True   (add above line 2 of {sh})'
    )
    assert render(env, load_launch(HF.split(), environ={})).startswith(
        'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True swift rlhf'
    )
    cfg = write_yaml('rlhf_type: grpo\nmodel: Qwen/Qwen2.5-7B-Instruct\n')
    # the lines to paste into the config, no diff markers (issue 31 item 3)
    assert render(env, load_launch([str(cfg)], environ={})).endswith(
        "\nENV:\n  PYTORCH_CUDA_ALLOC_CONF: 'expandable_segments:True'"
    )
    # the environment would win over the file's ENV block (ms-swift's parse_yaml_args): a prefix then
    set_there = load_launch([str(cfg)], environ={'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:64'})
    assert render(env, set_there).startswith('PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ')


def test_the_search_tries_it_first():
    report = _report(HF)
    assert report.fits is False
    first = report.fixes[0]
    assert first.env == {'PYTORCH_CUDA_ALLOC_CONF': (None, 'expandable_segments:True')} and first.changes == {}
    fix = next(f for f in report.findings if f.rule == 'memory.fix')
    assert fix.fix.startswith('PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True swift rlhf')


def test_not_offered_when_the_plan_with_it_does_not_fit():
    # even with expandable segments the launch is over 50 GiB: the search falls through to a change of arguments
    report = _report(HF, gpu_mem=50.0)
    assert report.fits is False and report.fixes
    assert not report.fixes[0].env and report.fixes[0].changes


def test_check_verify_accepts_the_export_line(tmp_path, capsys):
    from grpo_recipes.cli.guard import main

    sh = tmp_path / 'run.sh'
    sh.write_text('export CUDA_VISIBLE_DEVICES=0\n' + HF + '\n')
    main(['check', str(sh), '--gpu-mem', '70', '--gpus', '1', '--verify', '--json'])
    out = json.loads(capsys.readouterr().out)
    fix = next(f for f in out['findings'] if f['rule'] == 'memory.fix')
    assert fix['fix'].startswith('export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True')
    fv = out['fix_verified']
    assert fv['ok'] and fv['env'] == {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}
    assert fv['replanned']['fits'] and fv['replanned']['peak_fraction'] < 1.0
    assert out['fixes'][0]['env'] == {'PYTORCH_CUDA_ALLOC_CONF': {'from': None, 'to': 'expandable_segments:True'}}
    # the same launch with the line added, as the user would run it: no OOM, no fix
    sh.write_text(
        'export CUDA_VISIBLE_DEVICES=0\nexport PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n' + HF + '\n'
    )
    main(['check', str(sh), '--gpu-mem', '70', '--gpus', '1', '--json'])
    again = json.loads(capsys.readouterr().out)
    assert again['fits'] and not again['fixes']
    assert any('expandable segments' in a and f'{sh}:2 (export)' in a for a in again['assumptions'])


def test_verify_text_output(tmp_path, capsys):
    from grpo_recipes.cli.guard import main

    main(['check', '--gpu-mem', '70', '--gpus', '1', '--verify', '--', *HF.split()])
    text = capsys.readouterr().out
    assert 'fix verified: re-planned with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: peak' in ' '.join(
        text.split()
    )


def test_setting_changes_the_trainer_phase_the_model_sees():
    from grpo_recipes.memory.envfix import with_alloc

    report = _report(COLOCATE)
    inp = Inputs(arch=None, capacity_gib=80.0)
    assert with_alloc(inp, None, report.cfg, 'swift').alloc.expandable_segments is False
    setting = AllocSetting({'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}, {'PYTORCH_CUDA_ALLOC_CONF': 'x'})
    got = with_alloc(inp, setting, report.cfg, 'swift')
    assert got.alloc.expandable_segments and got.alloc_vllm is None  # sleep mode: vLLM's own pool


def test_trl_sleep_mode_with_expandable_segments_is_refused():
    trl = (
        'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True accelerate launch --num_processes 1 train_grpo.py '
        '--model_name_or_path Qwen/Qwen2.5-7B-Instruct --use_vllm --vllm_mode colocate '
        '--vllm_enable_sleep_mode true '
        '--use_peft'
    )
    found = [f for f in _report(trl).findings if f.rule == 'vllm.expandable-segments']
    assert found and found[0].severity == 'error' and 'not compatible with memory pool' in found[0].message
    # without sleep mode vLLM keeps its memory in torch's allocator: no refusal
    awake = _report(trl.replace(' --vllm_enable_sleep_mode true', ''))
    assert not [f for f in awake.findings if f.rule == 'vllm.expandable-segments']


def test_a_launcher_running_a_yaml_gets_an_export_line(tmp_path, write_yaml):
    # the recipes' launchers run `swift rlhf recipe.yaml`: the line goes into the script, above that command
    cfg = write_yaml('rlhf_type: grpo\nmodel: Qwen/Qwen2.5-7B-Instruct\n')
    sh = tmp_path / 'run.sh'
    sh.write_text(f'#!/bin/bash\nset -e\nswift rlhf {cfg} --use_vllm false\n')
    launch = load_launch([str(sh)], environ={})
    assert launch.config_file == str(cfg)
    assert (
        render({'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}, launch)
        == f'export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True   (add above line 3 of {sh})'
    )


def test_a_tight_plan_names_the_setting_first_where_compatible():
    # planned near the limit but fitting: memory.tight's fix names the environment line before any argument, and not
    # once the launch sets it already
    roomy = _report(HF, gpu_mem=200.0)
    peak = max(m.total_gib for m in roomy.memory if m.role != 'rollout')
    tight = _report(HF, gpu_mem=round(peak / 0.97, 1))
    f = next(f for f in tight.findings if f.rule == 'memory.tight')
    assert f.fix.startswith('keep 12% headroom: export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True'), f.fix
    on = _report(HF, environ={'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}, gpu_mem=round(peak / 0.97, 1))
    assert all('PYTORCH_CUDA_ALLOC_CONF' not in (f.fix or '') for f in on.findings if f.rule == 'memory.tight')


def test_the_cache_line_is_stated_for_the_default_allocator_only():
    """The default allocator keeps a segment per cudaMalloc, so a later, longer logits window adds cached segments
    where the card has room (the H200 runs of 2026-11-27, bench/bench_reserve_windows.py); the verdict says the plan
    is the longest window's. Expandable segments grow one segment instead: no such line."""
    cache = "torch's cache: planned at the longest logits window"
    default = _report(HF)
    assert any(a.startswith(cache) for a in default.assumptions)
    expandable = _report(HF, environ={'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'})
    assert not any(a.startswith(cache) for a in expandable.assumptions)
    assert any('expandable segments' in a for a in expandable.assumptions)
