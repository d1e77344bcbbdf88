"""ms-swift by release: releases.json holds the `swift rlhf` arguments of every 3.x/4.x minor release, read from each
release's source with ast (scripts/gen_swift_release_snapshots.py), and a launch is judged by its release's own.

The differential tests hold the ast extraction to the real parsers: run on the installed ms-swift 4.6 it must give
exactly the argparse options ms-swift's own HfArgumentParser builds (swift_args_snapshot.json, itself checked against
the installed parser by test_snapshot.py), and releases.json's 4.6.0 and 3.10.3 entries must give those of 4.6 and of
ms-swift 3.10.3's real parser (swift_args_snapshot_3.10.json, generated under 3.10.3)."""

import json

import pytest
from conftest import load_script, run_cli

from grpo_recipes import swift_args
from grpo_recipes.frontends.swift import versions


def _gen():
    return load_script('scripts/gen_swift_release_snapshots.py')


def _differences(ours: list[dict], real: list[dict]) -> list:
    """Every option, and every property argparse acts on, that differs (defaults where ast read a literal)."""
    key = lambda e: (e['dest'], e['action'])  # noqa: E731
    o, r = {key(e): e for e in ours}, {key(e): e for e in real}
    out = [('only ast', k) for k in sorted(set(o) - set(r))] + [('only real', k) for k in sorted(set(r) - set(o))]
    for k in sorted(set(o) & set(r)):
        for f in ('flags', 'type', 'nargs', 'choices', 'const', 'required'):
            if o[k].get(f) != r[k].get(f):
                out.append((k, f, o[k].get(f), r[k].get(f)))
        if 'default_expr' not in o[k] and o[k].get('default') is not None and o[k]['default'] != r[k]['default']:
            out.append((k, 'default', o[k]['default'], r[k]['default']))
    return out


def test_ast_extraction_of_the_installed_ms_swift_equals_its_own_parser():
    ours = _gen().installed()
    real = swift_args.snapshot()['arguments']
    assert len(ours) == len(real) == 507
    assert _differences(ours, real) == []


@pytest.mark.parametrize(
    'release,snapshot', [('4.6.0', swift_args.SNAPSHOT_FILE), ('3.10.3', 'swift_args_snapshot_3.10.json')]
)
def test_release_entries_equal_the_real_parsers(release, snapshot):
    ours = swift_args.snapshot(swift_args.RELEASE_PREFIX + release)['arguments']
    real = swift_args.snapshot(snapshot)['arguments']
    assert {e['dest'] for e in ours} == {e['dest'] for e in real}
    assert _differences(ours, real) == []


def test_every_minor_release_is_covered():
    minors = [tuple(map(int, v.split('.')[:2])) for v in versions.known_releases()]
    assert minors == [(3, m) for m in range(13)] + [(4, m) for m in range(7)]
    assert versions.known_releases()[-1] == swift_args.snapshot()['ms_swift_version']


LAUNCH = [
    '--',
    'CUDA_VISIBLE_DEVICES=0,1,2,3',
    'NPROC_PER_NODE=4',
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
    '--vllm_gpu_memory_utilization',
    '0.5',
    '--vllm_max_model_len',
    '2048',
    '--max_length',
    '512',
    '--max_completion_length',
    '1024',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '4',
    '--reward_funcs',
    'accuracy',
    'format',
    '--sleep_level',
    '1',
]
HW = ['--gpus', '4', '--gpu-type', 'A100-80G']


def check(*args):
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW, *args)
    assert 'Traceback' not in proc.stderr, proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def errors(out):
    return {f['rule']: f for f in out['findings'] if f['severity'] == 'error'}


def test_an_argument_of_3_3_is_known_to_3_3_and_quoted_by_release_on_3_10():
    # 3.3 has no --vllm_mode (vLLM ran inside the trainer); --gc_collect_after_offload is in 3.2 to 3.9
    argv = [a for a in LAUNCH if a not in ('--vllm_mode', 'colocate')]
    argv += ['--train_type', 'lora', '--gc_collect_after_offload', 'true']
    rc, out = check('--swift-version', '3.3.1', *argv)
    assert 'args.unknown' not in errors(out)
    rc, out = check('--swift-version', '3.10.3', *argv)
    assert errors(out)['args.unknown']['message'].startswith(
        '--gc_collect_after_offload: ms-swift 3.10.3 has no argument --gc_collect_after_offload (removed in ms-swift '
        '3.10)'
    )


def test_an_argument_a_release_does_not_have_yet():
    rc, out = check('--swift-version', '4.3.2', *LAUNCH, '--min_p', '0.05')
    assert 'ms-swift 4.3.2 has no argument --min_p (it came in ms-swift 4.5)' in errors(out)['args.unknown']['message']
    rc, out = check('--swift-version', '4.5.3', *LAUNCH, '--min_p', '0.05')
    assert 'args.unknown' not in errors(out)


@pytest.mark.parametrize('version', ['4.7', '5.0'])
def test_a_release_newer_than_the_newest_known_is_read_as_4_6(version):
    rc, out = check('--swift-version', version, *LAUNCH)
    assert rc == 0, errors(out)
    assert (
        f"ms-swift {version} is newer than the newest release the guard knows (4.6.x); its arguments are read as 4.6's"
    ) in out['launch']['notes']
    assert out['config']['vllm_max_num_seqs'] is None  # 4.x semantics, not 3.10's 256
    rc, out = check('--swift-version', version, *LAUNCH, '--train_type', 'lora')
    assert 'use --tuner_type' in errors(out)['args.unknown']['message']  # never read as a 3.x release


