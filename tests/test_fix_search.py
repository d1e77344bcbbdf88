"""The fix search (memory/search.py) is complete and bounded: it finds the fix its own memory model says fits when
nothing bounds the prompts (vLLM then queues part of the rollout: slower, the same memory, so such a fix is ranked
after any that holds the rollout, never dropped), and it answers at once for an absurd micro-batch (the micro-batch
splits come from the factorisation, O(log bs), not from every number below it). ms-swift and the TRL twin."""

from helpers import PACKAGES_OK, make

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.memory.search import split_sizes

HW2 = Hardware(gpus=2, gpu_type='A100-80G', source='flags')
# a 7B LoRA launch on 2 x A100-80G: micro-batch 16, 2,048-token completions, max_length unset (prompts up to the
# model context), 8 generations, 4 accumulation steps
UNBOUNDED = {
    'per_device_train_batch_size': 16,
    'gradient_accumulation_steps': 4,
    'max_completion_length': 2048,
    'max_length': None,
    'vllm_max_model_len': None,
    'num_generations': 8,
}
TWO = {'CUDA_VISIBLE_DEVICES': '0,1', 'NPROC_PER_NODE': 2}


def trl(*flags, gpus=2):
    return read_launch(
        [
            '--',
            'accelerate',
            'launch',
            '--num_processes',
            str(gpus),
            'train_grpo.py',
            '--model_name_or_path',
            'Qwen/Qwen2.5-7B-Instruct',
            '--use_peft',
            '--use_vllm',
            '--vllm_mode',
            'colocate',
            *flags,
        ],
        environ={},
    )


def prompts_per_step(cfg, world):
    return world * cfg.per_device_train_batch_size * cfg.gradient_accumulation_steps // cfg.num_generations


def _assert_fix_keeps_the_batch(report, world):
    fix = report.fixes[0]
    new = {k: v for k, (_, v) in fix.changes.items()}
    bs = new.get('per_device_train_batch_size', report.cfg.per_device_train_batch_size)
    ga = new.get('gradient_accumulation_steps', report.cfg.gradient_accumulation_steps)
    assert world * bs * ga // report.cfg.num_generations == prompts_per_step(report.cfg, world)
    assert fix.peak_fraction <= 1.0


def test_swift_unbounded_prompts_still_get_a_fix():
    _, r = make(UNBOUNDED, env=TWO, hw=HW2)
    rules = {f.rule for f in r.findings}
    assert 'memory.oom' in rules and 'memory.fix' in rules and 'memory.no-fix' not in rules
    _assert_fix_keeps_the_batch(r, 2)
    # planned at the prompts the launch allows (the model context less the completion), not at short ones
    assert any('prompts of up to 30,720 tokens' in a for a in r.assumptions)


def test_the_same_launch_with_data_stats_gets_a_fix_holding_the_whole_rollout():
    _, r = make(UNBOUNDED, env=TWO, hw=HW2, data_stats={'max': 300, 'percentiles': {}, 'histogram': []})
    assert r.fixes and not any(m.problems for m in r.fixes[0].memory if m.role != 'rollout')


def test_trl_unbounded_prompts_still_get_a_fix():
    r = check_launch(
        trl(
            '--per_device_train_batch_size',
            '16',
            '--gradient_accumulation_steps',
            '4',
            '--max_completion_length',
            '2048',
            '--num_generations',
            '8',
        ),
        HW2,
        packages=PACKAGES_OK,
    )
    rules = {f.rule for f in r.findings}
    assert 'memory.fix' in rules and 'memory.no-fix' not in rules, [f.message for f in r.findings]
    _assert_fix_keeps_the_batch(r, 2)


def test_split_sizes_are_divisors_near_powers_of_two():
    assert split_sizes(16) == [8, 4, 2, 1]
    assert split_sizes(24) == [12, 8, 4, 2, 1]
    assert split_sizes(1) == [] and split_sizes(97) == [1]
    for bs in (10**9, 2**40, 10**18, 2 * 1000003, 999999937 * 3):
        got = split_sizes(bs)
        assert got and all(bs % d == 0 and d < bs for d in got)
        assert len(got) <= bs.bit_length()


def test_an_absurd_micro_batch_gets_its_verdict_swift():
    _, r = make({'per_device_train_batch_size': 10**9})
    assert 'memory.oom' in {f.rule for f in r.findings}


def test_an_absurd_micro_batch_gets_its_verdict_trl():
    r = check_launch(
        trl('--per_device_train_batch_size', str(10**9), '--num_generations', '8', gpus=1),
        Hardware(gpus=1, gpu_type='A100-80G', source='flags'),
        packages=PACKAGES_OK,
    )
    assert r.memory and 'memory.oom' in {f.rule for f in r.findings}
