"""The throughput planner (grpo_recipes/speed): behaviour, not timings. Nothing here times anything; every figure is
the model's arithmetic on a typed config."""

import json
from dataclasses import replace

import pytest
from conftest import EXAMPLE, run_cli
from helpers import BASE, PACKAGES_OK, make

from grpo_recipes.check import check_launch
from grpo_recipes.config import GRPOConfig
from grpo_recipes.frontends.swift.reader import launch_from_mapping
from grpo_recipes.gpus import CATALOGUE
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.arch import Arch
from grpo_recipes.models import load_model_config
from grpo_recipes.plan import build_plan
from grpo_recipes.speed.attach import completion_lengths
from grpo_recipes.speed.model import SpeedInputs, predict
from grpo_recipes.speed.specs import SPECS

QWEN7B = Arch.from_config(load_model_config('Qwen/Qwen2.5-7B-Instruct'))
H100 = Hardware(gpus=8, gpu_type='H100-80G', source='flags')


def _cfg(**kw) -> GRPOConfig:
    base = dict(
        model='Qwen/Qwen2.5-7B-Instruct',
        rlhf_type='grpo',
        tuner_type='lora',
        use_vllm=True,
        vllm_mode='colocate',
        per_device_train_batch_size=8,
        gradient_accumulation_steps=1,
        num_generations=8,
        max_completion_length=1024,
        reward_funcs=['accuracy'],
    )
    base.update(kw)
    return GRPOConfig(**base)


def _predict(cfg, env=None, hw=H100, **inp):
    plan = build_plan(cfg, env or {'NPROC_PER_NODE': '4', 'CUDA_VISIBLE_DEVICES': '0,1,2,3'}, hw)
    args = dict(
        arch=QWEN7B,
        spec=SPECS['H100-80G'],
        gpu_name='H100-80G',
        prompt_mean=200,
        prompt_pad=256,
        completion_mean=cfg.max_completion_length // 2,
        completion_max=cfg.max_completion_length,
    )
    args.update(inp)
    return predict(cfg, plan, SpeedInputs(**args))


def test_every_catalogue_card_has_a_spec_and_the_compute_bound_batch_matches_the_issue():
    assert set(CATALOGUE) <= set(SPECS)
    ratio = {k: s.bf16_tflops * 1e3 / s.hbm_gbps for k, s in SPECS.items()}
    assert 145 <= ratio['A100-80G'] <= 160 and 285 <= ratio['H100-80G'] <= 300
    assert all(s.source for s in SPECS.values())


@pytest.mark.parametrize('use_vllm', [True, False])
def test_longer_completions_are_slower(use_vllm):
    times = [
        _predict(
            _cfg(use_vllm=use_vllm, max_completion_length=c), completion_mean=c // 2, completion_max=c
        ).step_seconds
        for c in (256, 1024, 4096)
    ]
    assert times[0] < times[1] < times[2]
    mean_times = [_predict(_cfg(use_vllm=use_vllm), completion_mean=m).step_seconds for m in (128, 512, 1024)]
    if use_vllm:  # continuous batching: a shorter average frees the KV cache and shortens the tail's batch
        assert mean_times[0] < mean_times[1] < mean_times[2]
    else:  # HF generate runs every row of a batch to the longest: the mean does not matter, the cap does
        assert mean_times[0] == mean_times[1] == mean_times[2]


def test_the_long_tail_lasts_until_the_cap():
    """One wave: the rollout takes max_completion_length decode steps whatever the mean."""
    est = _predict(_cfg(), completion_mean=100, kv_tokens=10**7)
    assert est.detail['waves'] == 1 and est.detail['decode_steps'] == 1024


def test_kv_capacity_forces_waves():
    roomy = _predict(_cfg(), kv_tokens=10**7)
    tight = _predict(_cfg(), kv_tokens=3 * (200 + 1024))  # three full-length sequences at once
    assert roomy.detail['waves'] == 1 and tight.detail['waves'] == 3  # 8 sequences per engine
    assert tight.phases['rollout'] > roomy.phases['rollout']


def test_server_mode_with_more_rollout_gpus_has_fewer_decode_waves():
    kv = 8 * (200 + 1024)  # an engine holds 8 full-length sequences
    waves = []
    for dp in (1, 2, 4):
        cfg = _cfg(vllm_mode='server', vllm_server_host=['127.0.0.1'], vllm_data_parallel_size=dp)
        est = _predict(cfg, kv_tokens=kv)
        waves.append(est.detail['waves'])
        assert est.gpus == 4 + dp
    assert waves[0] > waves[1] > waves[2] >= 1


