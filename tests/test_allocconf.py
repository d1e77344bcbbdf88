"""The allocator setting as part of the launch (issue 20, item 3): parsing checked against torch's own parser, every
place a launch can set it, and ms-swift's switch-off around its colocated vLLM engine, checked against ms-swift."""

import json
import subprocess
import sys
import textwrap

import pytest

from grpo_recipes.allocconf import AllocSetting, parse, phases, read_setting
from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch as load_launch

SWIFT = [
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--use_vllm',
    'true',
    '--vllm_mode',
    'colocate',
    '--sleep_level',
    '1',
]

GOOD = (
    'expandable_segments:True, max_split_size_mb:128,garbage_collection_threshold:0.6,'
    'roundup_power2_divisions:[256:1,512:2,>:8]'
)
# Values torch's device-generic parser (libc10, present in the CPU build) rejects.
BAD_FOR_TORCH = [
    'expandable_segments:true',
    'max_split_size_mb:10',
    'garbage_collection_threshold:1.5',
    'roundup_power2_divisions:3',
]


def _torch_verdicts(texts):
    """torch's own parser on each text (torch._C._accelerator_setAllocatorSettings, in a fresh process)."""
    code = textwrap.dedent("""
        import json, sys, torch
        out = {}
        for t in json.loads(sys.argv[1]):
            try:
                torch._C._accelerator_setAllocatorSettings(t)
                out[t] = None
            except Exception as e:
                out[t] = str(e).splitlines()[0]
        print(json.dumps(out))""")
    r = subprocess.run([sys.executable, '-c', code, json.dumps(texts)], capture_output=True, text=True, timeout=300)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_parse_reads_the_keys_that_change_the_reserve():
    c = parse(GOOD, 'PYTORCH_CUDA_ALLOC_CONF')
    assert c.expandable_segments and c.max_split_size_mb == 128 and c.garbage_collection_threshold == 0.6
    assert c.roundup_power2_divisions == '[256:1,512:2,>:8]' and c.backend == 'native'
    assert not parse('').expandable_segments and parse('expandable_segments:False').label.startswith('default')
    assert parse('backend:cudaMallocAsync').label == 'backend:cudaMallocAsync'


def test_parse_agrees_with_torch_on_good_and_bad_values():
    verdicts = _torch_verdicts([GOOD, *BAD_FOR_TORCH])
    assert verdicts[GOOD] is None
    for text in BAD_FOR_TORCH:
        assert verdicts[text] is not None, text  # torch refuses it ...
        with pytest.raises(GuardError) as e:  # ... and so does the guard, in one line naming where and the fix
            parse(text, 'PYTORCH_CUDA_ALLOC_CONF', 'run.sh:3 (export)')
        msg = str(e.value)
        assert '\n' not in msg and msg.startswith('run.sh:3 (export): PYTORCH_CUDA_ALLOC_CONF=') and 'Fix: ' in msg


@pytest.mark.parametrize(
    'text,fix',
    [
        ('expandible_segments:True', 'use expandable_segments'),
        ('expandable_segments', 'expandable_segments:VALUE'),
        ('backend:foo', 'backend:native'),
    ],
)
def test_bad_keys_name_the_fix(text, fix):
    # CUDAAllocatorConfig::parseArgs (c10/cuda/CUDAAllocatorConfig.cpp) refuses unknown keys and backends; the CPU
    # build has no CUDA parser, so these are checked against its source, not run
    with pytest.raises(GuardError, match=fix):
        parse(text, 'PYTORCH_ALLOC_CONF')


def test_which_name_wins_matches_the_installed_torch():
    code = 'import torch; print(torch._C._accelerator_getAllocatorSettings())'
    env = {'PYTORCH_ALLOC_CONF': 'max_split_size_mb:64', 'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:128'}
    import os

    r = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=300, env={**os.environ, **env}
    )
    setting = read_setting(env)
    assert setting.conf.text == r.stdout.strip().splitlines()[-1]
    assert any('set only one' in n for n in setting.notes)


def test_process_environment(tmp_path):
    launch = load_launch([*SWIFT], environ={'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'})
    assert launch.alloc.conf.expandable_segments and launch.alloc.sources == {'PYTORCH_CUDA_ALLOC_CONF': 'environment'}
    assert load_launch([*SWIFT], environ={}).alloc is None


