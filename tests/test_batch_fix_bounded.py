"""The batch rule's fix is found in one step, whatever num_generations: a huge value (the CLI fuzz test drew 10^400)
gets its answer in bounded time, and an ordinary one gets the smallest per-device batch that makes the generation
batch divide, as ms-swift's check (generation batch % num_generations) requires."""

from grpo_recipes.cli.guard import main

R = 'recipes/qwen2.5-7b-instruct/lora-2xa100-80g.yaml'
HW = ['--gpus', '2', '--gpu-type', 'A100-80G']


def test_a_huge_num_generations_is_answered(capsys):
    rc = main(['check', R, *HW, '--', '--num_generations=' + '9' * 400])
    assert rc in (1, 2)


def _fix(capsys, *flags):
    main(['check', '--json', R, *HW, '--', *flags])
    import json

    out = json.loads(capsys.readouterr().out)
    return [f for f in out['findings'] if f['rule'] == 'batch.num-generations-divides']


def test_the_batch_fix_is_the_smallest_that_divides(capsys):
    # 2 processes x 3 per device x steps_per_generation 2 = 12 completions, not divisible by 8
    found = _fix(capsys, '--per_device_train_batch_size', '3', '--gradient_accumulation_steps', '2')
    assert found, 'the generation batch 12 is not divisible by 8'
    # by hand: 3 -> 12 (no), 4 -> 16 = 2 x 8: the smallest batch is 4
    assert found[0]['fix'].endswith('per_device_train_batch_size: 4')


def test_a_huge_server_tensor_parallel_size_is_answered_with_few_rows():
    # TRL's server mode with no server line: the server's GPUs are unnamed, a row each (estimate._rollout_gpus);
    # a TP of 10^9 built 10^9 rows and never returned (found by fuzzing check's TRL front end)
    from grpo_recipes.check import check_launch
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.hardware import Hardware

    argv = [
        'accelerate',
        'launch',
        '--num_processes',
        '4',
        'train.py',
        '--model_name_or_path',
        'Qwen/Qwen2.5-7B-Instruct',
    ]
    argv += ['--use_vllm', 'true', '--per_device_train_batch_size', '8', '--num_generations', '8']
    hw = Hardware(gpus=4, gpu_type='A100-80G', source='flags')
    for tp, rows in ((2, ['rollout0', 'rollout1']), (10**9, [f'rollout0-{10**9 - 1}'])):
        report = check_launch(
            read_launch([*argv, '--vllm_tensor_parallel_size', str(tp)], environ={}), hw, packages={'trl': '0.29.1'}
        )
        assert [m.gpu for m in report.memory if m.role == 'rollout'] == rows