def test_lora_trains_faster_than_full_and_checkpointing_costs():
    lora, full = _predict(_cfg(tuner_type='lora')), _predict(_cfg(tuner_type='full'))
    assert lora.phases['train'] < full.phases['train'] and lora.step_seconds < full.step_seconds
    gc_on = _predict(_cfg(gradient_checkpointing=True))
    gc_off = _predict(_cfg(gradient_checkpointing=False))
    assert gc_off.phases['train'] < gc_on.phases['train']
    assert gc_on.phases['train'] / gc_off.phases['train'] == pytest.approx(6 / 4, rel=0.05)  # LoRA: 6N vs 4N


def test_reference_log_probs_only_with_a_kl_term():
    assert _predict(_cfg(beta=0.0)).phases['logprobs'] < _predict(_cfg(beta=0.04)).phases['logprobs']


def test_hf_generate_is_slower_than_vllm_and_lora_adds_launches():
    assert _predict(_cfg(use_vllm=False)).phases['rollout'] > _predict(_cfg(use_vllm=True)).phases['rollout']
    assert (
        _predict(_cfg(use_vllm=False, tuner_type='lora')).phases['rollout']
        > _predict(_cfg(use_vllm=False, tuner_type='full')).phases['rollout']
    )


def test_sleep_costs_a_wake_per_rollout_and_enforce_eager_slows_decode():
    assert _predict(_cfg(sleep_level=0)).phases['weight_sync'] < _predict(_cfg(sleep_level=1)).phases['weight_sync']
    assert _predict(_cfg(vllm_enforce_eager=True)).phases['rollout'] > _predict(_cfg()).phases['rollout']


def test_async_generation_overlaps_the_rollout():
    cfg = _cfg(vllm_mode='server', vllm_server_host=['127.0.0.1'])
    sync, overlapped = _predict(cfg), _predict(replace(cfg, async_generate=True))
    assert overlapped.step_seconds < sync.step_seconds
    assert overlapped.step_seconds >= max(sync.phases['rollout'], sync.phases['train'])


@pytest.mark.parametrize(
    'kw',
    [
        dict(),
        dict(tuner_type='full'),
        dict(use_vllm=False),
        dict(sleep_level=2),
        dict(vllm_mode='server', vllm_server_host=['127.0.0.1'], async_generate=True),
        dict(max_completion_length=8192, vllm_tensor_parallel_size=2),
    ],
)
def test_the_band_holds_its_point(kw):
    est = _predict(_cfg(**kw))
    assert est.step_seconds_low <= est.step_seconds <= est.step_seconds_high
    assert est.step_seconds_high / est.step_seconds_low < 3


def test_completion_defaults_are_said():
    _, r1 = make({'model': 'deepseek-ai/DeepSeek-R1-Distill-Qwen-7B'})
    mean, cap, why = completion_lengths(r1, None)
    assert mean == cap == 1024 and 'reasoning' in why  # the memory verdict's decision (ms-swift's thinking template)
    _, report = make()
    mean, cap, why = completion_lengths(report, None)
    assert mean == 512 and '--completion-mean' in why
    assert completion_lengths(report, 300)[:2] == (300, 1024)
    assert completion_lengths(report, 5000)[0] == 1024


def test_check_attaches_the_estimate_and_says_what_it_assumed():
    _, report = make(hw=Hardware(gpus=1, gpu_type='A100-80G', source='flags'))
    est = report.speed
    assert (
        est is not None
        and est.step_seconds > 0
        and set(est.phases) == {'rollout', 'logprobs', 'train', 'weight_sync', 'other'}
    )
    assert any('completions assumed' in a for a in est.assumptions)
    d = report.to_dict()['speed']
    assert d['completion_tokens_assumed'] == {'mean': 512, 'max': 1024}


def test_completion_mean_and_data_stats_change_the_estimate():
    launch = launch_from_mapping(
        {**BASE, 'ENV': {'CUDA_VISIBLE_DEVICES': '0', 'NPROC_PER_NODE': 1}}, [], environ={}, source='test.yaml'
    )
    hw = Hardware(gpus=1, gpu_type='A100-80G', source='flags')
    short = check_launch(launch, hw, packages=PACKAGES_OK, completion_mean=100)
    long = check_launch(launch, hw, packages=PACKAGES_OK, completion_mean=1000)
    assert short.speed.step_seconds < long.speed.step_seconds
    assert short.speed.completion_tokens_assumed['mean'] == 100
    stats = {'count': 7473, 'mean': 120.0, 'max': 400, 'min': 30, 'percentiles': {'p90': 200}, 'histogram': {}}
    with_stats = check_launch(launch, hw, packages=PACKAGES_OK, data_stats=stats, completion_mean=100)
    assert with_stats.speed.prompt_tokens_assumed == {'mean': 120, 'padded': 200}
    assert with_stats.speed.gpu_hours_per_epoch is not None and with_stats.speed.gpu_hours_per_epoch > 0


