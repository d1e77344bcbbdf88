"""The fast path's argument snapshot must be exactly what the installed ms-swift accepts."""

import importlib.metadata as md
import subprocess
import sys

import pytest
from conftest import ROOT

from grpo_recipes import SWIFT_VERSION_LINE, swift_args


def test_installed_swift_is_the_pinned_line():
    assert md.version('ms-swift').startswith(SWIFT_VERSION_LINE + '.')


@pytest.mark.long
def test_snapshot_has_no_drift():
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'scripts' / 'gen_swift_snapshot.py'), '--check'],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]


ARGVS = [
    [
        '--rlhf_type',
        'grpo',
        '--use_vllm',
        'true',
        '--vllm_mode',
        'colocate',
        '--reward_funcs',
        'accuracy',
        'format',
        '--num_generations',
        '8',
        '--per_device_train_batch_size',
        '4',
        '--beta=0',
        '--vllm_server_port',
        '8000',
        '8001',
    ],
    ['--rlhf_type', 'grpo', '--use_vllm', '--sleep_level', '1', '--no_remove_unused_columns', '--tuner_ty', 'full'],
    ['--rlhf_type', 'grpo', '--train_type', 'lora', '--gpu_memory_utilization', '0.5', '--torch_dtype', 'bfloat16'],
    ['--truncation_strategy', 'left', '--max-completion-length', '2048', '--deepspeed', 'zero3', '--report_to', 'none'],
]


@pytest.fixture(scope='module')
def hf_parser():
    from swift.arguments import RLHFArguments
    from swift.utils.utils import _patch_get_type_hints
    from transformers import HfArgumentParser

    with _patch_get_type_hints():
        return HfArgumentParser([RLHFArguments])


@pytest.mark.parametrize('argv', ARGVS)
def test_fast_parse_equals_ms_swift_split(hf_parser, argv):
    ns, remaining = hf_parser.parse_known_args(list(argv))
    ours, our_remaining = swift_args.parse(argv)
    assert our_remaining == remaining
    theirs = {k: (v.value if hasattr(v, 'value') else v) for k, v in vars(ns).items()}
    for k, v in theirs.items():
        if isinstance(v, (bool, int, float, str, list, type(None))):
            assert ours[k] == v, k


def test_unknown_arguments_get_suggestions():
    _, remaining = swift_args.parse(ARGVS[2])
    found = {u.flag: u.suggestion for u in swift_args.explain_remaining(remaining)}
    assert found == {'--train_type': '--tuner_type', '--gpu_memory_utilization': '--vllm_gpu_memory_utilization'}
    typo = swift_args.explain_remaining(['--vllm_gpu_memory_utilisation', '0.5', '--tensor_parallel_size', '2'])
    assert [u.suggestion for u in typo] == ['--vllm_gpu_memory_utilization', '--vllm_tensor_parallel_size']


def test_ambiguous_abbreviation_names_the_candidates_ms_swift_names(hf_parser, capsys):
    # ms-swift's parser stops on it (argparse allow_abbrev); the fast path makes it a finding with the same candidates
    argv = ['--rlhf_type', 'grpo', '--num_generation', '4', '--per_device_train_batch_size', '4']
    with pytest.raises(SystemExit):
        hf_parser.parse_known_args(list(argv))
    real = capsys.readouterr().err.strip().splitlines()[-1]
    assert 'ambiguous option: --num_generation could match' in real
    values, remaining = swift_args.parse(argv)
    assert remaining == ['--num_generation', '4'] and values['per_device_train_batch_size'] == 4
    (u,) = swift_args.explain_remaining(remaining)
    assert u.stops.endswith(real.split('error: ', 1)[1] + '`') and u.suggestion == '--num_generations'
