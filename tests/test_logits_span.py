"""The training forward's logits window, held to ms-swift itself (a real ``swift rlhf`` GRPO run on CPU, ms-swift 4.6,
the tiny Qwen2 of tests/tiny_model.py) and to TRL's code.

ms-swift pads each sequence on the right and keeps logits from the micro-batch's earliest first label on
(swift/rlhf_trainers/utils.py ``collate_to_grpo_micro_batch``), so a micro-batch that holds several prompts makes
logits for its longest prompt less its shortest beyond the completions. The run wraps that function in the trainer's
namespace with the plugin ``bench/bench_swift_gpu.py`` loads into every GPU run (``PEAKS_PLUGIN``, an
``--external_plugins`` file, which ms-swift imports in the training process) and records, per micro-batch, its
prompts' spread, its longest sequence and completion (from the labels) and the ``logits_to_keep`` ms-swift chose; the
guard's ``logits_rows`` must give the same window for that micro-batch's longest prompt and completion and its
shortest prompt. Nothing is mocked: the run is ms-swift's own.
"""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import load_script

from grpo_recipes.config import GRPOConfig
from grpo_recipes.frontends import FRAMEWORKS
from grpo_recipes.memory.arch import Arch
from grpo_recipes.memory.inputs import Inputs
from grpo_recipes.memory.trainer import logits_from, logits_rows

ROOT = Path(__file__).resolve().parent.parent
# the plugin bench/bench_swift_gpu.py loads into every GPU run: it records each micro-batch's window from ms-swift's
# own collate, so this run also checks what the GPU bench records
PLUGIN = load_script('bench/bench_swift_gpu.py').PEAKS_PLUGIN
# the window does not depend on the model: any architecture serves Inputs
TINY_ARCH = Arch.from_config(
    {'hidden_size': 64, 'num_hidden_layers': 2, 'num_attention_heads': 4, 'intermediate_size': 128, 'vocab_size': 512}
)