@pytest.mark.parametrize(
    'prefix',
    [
        ['PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True'],
        ['env', '-i', 'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True'],
    ],
)
def test_command_prefix(prefix):
    launch = load_launch([*prefix, *SWIFT], environ={'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:64'})
    assert launch.alloc.conf.expandable_segments  # the command's own assignment beats the caller's environment
    assert launch.alloc.sources['PYTORCH_CUDA_ALLOC_CONF'] == 'command line (prefix)'


def test_export_line_of_a_launcher_names_its_line(tmp_path):
    sh = tmp_path / 'run.sh'
    sh.write_text(
        '#!/bin/bash\nset -e\nexport PYTORCH_ALLOC_CONF=expandable_segments:True\n'
        'PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:256 ' + ' '.join(SWIFT) + '\n'
    )
    launch = load_launch([str(sh)], environ={})
    assert launch.alloc.sources == {
        'PYTORCH_ALLOC_CONF': f'{sh}:3 (export)',
        'PYTORCH_CUDA_ALLOC_CONF': f'{sh}:4 (prefix)',
    }
    assert launch.alloc.conf.variable == 'PYTORCH_CUDA_ALLOC_CONF'  # torch 2.13's order (test above)


def test_yaml_env_block_unless_the_environment_sets_it(write_yaml):
    cfg = write_yaml(
        'ENV:\n  PYTORCH_CUDA_ALLOC_CONF: "expandable_segments:True"\nrlhf_type: grpo\n'
        'model: Qwen/Qwen2.5-7B-Instruct\n'
    )
    launch = load_launch([str(cfg)], environ={})
    assert launch.alloc.conf.expandable_segments and launch.alloc.sources['PYTORCH_CUDA_ALLOC_CONF'].endswith('(ENV)')
    # ms-swift's parse_yaml_args: a variable already in the environment wins over the file's ENV block
    env_wins = load_launch([str(cfg)], environ={'PYTORCH_CUDA_ALLOC_CONF': 'max_split_size_mb:64'})
    assert (
        not env_wins.alloc.conf.expandable_segments
        and env_wins.alloc.sources['PYTORCH_CUDA_ALLOC_CONF'] == 'environment'
    )


def test_accelerate_launch_passes_its_environment_on():
    launch = load_launch(
        [
            'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True',
            'accelerate',
            'launch',
            '--num_processes',
            '2',
            'train_grpo.py',
            '--model_name_or_path',
            'Qwen/Qwen2.5-7B-Instruct',
        ],
        environ={},
    )
    assert launch.framework == 'trl' and launch.alloc.conf.expandable_segments


def test_a_bad_value_stops_the_check_with_one_line(tmp_path):
    from conftest import run_cli

    sh = tmp_path / 'run.sh'
    sh.write_text('export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:true\n' + ' '.join(SWIFT) + '\n')
    r = run_cli('grpo_recipes.cli.guard', 'check', str(sh), '--gpus', '1', '--gpu-type', 'H100')
    assert r.returncode == 2 and 'Traceback' not in r.stderr
    line = (r.stderr + r.stdout).strip()
    assert f'{sh}:1 (export): PYTORCH_CUDA_ALLOC_CONF=' in line and 'Fix: expandable_segments:True' in line