def test_a_release_older_than_3_0_is_refused_in_one_line():
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW, '--swift-version', '2.6.1', *LAUNCH)
    assert proc.returncode == 2 and 'Traceback' not in proc.stderr
    assert proc.stderr.strip().count('\n') == 0 and 'ms-swift 2.6.1: older than 3.0' in proc.stderr


def test_3_11_and_later_require_vllm_mode_as_4_x_does():
    # swift/llm/argument/rlhf_args.py (3.11.3, 3.12.6): "vllm_mode is required when use_vllm is true"; 3.10 defaults it
    argv = [a for a in LAUNCH if a not in ('--vllm_mode', 'colocate')] + ['--train_type', 'lora']
    rc, out = check('--swift-version', '3.12.6', *argv)
    assert 'vllm.mode' in errors(out) and out['config']['vllm_mode'] is None
    rc, out = check('--swift-version', '3.10.3', *argv)
    assert 'vllm.mode' not in errors(out) and out['config']['vllm_mode'] == 'colocate'


AMBIGUOUS_YAML = """rlhf_type: grpo
model: Qwen/Qwen2.5-7B-Instruct
num_generation: 4
per_device_train_batch_size: 4
reward_funcs: [accuracy]
lora_rnak: 8
"""


def test_an_ambiguous_yaml_key_is_a_finding_and_the_check_goes_on(tmp_path):
    cfg = tmp_path / 'grpo.yaml'
    cfg.write_text(AMBIGUOUS_YAML)
    rc, out = check(str(cfg))
    assert rc == 1
    f = {x['arguments'][0]: x for x in out['findings'] if x['rule'] == 'args.unknown'}
    msg = f['num_generation']['message']
    assert msg.startswith(
        '--num_generation: ambiguous to ms-swift 4.6; use --num_generations (it abbreviates '
        '--num_generations and --num_generations_eval)'
    )
    assert 'ambiguous option: --num_generation could match' in msg and f['num_generation']['severity'] == 'error'
    assert 'lora_rnak' in f  # the other findings are still there, and the plan
    assert out['plan']['world_size'] == 1 and out['config']['per_device_train_batch_size'] == 4
    # --ignore_args_error does not help: argparse stops before ms-swift looks at the leftovers
    cfg.write_text(AMBIGUOUS_YAML + 'ignore_args_error: true\n')
    rc, out = check(str(cfg))
    f = {x['arguments'][0]: x for x in out['findings'] if x['rule'] == 'args.unknown'}
    assert f['num_generation']['severity'] == 'error' and f['lora_rnak']['severity'] == 'warning'


def test_an_abbreviation_is_read_by_the_release_that_has_one_match():
    # 3.10.3 has no --num_generations_eval (3.12 added it): --num_generation is num_generations there
    argv = [a if a != '--num_generations' else '--num_generation' for a in LAUNCH] + ['--train_type', 'lora']
    argv = [a if a != '8' else '4' for a in argv]
    rc, out = check('--swift-version', '3.10.3', *argv)
    assert 'args.unknown' not in errors(out) and out['config']['num_generations'] == 4
    rc, out = check(*[a if a != '--train_type' else '--tuner_type' for a in argv])
    assert 'ambiguous to ms-swift 4.6' in errors(out)['args.unknown']['message']


@pytest.mark.parametrize(
    'given,judged,note',
    [
        ('3', '3.0.3', None),
        ('3.5', '3.5.3', None),
        ('3.4.1', '3.4.1.post1', None),
        ('4.6.0', '4.6.0', None),
        ('3.5.2', '3.5.3', "ms-swift 3.5.2: its arguments are checked against ms-swift 3.5.3's"),
        (
            '3.13.1',
            '3.12.6',
            "ms-swift 3.13.1: not a release the guard knows; its arguments are read as ms-swift 3.12.6's",
        ),
        ('4.7.0', '4.6.0', 'ms-swift 4.7.0 is newer than the newest release the guard knows (4.6.x)'),
    ],
)
def test_which_release_judges_a_version(given, judged, note):
    release, said = versions.judged_release(given)
    assert release == judged and (said is None if note is None else said.startswith(note))


@pytest.mark.parametrize(
    'version,source',
    [
        ('4.6.0', 'swift/rlhf_trainers/args_mixin.py::_init_generation_batch_params'),
        ('4.1.3', 'swift/rlhf_trainers/arguments.py::GRPOConfig.check_num_generations'),
        ('3.10.3', 'swift/trainers/rlhf_arguments.py::GRPOConfig.check_num_generations'),
    ],
)
def test_the_batch_message_is_the_judged_release_s_own(version, source):
    i = LAUNCH.index('--num_generations')
    argv = LAUNCH[: i + 1] + ['5'] + LAUNCH[i + 2 :]
    rc, out = check('--swift-version', version, *argv)
    f = errors(out)['batch.num-generations-divides']
    assert f['source'] == source
    if version == '4.6.0':
        assert (
            f['message'] == 'generation_batch_size (16) must be evenly divisible by num_generations (5). Valid '
            'values: [2, 4, 8, 16].'
        )
    else:  # check_num_generations (3.5 to 4.1): the effective batch, world x per-device x steps_per_generation
        assert f['message'].startswith(
            'The effective train batch size (4 x 4 x 1) must be evenly divisible by the '
            'number of generations per prompt (5).'
        )
