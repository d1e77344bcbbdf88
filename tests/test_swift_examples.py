"""ms-swift's own GRPO example scripts (../shared/swift-examples, copied unchanged from ms-swift's
repository), each checked as written on the hardware its header states (cases.tsv). These are launches
nobody here wrote: the guard must accept them, unless it can name a concrete, sourced reason.

Each script is read as a launcher (its env prefixes, exports and its commented `swift rollout` command);
models the project does not ship come from the corpus's config.json files."""

import shlex
from pathlib import Path

import pytest
from conftest import run_cli

CORPUS = Path(__file__).resolve().parents[2] / 'shared' / 'swift-examples'
if not CORPUS.is_dir():
    CORPUS = Path(__file__).resolve().parents[1].parent / 'shared' / 'swift-examples'


def cases():
    if not (CORPUS / 'cases.tsv').is_file():
        return []
    out = []
    for line in (CORPUS / 'cases.tsv').read_text().splitlines():
        if line.startswith('#') or not line.strip():
            continue
        script, flags, _ = line.split('\t')
        out.append(pytest.param(script, flags, id=Path(script).stem))
    return out


# Where the guard refuses an official example, the finding and its source. Each is a launch the guard
# is sure cannot run as written on the hardware assumed for it.
REFUSED = {
    # No hardware in its header; on A100-80G (the corpus's assumption) the trainer holds the policy and
    # the beta=0.04 reference model (2 x 14.2 GiB), ZeRO-2 states at 8 ranks (2P + 18P/N, DeepSpeed's
    # estimate_zero2_model_states_mem_needs) and, with sleep_level 0, vLLM's whole 0.5 x 79.2 GiB
    # reservation, which vLLM >= 0.10 takes on top of the trainer (vllm/v1/worker/gpu_worker.py:
    # requested_memory = gpu_memory_utilization x total). About 92 GiB of a 79.2 GiB card.
    'multi_node__colocate_multi_node1': 'memory.oom',
}


def model_flags(script_text: str) -> list[str]:
    for word in script_text.split():
        if word.startswith('Qwen/'):
            d = CORPUS / 'models' / word.split('/')[-1]
            return ['--model-config', str(d)] if d.is_dir() else []
    return []


@pytest.mark.skipif(not cases(), reason='../shared/swift-examples not present')
@pytest.mark.parametrize('script, flags', cases())
def test_official_example_is_accepted_on_its_hardware(script, flags):
    path = CORPUS / script
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(path),
        *shlex.split(flags),
        *model_flags(path.read_text()),
        '--json',
        env={'COLUMNS': '80'},
    )
    import json

    report = json.loads(proc.stdout)
    errors = [(f['rule'], f['message']) for f in report['findings'] if f['severity'] == 'error']
    stem = Path(script).stem
    if stem in REFUSED:
        assert proc.returncode == 1 and REFUSED[stem] in {r for r, _ in errors}, errors
        return
    assert proc.returncode == 0, errors or report.get('memory_unchecked')
    assert report['memory'], 'memory must be checked, not skipped'
    assert report['assumptions'], 'the verdict states what it assumed'


@pytest.mark.skipif(not cases(), reason='../shared/swift-examples not present')
def test_server_example_reads_its_rollout_command():
    # external/grpo_7b.sh: the rollout is in the header comment, with the 3.x flag --data_parallel_size 2
    path = CORPUS / 'scripts' / 'external__grpo_7b.sh'
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(path), '--gpus', '8', '--gpu-type', 'A100-80G', '--json')
    import json

    report = json.loads(proc.stdout)
    r = report['launch']['rollout']
    assert r['gpus'] == [6, 7] and r['data_parallel_size'] == 2 and r['source'].endswith(':2 (comment)')
    assert report['hardware']['rollout_gpus'] == [6, 7]
    assert 'device.rollout-count' not in {f['rule'] for f in report['findings']}  # DP 2 on 2 GPUs
    stale = next(f for f in report['findings'] if f['rule'] == 'rollout.unknown-argument')
    assert stale['severity'] == 'warning' and '--vllm_data_parallel_size' in stale['message']


