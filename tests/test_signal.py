"""rules/signal.py: the predicted share of all-equal reward groups and informative prompts per optimizer step,
held to hand calculations."""

import json

import pytest
from conftest import ROOT, run_cli
from helpers import PACKAGES_OK, make

from grpo_recipes.check import check_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.rules.signal import all_equal_probability, zero_variance_share

HW = Hardware(gpus=8, gpu_type='A100-80G', source='flags')


def check(overrides=None, pass_rate=None, data_stats=None):
    launch, _ = make(overrides)
    return check_launch(launch, HW, packages=PACKAGES_OK, pass_rate=pass_rate, data_stats=data_stats)


def finding(report, rule_id):
    return next((f for f in report.findings if f.rule == rule_id), None)


def test_all_equal_probability_by_hand():
    # 0.9^8 + 0.1^8 = 0.43046721 + 0.00000001
    assert all_equal_probability(0.9, 8) == pytest.approx(0.43046722, abs=1e-9)
    assert all_equal_probability(0.5, 4) == pytest.approx(0.125)
    assert all_equal_probability(1.0, 8) == 1.0 and all_equal_probability(0.0, 8) == 1.0
    # prompts at 0, 0.5, 1 and 0.75, G 8: (1 + 2/256 + 1 + 0.75^8 + 0.25^8) / 4
    by_hand = (1 + 2 / 256 + 1 + 0.100112915 + 0.0000152588) / 4
    assert zero_variance_share([0.0, 0.5, 1.0, 0.75], 8) == pytest.approx(by_hand, abs=1e-9)


def test_few_informative_prompts_warns_with_the_fixes():
    # 8 completions per micro-batch x GA 2, 1 process, G 8: 2 prompts per step; 2 x (1 - 0.43046722) = 1.14 < 2
    r = check({'gradient_accumulation_steps': 2}, pass_rate=0.9)
    est = finding(r, 'signal.estimate')
    assert est is not None and '43%' in est.message and '1.1 of 2 prompts' in est.message
    w = finding(r, 'signal.few-informative-prompts')
    assert w is not None and w.severity == 'warning'
    # (1 + n) x 0.5695 >= 1 needs n = 1
    assert 'dynamic_sample: true' in w.fix and 'max_resample_times: 1' in w.fix
    assert 'num_generations: 16' in w.fix and '--keep-pass-rate' in w.fix


def test_enough_signal_or_dynamic_sample_that_fills_the_batch_is_quiet():
    # GA 8: 8 prompts x 0.5695 = 4.6 informative
    r = check({'gradient_accumulation_steps': 8}, pass_rate=0.9)
    assert finding(r, 'signal.few-informative-prompts') is None and '4.6 of 8' in finding(r, 'signal.estimate').message
    # dynamic sampling: 4 rollouts x 0.5695 >= 1, so the batch fills (about 1 / 0.5695 = 1.8 rollouts)
    r = check({'gradient_accumulation_steps': 2, 'dynamic_sample': True}, pass_rate=0.9)
    assert finding(r, 'signal.few-informative-prompts') is None
    assert 'about 1.8 rollouts' in finding(r, 'signal.estimate').message


def test_dynamic_sample_that_runs_out_of_retries_still_warns():
    # p 0.99: share 0.99^8 + 0.01^8 = 0.9227; 4 rollouts find 4 x 0.0773 = 0.31 batches -> falls back
    r = check({'gradient_accumulation_steps': 2, 'dynamic_sample': True}, pass_rate=0.99)
    w = finding(r, 'signal.few-informative-prompts')
    assert w is not None and 'max_resample_times: 12' in w.fix  # ceil(1 / 0.0773) - 1 = 12
    assert 'falls back to the original batch' in finding(r, 'signal.estimate').message


def test_no_pass_rates_no_signal_findings():
    r = check({'gradient_accumulation_steps': 2})
    assert finding(r, 'signal.estimate') is None and finding(r, 'signal.few-informative-prompts') is None


def test_guard_reads_the_pass_rates_grpo_data_stats_writes(tmp_path):
    data = ROOT / 'tests' / 'data' / 'passrate' / 'tiny_cpu_train.jsonl'
    log = ROOT / 'tests' / 'data' / 'passrate' / 'tiny_cpu_completions.jsonl'
    stats = run_cli('data_tools.cli', 'stats', str(data), '--completions', str(log), '--json', '--quiet')
    assert stats.returncode == 0, stats.stderr
    (tmp_path / 'stats.json').write_text(stats.stdout)
    recipe = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-80g.yaml'
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(recipe),
        '--gpus',
        '2',
        '--gpu-type',
        'A100-80G',
        '--data-stats',
        str(tmp_path / 'stats.json'),
        '--json',
    )
    findings = {f['rule']: f for f in json.loads(proc.stdout)['findings']}
    # two prompts, both at pass rate 0: every group all wrong -> share 100%, no informative prompt even after
    # dynamic sampling's 6 rollouts
    assert "2 prompts' pass rates from --data-stats" in findings['signal.estimate']['message']
    assert '100%' in findings['signal.estimate']['message']
    assert 'signal.few-informative-prompts' in findings


def test_pass_rate_flag_is_range_checked():
    recipe = ROOT / 'recipes' / 'qwen2.5-7b-instruct' / 'lora-2xa100-80g.yaml'
    proc = run_cli(
        'grpo_recipes.cli.guard', 'check', str(recipe), '--gpus', '2', '--gpu-type', 'A100-80G', '--pass-rate', '92'
    )
    assert proc.returncode == 2 and 'between 0 and 1' in proc.stderr
