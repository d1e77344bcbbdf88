"""The rollout side (issue 21, items 11 and 20): a server that cannot start and a port the trainer does not
connect to are errors; a server checked alone prints no trainer lines."""

import importlib.util

import pytest

from grpo_recipes.cli import guard

HW = ['--gpus', '4', '--gpu-type', 'A100-80G']
TRAIN = [
    '--',
    'CUDA_VISIBLE_DEVICES=0,1',
    'NPROC_PER_NODE=2',
    'swift',
    'rlhf',
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--tuner_type',
    'lora',
    '--use_vllm',
    'true',
    '--vllm_mode',
    'server',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '8',
    '--max_length',
    '512',
    '--max_completion_length',
    '512',
    '--reward_funcs',
    'accuracy',
    '--vllm_server_host',
    '127.0.0.1',
]


def _check(args, capsys):
    rc = guard.main(['check', *HW, *args])
    return rc, ' '.join(capsys.readouterr().out.split())


def test_rollout_command_that_cannot_start_refuses_the_launch(capsys):
    # --gpu_memory_utilization is not swift rollout's name (it is --vllm_gpu_memory_utilization): it stops
    roll = 'CUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-7B-Instruct --gpu_memory_utilization 0.8'
    rc, out = _check(['--rollout', roll, *TRAIN], capsys)
    assert rc == 1 and 'rollout.unknown-argument' in out and 'REFUSED' in out
    ok = 'CUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-7B-Instruct --vllm_gpu_memory_utilization 0.8'
    rc, out = _check(['--rollout', ok, *TRAIN], capsys)
    assert rc == 0, out


@pytest.mark.parametrize(
    'roll, trainer_port, expect_ok',
    [
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct --port 8001', None, False),  # trainer: default 8000
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct', ['--vllm_server_port', '8001'], False),  # server: default
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct --port 8001', ['--vllm_server_port', '8001'], True),
        ('swift rollout --model Qwen/Qwen2.5-7B-Instruct', None, True),
    ],
)
def test_trainer_port_must_be_the_servers(roll, trainer_port, expect_ok, capsys):
    rc, out = _check(['--rollout', 'CUDA_VISIBLE_DEVICES=2 ' + roll, *TRAIN, *(trainer_port or [])], capsys)
    assert (rc == 0) == expect_ok, out
    assert ('rollout.port' in out) == (not expect_ok)


def test_trl_port_mismatch_is_an_error(capsys):
    roll = 'CUDA_VISIBLE_DEVICES=2 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct --port 8011'
    rc, out = _check(
        [
            '--rollout',
            roll,
            '--',
            'CUDA_VISIBLE_DEVICES=0',
            'accelerate',
            'launch',
            '--num_processes',
            '1',
            'train.py',
            '--model_name_or_path',
            'Qwen/Qwen2.5-7B-Instruct',
            '--use_peft',
            '--use_vllm',
            '--vllm_mode',
            'server',
            '--max_completion_length',
            '256',
            '--max_prompt_length',
            '256',
            '--dtype',
            'bfloat16',
        ],
        capsys,
    )
    assert rc == 1 and 'rollout.port' in out and '--vllm_server_port 8011' in out


def test_both_servers_default_to_port_8000():
    # the default the rule assumes is the one in the frameworks' own argument classes
    from swift.arguments import RolloutArguments

    from grpo_recipes.rules.rollout_port import DEFAULT_PORT

    fields = {f.name: f.default for f in __import__('dataclasses').fields(RolloutArguments)}
    assert fields['port'] == DEFAULT_PORT
    spec = importlib.util.find_spec('trl.scripts.vllm_serve')
    assert spec is not None
    from trl.scripts.vllm_serve import ScriptArguments

    assert {f.name: f.default for f in __import__('dataclasses').fields(ScriptArguments)}['port'] == DEFAULT_PORT