def test_unknown_card_says_why_not():
    _, report = make(hw=Hardware(gpus=1, gpu_type=None, source='flags'))
    assert report.speed is None and report.to_dict()['speed'] is None


def test_fastest_lists_configs_that_fit_and_are_faster_in_the_launchs_syntax():
    launch = launch_from_mapping(
        {
            **BASE,
            'sleep_level': 1,
            'vllm_gpu_memory_utilization': 0.5,
            'ENV': {'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'NPROC_PER_NODE': 4},
        },
        [],
        environ={},
        source='test.yaml',
    )
    report = check_launch(
        launch, Hardware(gpus=4, gpu_type='A100-80G', source='flags'), packages=PACKAGES_OK, fastest=True
    )
    r = report.speed_ranking
    assert r is not None and r.candidates and r.fitted <= r.searched
    first = r.candidates[0]
    assert all(c.seconds_per_prompt < report.speed.seconds_per_prompt for c in r.candidates)
    assert [c.seconds_per_prompt for c in r.candidates] == sorted(c.seconds_per_prompt for c in r.candidates)
    assert all(c.peak_fraction <= 1.0 for c in r.candidates)
    assert first.why.startswith('faster')
    # a YAML config gets the `key: value` lines to paste (no diff markers)
    assert any(f'\n{k}:' in first.text for k in first.changes) and '\n+ ' not in first.text
    # the prompts per optimizer step are kept
    for c in r.candidates:
        bs = c.changes.get('per_device_train_batch_size', (None, 8))[1]
        ga = c.changes.get('gradient_accumulation_steps', (None, 1))[1]
        world = int(c.env.get('NPROC_PER_NODE', 4))
        assert world * bs * ga == report.plan.optimizer_batch


def test_json_carries_the_speed_contract():
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(EXAMPLE),
        '--gpus',
        '2',
        '--gpu-type',
        'H100',
        '--completion-mean',
        '300',
        '--json',
    )
    d = json.loads(proc.stdout)
    s = d['speed']
    for key in ('step_seconds', 'step_seconds_low', 'step_seconds_high', 'phases', 'completion_tokens_assumed'):
        assert key in s
    assert set(s['phases']) == {'rollout', 'logprobs', 'train', 'weight_sync', 'other'}
    assert s['completion_tokens_assumed']['mean'] == 300
    assert s['step_seconds_low'] <= s['step_seconds'] <= s['step_seconds_high']


def test_console_prints_the_step_time_and_fastest():
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(EXAMPLE),
        '--gpus',
        '2',
        '--gpu-type',
        'H100',
        '--fastest',
        env={'COLUMNS': '200'},
    )
    assert 'Predicted speed:' in proc.stdout and 'per optimizer step (band' in proc.stdout
    assert 'Fastest configurations that fit' in proc.stdout


def test_doubling_gpus_barely_moves_a_long_tail_rollout():
    """Issue 30 (a verl run: 64 -> 128 GPUs took a step from 365 s to 356 s): at a fixed rollout, more engines give
    each fewer sequences, but a memory-bound decode step costs about the same and the tail still runs to the cap."""
    cfg = _cfg(per_device_train_batch_size=16, max_completion_length=4096)
    four = _predict(cfg, env={'NPROC_PER_NODE': '4'}, completion_mean=4096, kv_tokens=10**7)
    cfg8 = replace(cfg, per_device_train_batch_size=8)  # the same completions per step on twice the GPUs
    eight = _predict(cfg8, env={'NPROC_PER_NODE': '8'}, completion_mean=4096, kv_tokens=10**7)
    assert eight.phases['rollout'] > 0.8 * four.phases['rollout']
    assert eight.phases['train'] < 0.6 * four.phases['train']  # the trainer's share does halve


