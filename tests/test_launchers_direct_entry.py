"""`python -m swift.cli.rlhf` runs ms-swift's entry file directly: NPROC_PER_NODE and NNODES are read only by
`swift rlhf` (swift/cli/main.py, which then starts torchrun), so set on a direct run they change nothing, and the
guard says that instead of calling them unset."""

import json

from conftest import run_cli

ARGS = (
    '--rlhf_type grpo --model Qwen/Qwen2.5-0.5B-Instruct --dataset AI-MO/NuminaMath-TIR#100 '
    '--reward_funcs accuracy --use_vllm true --num_generations 4'
)


def _device_findings(tmp_path, line):
    (tmp_path / 'l.sh').write_text(line + '\n')
    proc = run_cli(
        'grpo_recipes.cli.guard', 'check', '--json', '--gpus', '2', '--gpu-type', 'A100-80GB', 'l.sh', cwd=tmp_path
    )
    assert 'Traceback' not in proc.stderr, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    return [f for f in out['findings'] if f['rule'] == 'device.single-process-multi-gpu']


def test_nproc_set_on_a_direct_entry_run_is_named_as_unread(tmp_path):
    found = _device_findings(tmp_path, f'NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 python -m swift.cli.rlhf {ARGS}')
    assert len(found) == 1 and found[0]['severity'] == 'error'
    assert 'NPROC_PER_NODE=2 has no effect' in found[0]['message'], found[0]['message']
    assert 'swift rlhf' in found[0]['fix']


def test_nproc_unset_on_a_direct_entry_run_says_unset(tmp_path):
    found = _device_findings(tmp_path, f'CUDA_VISIBLE_DEVICES=0,1 python -m swift.cli.rlhf {ARGS}')
    assert len(found) == 1 and 'NPROC_PER_NODE is unset' in found[0]['message']


def test_the_same_variables_on_swift_rlhf_start_two_processes(tmp_path):
    assert _device_findings(tmp_path, f'NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 swift rlhf {ARGS}') == []