def test_phases_model_ms_swift_and_vllm():
    old = AllocSetting({'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:False'}, {'PYTORCH_CUDA_ALLOC_CONF': 'x'})
    ph = phases(old, 'swift', True, 'colocate', 1)
    # ms-swift names it, so it turns expandable segments on for training after creating the engine
    assert ph.trainer.expandable_segments and not ph.vllm.expandable_segments and ph.vllm_pool
    assert any('even though the value written is False' in n for n in ph.notes)
    new = AllocSetting({'PYTORCH_ALLOC_CONF': 'expandable_segments:True'}, {'PYTORCH_ALLOC_CONF': 'x'})
    ph = phases(new, 'swift', True, 'colocate', 0)  # ms-swift does not look at the new name: no switch-off
    assert ph.trainer.expandable_segments and ph.vllm.expandable_segments and not ph.vllm_pool
    assert phases(new, 'swift', False, None, 0).vllm is None  # HF generate: no vLLM in the process
    trl = AllocSetting({'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}, {'PYTORCH_CUDA_ALLOC_CONF': 'x'})
    assert any('CuMemAllocator refuses' in n for n in phases(trl, 'trl', True, 'colocate', 2).notes)


SWIFT_PROBE = textwrap.dedent("""
    import importlib, json, os, sys
    import torch
    import swift.rlhf_trainers.utils as u
    calls = []
    torch.cuda.is_available = lambda: True           # stand-in for a GPU: nothing else is patched
    torch.cuda.memory._set_allocator_settings = calls.append
    out = {}
    for name, value in json.loads(sys.argv[1]):
        os.environ.pop('PYTORCH_CUDA_ALLOC_CONF', None); os.environ.pop('PYTORCH_ALLOC_CONF', None)
        os.environ[name] = value
        importlib.reload(u)                          # _EXPANDABLE_SEGMENTS_SET is read at import
        torch.cuda.is_available = lambda: True
        torch.cuda.memory._set_allocator_settings = calls.append
        del calls[:]
        u.set_expandable_segments(False); u.set_expandable_segments(True)
        out[f'{name}={value}'] = {'toggles': u._EXPANDABLE_SEGMENTS_SET, 'calls': list(calls)}
    print('RESULT' + json.dumps(out))""")


@pytest.mark.slow
def test_swift_switch_off_matches_ms_swift_itself():
    """ms-swift's own set_expandable_segments (swift/rlhf_trainers/utils.py) under each setting; only the GPU is
    stood in for (torch.cuda.is_available and the allocator call it makes)."""
    cases = [
        ('PYTORCH_CUDA_ALLOC_CONF', 'expandable_segments:True'),
        ('PYTORCH_CUDA_ALLOC_CONF', 'expandable_segments:False'),
        ('PYTORCH_CUDA_ALLOC_CONF', 'max_split_size_mb:128'),
        ('PYTORCH_ALLOC_CONF', 'expandable_segments:True'),
    ]
    r = subprocess.run(
        [sys.executable, '-c', SWIFT_PROBE, json.dumps(cases)], capture_output=True, text=True, timeout=600
    )
    out = json.loads(r.stdout.split('RESULT', 1)[1])
    for name, value in cases:
        real = out[f'{name}={value}']
        setting = AllocSetting({name: value}, {name: 'test'})
        assert setting.swift_toggles == real['toggles'], (name, value)
        ph = phases(setting, 'swift', True, 'colocate', 1)
        if real['toggles']:  # off around the engine, on for training afterwards, whatever the user wrote
            assert real['calls'] == ['expandable_segments:False', 'expandable_segments:True']
            assert ph.trainer.expandable_segments and not ph.vllm.expandable_segments
        else:
            assert real['calls'] == [] and ph.trainer == setting.conf


def test_ms_swift_calls_it_around_engine_creation_and_wake_up():
    """The call sites the phases model: rollout_mixin.py's _prepare_vllm_engine (off, create, on) and _fast_infer
    (off before wake_up); utils.py's sleep_vllm_engine (on after sleep). Read from the installed ms-swift."""
    import importlib.util
    import re
    from pathlib import Path

    pkg = Path(importlib.util.find_spec('swift').origin).parent / 'rlhf_trainers'
    mixin = (pkg / 'rollout_mixin.py').read_text()
    prep = mixin[mixin.index('def _prepare_vllm_engine') :]
    prep = prep[: prep.index('\n    def ')]
    assert re.search(
        r'set_expandable_segments\(False\)[\s\S]*GRPOVllmEngine\([\s\S]*set_expandable_segments\(True\)', prep
    )
    fast = mixin[mixin.index('def _fast_infer') :]
    fast = fast[: fast.index('\n    def ')]
    assert re.search(r'set_expandable_segments\(False\)\s*\n[\s\S]{0,300}wake_up', fast)
    utils = (pkg / 'utils.py').read_text()
    assert 'lambda: set_expandable_segments(True)' in utils[utils.index('def sleep_vllm_engine') :]