def test_bench_reproduces_its_fitted_rows_and_keeps_the_band_narrow():
    """bench/bench_throughput.py (arithmetic only): the rows constants were derived from come back, every scored row
    has a band, and the median band is at most 2x wide (issue 30)."""
    from conftest import load_script

    bench = load_script('bench/bench_throughput.py')
    result = bench.score(
        bench.h100_rows()
        + bench.hf_generate_rows()
        + bench.trl_ratio_rows()
        + bench.nemo_rows()
        + bench.nemo_ratio_rows()
        + bench.verl_ratio_rows()
        + bench.fitted_rows()
    )
    fitted = [r for r in result['rows'] if r['kind'] == 'fitted']
    assert fitted and all(abs(r['error']) < 0.01 for r in fitted)
    scored = [r for r in result['rows'] if r['kind'] != 'fitted']
    assert all(r['low'] <= r['predicted'] <= r['high'] for r in scored)
    assert result['median_band_width'] <= 2.0
    assert {r['id'].split(':')[0] for r in scored} >= {'h100', 'trl blog', 'nemo-rl', 'verl'}


def test_completion_mean_must_be_positive():
    proc = run_cli(
        'grpo_recipes.cli.guard', 'check', str(EXAMPLE), '--gpus', '2', '--gpu-type', 'H100', '--completion-mean', '0'
    )
    assert proc.returncode == 2 and '--completion-mean' in proc.stderr


def test_readme_recipe_table_matches_the_headers_predicted_step():
    import re

    from conftest import ROOT

    table = {
        m.group(1): m.group(2)
        for m in re.finditer(
            r'^\| ([\w.\-]+/[\w.\-]+) \|.*\| (\d+ \(\d+-\d+\)) \|', (ROOT / 'README.md').read_text(), re.M
        )
    }
    assert table
    for name, cell in table.items():
        header = (ROOT / 'recipes' / f'{name}.yaml').read_text()
        m = re.search(r'# speed \(predicted, docs/throughput.md\): (\d+) s/step \(band (\d+)-(\d+)\)', header)
        assert m and cell == f'{m.group(1)} ({m.group(2)}-{m.group(3)})', name


def test_a_server_layout_is_written_with_its_rollout_command_and_keeps_the_prompts_per_step():
    from grpo_recipes.speed import fastest

    _, report = make(
        {'tuner_type': 'full', 'per_device_train_batch_size': 4},
        env={'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7', 'NPROC_PER_NODE': 8},
        hw=Hardware(gpus=8, gpu_type='H100-80G', source='flags'),
    )
    layouts = [lay for lay in fastest._layouts(report, QWEN7B.heads) if lay[2]]
    assert layouts
    for changes, env, serve, hw in layouts:
        world = int(env['NPROC_PER_NODE'])
        assert world + len(hw.rollout_gpus) == 8
        assert (
            world * changes['per_device_train_batch_size'] * changes['gradient_accumulation_steps']
            == report.plan.optimizer_batch
        )
        text = fastest._render(
            report,
            {k: (getattr(report.cfg, k), v) for k, v in changes.items() if getattr(report.cfg, k) != v},
            env,
            serve,
        )
        assert 'rollout server: CUDA_VISIBLE_DEVICES=' in text and 'swift rollout' in text
        assert '\nvllm_mode: server' in text and 'vllm_tensor_parallel_size:' not in text  # the server's, not here
        assert '\nENV: {NPROC_PER_NODE' in text and '+ ' not in text


def test_old_policy_log_probs_follow_each_framework():
    from grpo_recipes.plan import old_logprobs_needed

    plan = build_plan(_cfg(), {}, H100)
    assert old_logprobs_needed(_cfg(), plan, 'swift')  # ms-swift 4.6: every prepared batch
    assert old_logprobs_needed(_cfg(use_vllm=True), plan, 'trl')  # TRL's vLLM importance-sampling correction
    assert not old_logprobs_needed(_cfg(use_vllm=False), plan, 'trl')
    two = _cfg(use_vllm=False, num_iterations=2)
    assert old_logprobs_needed(two, build_plan(two, {}, H100), 'trl')
    # once per rollout: two iterations over a rollout halve the per-step share
    assert _predict(_cfg(num_iterations=2)).phases['logprobs'] == pytest.approx(
        _predict(_cfg()).phases['logprobs'] / 2, rel=0.01
    )


def test_fastest_search_is_bounded_for_huge_batches():
    from grpo_recipes.speed.fastest import _splits

    splits = _splits(_cfg(per_device_train_batch_size=10**9))
    assert splits and all(s['per_device_train_batch_size'] <= 64 for s in splits)
    assert all(s['per_device_train_batch_size'] * s['gradient_accumulation_steps'] == 10**9 for s in splits)