def test_rollout_server_checked_on_its_own():
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--',
        'env',
        'CUDA_VISIBLE_DEVICES=6',
        'swift',
        'rollout',
        '--model',
        'Qwen/Qwen2.5-7B-Instruct',
        '--vllm_data_parallel_size',
        '2',
        '--vllm_max_model_len',
        '16384',
        env={'COLUMNS': '80'},
    )
    assert proc.returncode == 1
    assert 'local_device_count (1) must be greater than or equal to the product of' in ' '.join(proc.stdout.split())
    ok = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--',
        'CUDA_VISIBLE_DEVICES=6,7',
        'swift',
        'rollout',
        '--model',
        'Qwen/Qwen2.5-7B-Instruct',
        '--vllm_data_parallel_size',
        '2',
        '--vllm_max_model_len',
        '16384',
    )
    assert ok.returncode == 0, ok.stdout


def test_text_output_reads_whole_at_80_columns_when_piped():
    path = CORPUS / 'scripts' / 'multi_node__colocate_multi_node1.sh'
    if not path.is_file():
        pytest.skip('../shared/swift-examples not present')
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(path),
        '--gpus',
        '4',
        '--gpu-type',
        'A100-80G',
        '--model-config',
        str(CORPUS / 'models' / 'Qwen2.5-Math-7B'),
        env={'COLUMNS': '80'},
    )
    lines = proc.stdout.splitlines()
    assert max(len(ln) for ln in lines) <= 80
    assert '…' not in proc.stdout, [ln for ln in lines if '…' in ln]
    row = next(ln for ln in lines if ln.strip().startswith('0-3'))
    assert 'train+vllm' in row and 'OOM' in row
    wide = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(path),
        '--gpus',
        '4',
        '--gpu-type',
        'A100-80G',
        '--model-config',
        str(CORPUS / 'models' / 'Qwen2.5-Math-7B'),
        env={'COLUMNS': '132'},
    )
    assert max(len(ln) for ln in wide.stdout.splitlines()) > 100  # COLUMNS is honoured when piped too


def test_near_the_limit_is_a_tight_warning_not_a_plain_fit():
    from helpers import make

    from grpo_recipes.hardware import Hardware

    # grow the micro-batch until the single training GPU is just under its capacity
    last = None
    for bs in range(2, 128, 2):
        _, report = make(
            {'per_device_train_batch_size': bs, 'num_generations': 2},
            hw=Hardware(gpus=8, gpu_type='A100-80G', source='flags'),
        )
        assert report.memory, report.memory_unchecked
        m = report.memory[0]
        if not m.fits:
            break
        last = (m, report)
    m, report = last
    tight = [f for f in report.findings if f.rule == 'memory.tight']
    assert m.peak_fraction > 0.88 and tight and tight[0].severity == 'warning'
    assert f'{m.peak_fraction:.1%}' in tight[0].message


@pytest.mark.skipif(not cases(), reason='../shared/swift-examples not present')
def test_long_completion_warning_quotes_both_prompt_bounds():
    # internal/qlora.sh (3B, micro-batch 4, completions up to 8192, max_length 2048): the OOM needs completions
    # near the limit, so it is a warning quoting the longest completion that fits with 2048-token prompts and
    # with short ones (the decision is taken with short prompts). On A100-40G: the script runs ZeRO-2, under which the
    # logits stay 16-bit (accelerate adds no fp32 copy), so on A100-80G even full-length completions now fit (62%)
    import json

    path = CORPUS / 'scripts' / 'internal__qlora.sh'
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(path),
        '--gpus',
        '4',
        '--gpu-type',
        'A100-40G',
        *model_flags(path.read_text()),
        '--json',
    )
    f = next(f for f in json.loads(proc.stdout)['findings'] if f['rule'] == 'memory.oom-if-long-completions')
    import re

    m = re.search(
        r'under ([\d,]+) tokens \(\d+% of the limit\) with prompts of 2,048 tokens \(max_length\), '
        r'([\d,]+) with short prompts',
        f['message'],
    )
    assert m, f['message']
    at_long, at_short = (int(x.replace(',', '')) for x in m.groups())
    assert 4096 <= at_long <= at_short < 8192
