"""bench/bench_swift_gpu.py without a GPU: every recipe's launch parses with ms-swift's real argument classes, GPTQ
launches are skipped with their reason, --dry-run prints each launch, and a result becomes a calibration case that
grpo-guard calibrate predicts. The GPU run itself cannot happen here (no GPU): its log parsing is checked on ms-swift's
log format."""

import json
from pathlib import Path

import pytest
from conftest import load_script, run_cli

from grpo_recipes.launch import Launch
from grpo_recipes.recipes import discover

bench = load_script('bench/bench_swift_gpu.py')


def _runs(tmp_path, **kw):
    runs = bench.recipe_runs(tmp_path, tmp_path / 'gsm8k.jsonl', **kw)
    for r in runs:  # the config-only model dir ms-swift's parser needs (the harness writes the weights beside it)
        d = tmp_path / 'models' / Path(r.model).name
        d.mkdir(parents=True, exist_ok=True)
        (d / 'config.json').write_text(json.dumps(r.model_config))
    return runs


def test_one_launch_per_recipe_and_gptq_skipped(tmp_path):
    runs = _runs(tmp_path)
    assert sorted(r.name for r in runs) == sorted(x.name for x in discover())
    commands = {x.name: x.command for x in discover()}
    for r in runs:
        if commands[r.name]:  # a recipe run by `megatron rlhf`: no swift rlhf step to measure
            assert r.skip and 'not `swift rlhf`' in r.skip
            continue
        gptq = (r.model_config.get('quantization_config') or {}).get('quant_method') == 'gptq'
        assert bool(r.skip) == gptq and (not gptq or 'cannot be built at random' in r.skip)
        assert '--use_vllm' in r.argv and r.argv[r.argv.index('--use_vllm') + 1] == 'false'


@pytest.mark.slow
def test_every_launch_parses_with_the_real_ms_swift(tmp_path):
    from grpo_recipes.realparse import validate_many

    runs = [r for r in _runs(tmp_path) if not r.skip]
    results = validate_many([Launch(argv=r.argv, env={}) for r in runs])
    bad = [(r.name, res.error_type, res.message, res.unknown) for r, res in zip(runs, results) if not res.ok]
    assert not bad, bad
    for r, res in zip(runs, results):  # the shape ms-swift resolved is the recipe's
        shape = bench.argv_config(r.argv)
        assert res.resolved.get('max_length') == shape['max_length'], r.name


def test_dry_run_prints_argv_and_env(tmp_path):
    out = run_cli(
        'bench.bench_swift_gpu',
        '--dry-run',
        '--workdir',
        str(tmp_path),
        '--alloc',
        'default,expandable',
        '--emulate-gib',
        '40',
        '--only',
        'qwen2.5-7b-instruct/lora-2xa100-40g',
    )
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert text.count('== qwen2.5-7b-instruct/lora-2xa100-40g') == 2
    assert (
        'env   CUDA_VISIBLE_DEVICES=0 PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True GRPO_BENCH_EMULATE_GIB=40.0'
        in text
    )
    assert f'--external_plugins {tmp_path}/emulate_card.py' in text and 'argv  swift rlhf --model' in text
    bad = run_cli('bench.bench_swift_gpu', '--dry-run', '--alloc', 'fast')
    assert bad.returncode == 2 and '--alloc fast' in bad.stderr


def test_a_result_is_a_case_calibrate_predicts(tmp_path):
    from grpo_recipes.memory.calibrate import predict

    run = next(r for r in _runs(tmp_path, only=['qwen2.5-7b-instruct/lora-2xa100-80g'], allocators=('expandable',)))
    log = (
        "{'loss': 0.0, 'memory(GiB)': '21.5', 'global_step/max_steps': '1/2'}\n"
        "{'loss': 0.1, 'memory(GiB)': '28.38', 'global_step/max_steps': '2/2'}\n"
    )
    res = {**bench.read_log(log), 'rc': 0, 'nvml_peak_mib': 29907.0}
    assert res['memory_gib'] == 28.38 and res['steps_logged'] == 2 and not res['oom']
    case = bench.to_case(
        run, res, {'name': 'NVIDIA H100 80GB HBM3', 'total_gib': 79.19}, {'ms-swift': '4.6.0'}, '2026-11-24'
    )
    assert case['outcome']['peak_gib_per_gpu'] == 28.38 and case['outcome']['nvidia_smi_used_mib'] == 29907
    assert case['environ'] == {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:True'}
    assert case['config']['per_device_train_batch_size'] == bench.argv_config(run.argv)['per_device_train_batch_size']
    pred = predict(json.loads(json.dumps(case)))  # as calibrate reads a JSON line; CannotPredict would name a field
    assert pred['phase'] == 'train' and pred['peak_gib'] > 0
    oom = bench.read_log('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB')
    assert oom['oom'] and oom['memory_gib'] is None


def test_the_case_states_its_allocator_for_calibrate(tmp_path):
    from grpo_recipes.allocconf import case_setting

    both = _runs(tmp_path, only=['qwen2.5-7b-instruct/lora-2xa100-80g'], allocators=('default', 'expandable'))
    res = {'memory_gib': 20.0, 'steps_logged': 2, 'oom': False, 'rc': 0, 'nvml_peak_mib': 0}
    gpu = {'name': 'NVIDIA H100 80GB HBM3', 'total_gib': 79.19}
    plain, exp = (bench.to_case(r, res, gpu, {}, '2026-11-24') for r in both)
    assert case_setting(plain) is None and case_setting(exp).conf.expandable_segments
    assert plain['id'] != exp['id']


def test_the_poller_reads_the_used_memory_nvidia_smi_shows(monkeypatch):
    """NVML's v1 ``used`` also counts the driver's reserved memory (480 MiB on an H100 80GB); the poller takes v2's
    ``used``, as nvidia-smi shows it. pynvml is replaced by a stand-in here (no GPU), answering as NVML does."""
    import sys
    import types

    MiB = 2**20
    fake = types.ModuleType('pynvml')
    fake.nvmlMemory_v2 = object()

    def info(handle, version=None):
        used = 1000 if version is fake.nvmlMemory_v2 else 1480  # v1: v2's used + the driver's 480 MiB
        return types.SimpleNamespace(used=used * MiB)

    fake.nvmlInit = lambda: None
    fake.nvmlDeviceGetHandleByIndex = lambda i: i
    fake.nvmlDeviceGetMemoryInfo = info
    monkeypatch.setitem(sys.modules, 'pynvml', fake)
    assert bench.PeakPoller()._used()() == 1000