@pytest.mark.parametrize(
    'server',
    [
        ['swift', 'rollout', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--vllm_data_parallel_size', '2'],
        ['trl', 'vllm-serve', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--data_parallel_size', '2'],
    ],
)
def test_server_alone_prints_no_trainer_lines(server, capsys, monkeypatch):
    monkeypatch.setenv('COLUMNS', '100')
    rc = guard.main(['check', '--gpus', '8', '--gpu-type', 'A100-80G', '--', 'CUDA_VISIBLE_DEVICES=6,7', *server])
    out = capsys.readouterr().out
    assert rc == 0, out
    for trainer_line in ('(lora)', '(full)', 'world ', 'prompts', 'micro-batch', 'optimizer step', 'a rollout needs'):
        assert trainer_line not in out, trainer_line
    assert 'Rollout server plan' in out and 'TP 1 × DP 2 = 2' in out and 'port 8000' in out


# --- issue 31 item 3: a server's fix is on its own command line, in its own flags ---

OWN_KNOBS = ('ROLLOUT_GPUS', 'TRAIN_GPUS', 'GPU_TYPE', '--rollout-gpus', 'GPUS=')


def _fixes(args, capsys):
    import json

    guard.main(['check', '--json', *args])
    return {f['rule']: f['fix'] or '' for f in json.loads(capsys.readouterr().out)['findings']}


def test_server_gpu_fixes_name_the_servers_own_command(capsys):
    # GPU 1 is both training's and the server's: the fix names the server's CUDA_VISIBLE_DEVICES, not this project's
    # ROLLOUT_GPUS / --rollout-gpus
    overlap = _fixes(
        [*HW, '--rollout', 'CUDA_VISIBLE_DEVICES=1 swift rollout --model Qwen/Qwen2.5-7B-Instruct', *TRAIN], capsys
    )
    fix = overlap['device.rollout-overlap']
    assert 'CUDA_VISIBLE_DEVICES=2 swift rollout' in fix and not any(k in fix for k in OWN_KNOBS)
    # more GPUs than TP x DP: the server's CUDA_VISIBLE_DEVICES with fewer ids
    idle = _fixes([*HW, '--rollout-gpus', '2,3', *TRAIN], capsys)['device.rollout-count']
    assert idle.startswith('CUDA_VISIBLE_DEVICES=2 swift rollout') and not any(k in idle for k in OWN_KNOBS)
    # fewer GPUs than TP x DP: the server's own --vllm_tensor_parallel_size, not the trainer's (ignored in server mode)
    short = _fixes([*HW, '--rollout-gpus', '2', *TRAIN, '--vllm_tensor_parallel_size', '2'], capsys)
    fix = short['device.rollout-count']
    assert 'swift rollout ... --vllm_tensor_parallel_size 1' in fix and not any(k in fix for k in OWN_KNOBS)


def test_trl_server_fixes_use_vllm_serves_spelling():
    from grpo_recipes.frontends import FRAMEWORKS

    assert FRAMEWORKS['trl'].server_arg('gpu_memory_utilization') == '--gpu-memory-utilization'
    assert FRAMEWORKS['swift'].server_arg('gpu_memory_utilization') == '--vllm_gpu_memory_utilization'


def test_a_rollout_gpu_that_does_not_fit_gets_the_servers_flags(capsys):
    # a 72B model's weights on one 80 GB rollout GPU: the fix is on `swift rollout`'s command line, in its flags
    roll = 'CUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-72B-Instruct'
    args = [
        *HW,
        '--rollout',
        roll,
        *[a if a != 'Qwen/Qwen2.5-7B-Instruct' else 'Qwen/Qwen2.5-72B-Instruct' for a in TRAIN],
    ]
    fixes = _fixes(args, capsys)
    server_fixes = [f for f in fixes.values() if 'rollout server' in f]
    assert server_fixes, fixes
    for fix in server_fixes:
        assert 'swift rollout ... --vllm_' in fix and not any(k in fix for k in OWN_KNOBS)


def test_no_fix_names_the_project_launchers_variables():
    """ROLLOUT_GPUS, TRAIN_GPUS, GPUS and GPU_TYPE are scripts/launch_lib.sh's: only recipe_launcher.py (this
    project's own launchers) may name them; a fix for a user's launch never does (issue 31 item 3)."""
    import ast
    import re
    from pathlib import Path

    import grpo_recipes

    pat = re.compile(r'(?<![\w-])(ROLLOUT_GPUS|TRAIN_GPUS|GPU_TYPE|GPUS)(?!\w)')
    root = Path(grpo_recipes.__file__).parent
    found = []
    for path in sorted(root.rglob('*.py')):
        if path.name in ('recipe_launcher.py', 'recipe_header.py'):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant)}
        found += [
            f'{path.relative_to(root)}:{n.lineno}'
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and pat.search(n.value)
        ]
    assert not found, found


def test_a_port_mismatch_with_a_server_quoted_in_a_comment_is_a_warning(tmp_path, capsys):
    """ms-swift's examples/train/grpo/plugin/openenv/run_grpo_sudoku_server.sh documents its server in a comment
    without --port while the trainer connects to 8001: said, as a warning (the comment is documentation)."""
    script = tmp_path / 'run.sh'
    script.write_text(
        '# start the server first:\n'
        '#   CUDA_VISIBLE_DEVICES=2 swift rollout --model Qwen/Qwen2.5-7B-Instruct\n'
        + ' '.join(TRAIN[1:])
        + ' --vllm_server_port 8001\n'
    )
    rc, out = _check([str(script)], capsys)
    assert 'WARNING rollout.port' in out and 'quoted in a comment' in out, out


def test_the_trainer_talks_to_the_last_server_started_before_it(tmp_path, capsys, monkeypatch):
    """arl's sweep restarts `trl vllm-serve` on a new port (PORT=$((BASE_PORT + i))) before each run: the trainer is
    paired with the server started last before it, not the first one."""
    from grpo_recipes.frontends import read_launch

    monkeypatch.chdir(tmp_path)
    (tmp_path / 'sweep.sh').write_text(
        'start() { PORT=$((8880 + $1)); CUDA_VISIBLE_DEVICES=2 trl vllm-serve --model Qwen/Qwen2.5-7B-Instruct '
        '--port $PORT & }\n'
        'start 0\nstart 1\n'
        'CUDA_VISIBLE_DEVICES=0,1 accelerate launch --num_processes 2 train.py --model_name_or_path '
        'Qwen/Qwen2.5-7B-Instruct --use_vllm --vllm_mode server --vllm_server_port $PORT\n'
    )
    (tmp_path / 'train.py').write_text('from trl import GRPOConfig, GRPOTrainer, TrlParser\nTrlParser((GRPOConfig,))\n')
    launch = read_launch(['sweep.sh'], environ={})
    assert launch.rollout.argv[-2:] == ['--port', '8881']
    rc, out = _check(['sweep.sh'], capsys)
    assert 'rollout.port' not in out, out


def test_a_trl_server_value_its_parser_refuses_is_said_as_the_parser_says_it(capsys):
    # trl/scripts/vllm_serve.py ScriptArguments.tensor_parallel_size is an int: TrlParser stops on "two"; the guard
    # called it "not an argument ... did you mean --tensor_parallel_size?" (its own name) before
    rc, out = _check(
        ['--', 'trl', 'vllm-serve', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--tensor_parallel_size', 'two'], capsys
    )
    assert rc == 1 and "invalid int value: 'two'" in out and 'did you mean' not in out
    assert 'a value of the type the message names' in out
