"""A local model path that is not there is an error (never a bundled config matched by its name); the config.json
the plan used is named; a missing local dataset is reported. What counts as local is ms-swift 4.6's rule, checked
against ms-swift itself (its safe_snapshot_download and DatasetSyntax/loader), offline."""

import json

import pytest
from conftest import run_cli

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.model_source import MissingLocalPath, looks_local

PKGS = {'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9.0', 'msgspec': '0.22.0'}
HW = Hardware(gpus=1, gpu_type='A100-80G', source='flags')


def swift(model, *dataset):
    return read_launch(
        [
            '--',
            'swift',
            'rlhf',
            '--rlhf_type',
            'grpo',
            '--model',
            model,
            '--reward_funcs',
            'format',
            '--dataset',
            *(dataset or ['AI-MO/NuminaMath-TIR']),
        ],
        environ={},
    )


@pytest.mark.slow  # imports ms-swift
def test_ms_swift_itself_stops_on_a_missing_absolute_model_path():
    from swift.utils.hub_utils import safe_snapshot_download

    with pytest.raises(ValueError, match='not found'):
        safe_snapshot_download('/nonexistent/models/Qwen2.5-7B-Instruct', download_model=False)


@pytest.mark.parametrize(
    'model',
    [
        '/nonexistent/Qwen2.5-7B-Instruct',
        './ckpt/Qwen2.5-7B-Instruct',
        '../Qwen2.5-7B-Instruct',
        '~/no-such-dir/Qwen2.5-7B-Instruct',
        'output/run1/checkpoint-100/Qwen2.5-7B-Instruct',
    ],
)
def test_missing_local_model_is_an_error_not_the_bundled_config(model):
    """The launch is still read and planned (its processes and batches), its memory is not: no bundled config is
    taken for a dir by its name; the check ends with one line naming the path (exit 2)."""
    assert looks_local(model)
    r = check_launch(swift(model), HW, packages=PKGS)
    assert r.exit_code() == 2 and r.exit_code(allow_unchecked=True) == 2
    assert model in r.stop and '\n' not in r.stop and r.stop.startswith(MissingLocalPath.__name__) is False
    assert not r.memory and r.memory_unchecked and r.plan.world_size == 1
    # the dir is named like a bundled model: the line says how to plan it as that model, never does so itself
    assert '--model-config Qwen/Qwen2.5-7B-Instruct' in r.stop


def test_model_config_given_as_a_hub_id_plans_the_copy(tmp_path):
    """--model-config ORG/NAME: the config of the model the missing dir is a copy of (here the bundled one, offline)."""
    args = ['grpo_recipes.cli.guard', 'check', '--gpus', '2', '--gpu-type', 'A100-80G', '--json', '--model-config']
    launch = ['--', 'swift', 'rlhf', '--rlhf_type', 'grpo', '--model', '/nonexistent/Qwen2.5-7B-Instruct']
    launch += ['--reward_funcs', 'format', '--dataset', 'AI-MO/NuminaMath-TIR', '--per_device_train_batch_size', '8']
    p = run_cli(*args, 'Qwen/Qwen2.5-7B-Instruct', *launch, cwd=tmp_path, env={'HF_HUB_OFFLINE': '1'})
    out = json.loads(p.stdout)
    assert out['stop'] is None and out['memory_unchecked'] is None and out['memory'], p.stderr
    p = run_cli(*args, 'nobody/no-such-model-xyz', *launch, cwd=tmp_path, env={'HF_HUB_OFFLINE': '1'})
    assert p.returncode == 2 and 'nobody/no-such-model-xyz' in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_the_config_json_used_is_named(tmp_path):
    r = check_launch(swift('Qwen/Qwen2.5-7B-Instruct'), HW, packages=PKGS)  # a hub id: the bundled copy
    assert any('model_configs/Qwen2.5-7B-Instruct.json' in a for a in r.assumptions)
    d = tmp_path / 'my-model'
    d.mkdir()
    from grpo_recipes.models import builtin_config

    (d / 'config.json').write_text(json.dumps(builtin_config('Qwen2.5-7B-Instruct.json')))
    r = check_launch(swift(str(d)), HW, packages=PKGS)
    assert any(str(d / 'config.json') in a for a in r.assumptions)


def test_missing_local_dataset_is_reported(tmp_path):
    here = tmp_path / 'train.jsonl'
    here.write_text('{"messages": []}\n')
    r = check_launch(
        swift(
            'Qwen/Qwen2.5-7B-Instruct',
            '/nonexistent/train.jsonl',
            str(here),
            'AI-MO/NuminaMath-TIR#500',
            'missing.jsonl#100',
        ),
        HW,
        packages=PKGS,
    )
    found = {f.message.split(':')[0]: f.severity for f in r.findings if f.rule == 'data.missing-local'}
    assert found == {'dataset /nonexistent/train.jsonl': 'warning', 'dataset missing.jsonl': 'info'}


@pytest.mark.slow  # imports ms-swift
def test_ms_swift_reads_those_datasets_as_local_paths():
    # the same names as above, through ms-swift's own syntax parser: a hub id stays a repo id with its sample
    from swift.dataset.dataset_syntax import DatasetSyntax

    s = DatasetSyntax.parse('AI-MO/NuminaMath-TIR#500')
    assert (s.dataset, s.dataset_sample) == ('AI-MO/NuminaMath-TIR', 500) and not looks_local(s.dataset)
    assert DatasetSyntax.parse('missing.jsonl#100').dataset == 'missing.jsonl'


def test_cli_missing_model_is_one_line_exit_2(tmp_path):
    """The launch is still read and shown (stdout), then the one line (stderr), exit 2."""
    model = '/nonexistent/my-sft-run/checkpoint-100'
    launch = f'swift rlhf --rlhf_type grpo --model {model} --reward_funcs format --dataset AI-MO/NuminaMath-TIR'
    argv = f'grpo_recipes.cli.guard check --gpus 2 --gpu-type A100-80G -- {launch} --per_device_train_batch_size 4'
    p = run_cli(*argv.split(), cwd=tmp_path)
    assert p.returncode == 2 and 'Traceback' not in p.stderr, p.stderr
    assert 'Launch plan' in p.stdout and 'micro-batch     4 completions/process' in p.stdout
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'error: --model {model}: no such directory')
    assert '--model-config' in lines[0]