@pytest.fixture(scope='module')
def swift_run(tiny_qwen2, tmp_path_factory):
    """Each training micro-batch of a real 2-step ms-swift GRPO run: per-sample (prompt, completion) lengths and
    ms-swift's logits_to_keep. Micro-batch 4 with num_generations 2: two prompts in each micro-batch."""
    tmp = tmp_path_factory.mktemp('logits-span')
    data = tmp / 'data.jsonl'
    # prompts of very different lengths, so the micro-batches' prompts differ
    qs = ['What is 1 + 1?', 'What is ' + ' + '.join(str(i) for i in range(40)) + '?'] * 8
    data.write_text(
        ''.join(json.dumps({'messages': [{'role': 'user', 'content': q}], 'solution': '1'}) + '\n' for q in qs)
    )
    plugin = tmp / 'plugin.py'
    plugin.write_text(PLUGIN)
    peaks = tmp / 'peaks.json'  # the plugin writes each window to peaks.json.windows
    argv = (
        f'--model {tiny_qwen2} --rlhf_type grpo --tuner_type full --torch_dtype float32 --beta 0 --num_generations 2 '
        '--per_device_train_batch_size 4 --gradient_accumulation_steps 1 --max_length 512 --max_completion_length 8 '
        '--use_vllm false --reward_funcs accuracy --model_type qwen2 --template qwen2_5 --max_steps 2 '
        '--logging_steps 1 --save_strategy no --split_dataset_ratio 0 --report_to none --dataloader_num_workers 0 '
        f'--dataset_num_proc 1 --dataset {data} --output_dir {tmp / "out"} --external_plugins {plugin}'
    ).split()
    env = {**os.environ, 'GRPO_BENCH_PEAKS': str(peaks), 'CUDA_VISIBLE_DEVICES': ''}
    r = subprocess.run(
        [sys.executable, '-m', 'swift.cli.rlhf', *argv], env=env, capture_output=True, text=True, timeout=600, cwd=tmp
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return {
        'argv': argv,
        **{
            part: [json.loads(x) for x in Path(f'{peaks}.{part}').read_text().splitlines()]
            for part in ('windows', 'phases')
        },
    }


@pytest.fixture(scope='module')
def swift_windows(swift_run):
    return swift_run['windows']


def test_the_plugin_marks_each_phase_of_each_step(swift_run):
    """The GPU bench reads what each phase leaves from these boundaries (allocator figures are added on a GPU): each
    of the 2 steps generates, then takes its one micro-batch's loss (after the no-grad passes), then its backward."""
    phases = [p['phase'] for p in swift_run['phases'] if p['phase'] != 'logps']
    assert phases == ['generate_start', 'generate_end', 'loss_start', 'backward_end'] * 2, phases


def test_the_no_grad_passes_before_each_loss_are_those_the_trace_runs(swift_run):
    """The guard's trace runs, before each micro-batch's loss, the no-grad forwards ms-swift runs: the old policy's
    log-probabilities where ``plan.old_logprobs_needed`` says the framework computes them, and the reference's when
    beta != 0. The run (beta 0, read here through the guard's own front end from its argv) must make exactly that
    many no-grad log-probability forwards between generation and each loss, and one with autograd inside it."""
    from grpo_recipes.check import check_launch
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.hardware import Hardware
    from grpo_recipes.plan import old_logprobs_needed

    report = check_launch(read_launch(['swift', 'rlhf', *swift_run['argv']], environ={}), Hardware(gpus=1))
    expected = int(old_logprobs_needed(report.cfg, report.plan, 'swift')) + int(report.cfg.beta != 0)
    assert expected == 1  # beta 0: the old policy's pass alone
    steps, current = [], None
    for p in swift_run['phases']:
        if p['phase'] == 'generate_end':
            current = {'no_grad': 0, 'grad': 0}
            steps.append(current)
        elif p['phase'] == 'logps' and current is not None:
            current['grad' if p['grad'] else 'no_grad'] += 1
    assert steps == [{'no_grad': expected, 'grad': 1}] * 2, steps


def test_swift_logits_span_the_micro_batchs_prompts(swift_windows):
    cfg = GRPOConfig(per_device_train_batch_size=4, num_generations=2, max_completion_length=8)
    assert swift_windows, 'the plugin saw no training micro-batch'
    spanned = 0
    for w in swift_windows:
        assert w['micro_batch'] == 4
        longest, shortest = w['prompt_max'], w['prompt_min']
        longest_seq, c = w['sequence_max'], w['completion_max']
        inp = Inputs(
            arch=TINY_ARCH,
            capacity_gib=80,
            prompt_len=longest,
            logits_from_prompt=logits_from(cfg, FRAMEWORKS['swift'].logits_span_prompts, shortest),
        )
        rows = logits_rows(replace(cfg, max_completion_length=c), inp)
        # the guard plans every completion at the micro-batch's longest; ms-swift's window is the longest sequence
        # less the shortest prompt, the same when the longest prompt's completion is the longest
        assert w['logits_to_keep'] == longest_seq - shortest
        assert w['logits_to_keep'] <= rows
        if longest_seq == longest + c:
            assert w['logits_to_keep'] == rows
        spanned += longest > shortest
    assert spanned, 'no micro-batch mixed prompts of different lengths: the run did not test the span'


def test_one_prompt_per_micro_batch_and_trl_span_the_completions_only():
    # a micro-batch that divides num_generations holds one prompt's completions (ms-swift cuts the batch in order)
    assert logits_from(GRPOConfig(per_device_train_batch_size=4, num_generations=8), True, 30) is None
    assert logits_from(GRPOConfig(per_device_train_batch_size=16, num_generations=8), True, 30) == 30
    # planned for micro-batch 16, then a fix's micro-batch 2: its micro-batches hold one prompt again
    inp = Inputs(arch=TINY_ARCH, capacity_gib=80, prompt_len=200, logits_from_prompt=30)
    assert (
        logits_rows(GRPOConfig(per_device_train_batch_size=16, num_generations=8, max_completion_length=512), inp)
        == 682
    )
    assert (
        logits_rows(GRPOConfig(per_device_train_batch_size=2, num_generations=8, max_completion_length=512), inp) == 512
    )
    # TRL pads prompts on the left and keeps logits for the completion ids only
    # (trl/trainer/grpo_trainer.py: logits_to_keep = completion_ids.size(1))
    import inspect

    import trl.trainer.grpo_trainer as g

    assert 'logits_to_keep = completion_ids.size(1)' in inspect.getsource(g)
    assert FRAMEWORKS['trl'].logits_span_prompts is False
    assert logits_from(GRPOConfig(per_device_train_batch_size=16, num_generations=8), False, 30) is None


def test_calibrate_plans_the_windows_a_run_recorded():
    """A GPU case that records its micro-batches' windows (bench_swift_gpu.py's plugin) is predicted at the largest
    window it made, not at the data's worst span: the same figure as a case whose data spans exactly that window."""
    from grpo_recipes.memory.calibrate import predict
    from grpo_recipes.memory.cases import load_cases

    case = next(
        c
        for c in load_cases(ROOT / 'bench' / 'results' / 'gpu-h200-2026-11-27-grid.jsonl')
        if c['id'] == 'bench-swift-gpu-grid-qwen2.5-1.5b-full-bs32-c512'
    )
    worst = predict(case)['quantities']['allocated_gib']
    seen = [
        {'logits_to_keep': 566, 'prompt_max': 127, 'prompt_min': 73, 'completion_max': 512, 'micro_batch': 32},
        {'logits_to_keep': 549, 'prompt_max': 110, 'prompt_min': 73, 'completion_max': 512, 'micro_batch': 32},
    ]
    recorded = predict({**case, 'outcome': {**case['outcome'], 'logits_windows': seen}})['quantities']
    spanned = predict({**case, 'prompt_tokens': {'min': 73, 'max': 127}})['quantities']
    assert recorded == spanned
    assert recorded['allocated_gib'] < worst  # the data's worst span is 187 - 73 = 114 tokens, the run's 54


def test_a_run_whose_window_grew_later_is_scored_as_a_bound():
    """The H200 run of 2026-11-27 (Qwen2.5-1.5B full 32 x 512, 3 steps at windows 566, 550, 568) reserved 105.6 GiB
    with 54.7 allocated: the third step's longer window made new logits segments that torch kept because the card
    had room. Its peak bounds the prediction from above; the same run cut after the second window is a point."""
    from grpo_recipes.memory.calibrate import predict
    from grpo_recipes.memory.cases import load_cases
    from grpo_recipes.memory.scoring import score

    case = next(
        c
        for c in load_cases(ROOT / 'bench' / 'results' / 'gpu-h200-2026-11-27-phases.jsonl')
        if c['id'] == 'bench-swift-gpu-grid-qwen2.5-1.5b-full-bs32-c512-steps3'
    )
    assert [w['logits_to_keep'] for w in case['outcome']['logits_windows']] == [566, 550, 568]
    assert '568 positions' in predict(case)['peak_floor']
    first_two = {**case, 'outcome': {**case['outcome'], 'logits_windows': case['outcome']['logits_windows'][:2]}}
    assert 'peak_floor' not in predict(first_two)
    result = score([case])
    (row,) = result['per_case']
    assert row['peak']['bound_held'] and row['device_floor_held']
    assert result['peak_bounds'] == 1 and result['peak_cases'] == 0 and result['device_cases'] == 0
