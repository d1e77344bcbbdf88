"""Launchers read through with their own parsers (frontends/launchers.py) and the entry they run looked up in one
table (frontends/entrypoints.py); a trainer no reader reads makes the verdict UNCHECKED, never OK (issue 27).

Launch shapes follow public launches: ms-swift's own ``swift/cli/main.py`` (the torchrun command ``swift rlhf``
builds), ms-swift issue #6509 (``torchrun ... ${CODE_PATH}/swift/cli/rlhf.py``), ms-swift's
``examples/megatron/grpo/*.sh`` (``NPROC_PER_NODE=8 megatron rlhf --rlhf_type grpo``) and
``examples/train/grpo/external/*.sh`` (a ``swift rollout`` beside the trainer), open-r1's ``slurm/train.slurm``
(``#SBATCH --nodes``/``--gres=gpu:8`` and ``srun ... accelerate launch --num_machines $NUM_NODES``), PyTorch's
torchrun docs (``torchrun --nnodes=1:4 --nproc-per-node=8 --rdzv-endpoint=host:29400``)."""

import json
import os
import subprocess
import sys

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.cli import guard
from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import kind_of, read_launch
from grpo_recipes.frontends.launchers import peel, python_options, sbatch_directives, slurm_options
from grpo_recipes.hardware import Hardware

PKGS = {'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9.0', 'msgspec': '0.22.0'}
ARGS = [
    '--rlhf_type',
    'grpo',
    '--model',
    'Qwen/Qwen2.5-7B-Instruct',
    '--tuner_type',
    'lora',
    '--reward_funcs',
    'accuracy',
    '--dataset',
    'd.jsonl',
    '--num_generations',
    '8',
    '--per_device_train_batch_size',
    '2',
]
CVD8 = {'CUDA_VISIBLE_DEVICES': '0,1,2,3,4,5,6,7'}


def _world(launch, gpus=8):
    r = check_launch(launch, Hardware(gpus=gpus, gpu_type='A100-80G', source='flags'), packages=PKGS, memory=False)
    return r.plan.world_size


# ---- differential: the launcher's own parser against what the reader made of the launch -------------------------

TORCHRUN_LAUNCHES = [
    ['torchrun', '--nproc_per_node', '4'],
    ['torchrun', '--nnodes=2', '--node_rank=1', '--master_addr=10.0.0.1', '--master_port=29501', '--nproc-per-node=8'],
    [
        'torchrun',
        '--nnodes',
        '1:4',
        '--nproc-per-node',
        '8',
        '--rdzv-backend',
        'c10d',
        '--rdzv-endpoint',
        'head:29400',
        '--rdzv-id',
        'job1',
    ],
    ['torchrun', '--standalone', '--nproc_per_node', '2', '--max-restarts', '3', '--tee', '3'],
    ['torchrun', '--nnodes', '2', '--nproc_per_node', '4', '-m'],
]


@pytest.mark.parametrize('launcher', TORCHRUN_LAUNCHES, ids=lambda a: ' '.join(a[1:3]))
def test_torchrun_reading_is_torchs(launcher):
    """What the reader planned against torch's own parse of the same words: the script's arguments, the processes
    per node (determine_local_world_size) and the nodes (parse_min_max_nnodes, the most it waits for)."""
    from torch.distributed.run import determine_local_world_size, get_args_parser, parse_min_max_nnodes

    entry = ['swift.cli.rlhf'] if launcher[-1] == '-m' else ['/opt/ms-swift/swift/cli/rlhf.py']
    real = get_args_parser().parse_args([*launcher[1:], *entry, *ARGS])
    launch = read_launch(['--', *launcher, *entry, *ARGS], environ=CVD8)
    assert launch.framework == 'swift' and launch.argv == real.training_script_args
    want = determine_local_world_size(real.nproc_per_node) * parse_min_max_nnodes(real.nnodes)[1]
    assert _world(launch) == want
    if '--node_rank=1' in launcher:
        assert (launch.env['NODE_RANK'], launch.env['MASTER_ADDR'], launch.env['MASTER_PORT']) == (
            str(real.node_rank),
            real.master_addr,
            str(real.master_port),
        )


@pytest.mark.parametrize(
    'words',
    [
        ['accelerate', 'launch', '--num_processes', '4', '--multi_gpu', 'train_grpo.py', '--model_name_or_path', 'x'],
        [
            'accelerate',
            'launch',
            '--config_file=zero3.yaml',
            '--num_machines',
            '2',
            '--machine_rank',
            '0',
            '--main_process_ip',
            '10.0.0.1',
            'train.py',
            '--num_processes',
            '9',
        ],
        ['accelerate', 'launch', '--use_deepspeed', '--zero_stage', '3', '-m', 'open_r1.grpo', '--config', 'c.yaml'],
        ['accelerate', 'launch', '--mixed_precision', 'bf16', '--gpu_ids', '0,1', '--same_network', 'run.py', '-v'],
    ],
)
def test_accelerate_options_are_accelerates(words):
    """Where accelerate's own options end and the script begins, and the values of those options, against
    accelerate's ``launch_command_parser``."""
    from accelerate.commands.launch import launch_command_parser

    real = launch_command_parser().parse_args(words[2:])
    p = peel(words, {})
    layer = p.layers[0]
    script = p.target[1] if p.form == 'module' else p.target[0]
    args = p.target[2:] if p.form == 'module' else p.target[1:]
    assert (script, args, p.form == 'module') == (real.training_script, real.training_script_args, bool(real.module))
    for key in layer.given - {'module'}:
        assert str(layer.opts[key]) == str(getattr(real, key)), key


@pytest.mark.parametrize(
    'opts',
    [
        [],
        ['-u'],
        ['-u', '-X', 'dev', '-W', 'ignore'],
        ['-OO', '-B'],
        ['-Xdev', '-uB'],
        ['--check-hash-based-pycs', 'never', '-s'],
    ],
)
@pytest.mark.parametrize('as_module', [False, True])
def test_python_options_end_where_pythons_do(opts, as_module, tmp_path):
    """The interpreter's own options (docs.python.org/3/using/cmdline.html) against the interpreter itself: the
    script or module it runs sees exactly the arguments the reader gives it."""
    (tmp_path / 'probe_mod.py').write_text('import json, sys\nprint(json.dumps(sys.argv[1:]))\n')
    target = ['-m', 'probe_mod'] if as_module else [str(tmp_path / 'probe_mod.py')]
    argv = [sys.executable, *opts, *target, '--rlhf_type', 'grpo', '-u', 'x']
    out = subprocess.run(
        argv, capture_output=True, text=True, cwd=tmp_path, check=True, env={**os.environ, 'PYTHONPATH': str(tmp_path)}
    )
    own, rest = python_options(argv[1:])
    assert own == opts and rest[: len(target)] == target
    assert rest[len(target) :] == json.loads(out.stdout)


# ---- the misses of issue 27 --------------------------------------------------------------------------------------


def test_the_torchrun_command_swift_rlhf_builds_is_read_as_ms_swift(monkeypatch):
    """ms-swift's own ``cli_main`` (swift/cli/main.py) with NPROC_PER_NODE set builds ``python -m
    torch.distributed.run --nproc_per_node 4 .../swift/cli/rlhf.py ARGS``: captured (nothing runs) and read."""
    from swift.cli import main as swift_main

    seen = {}

    def run(args):
        seen['args'] = args
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(swift_main.subprocess, 'run', run)
    monkeypatch.setenv('NPROC_PER_NODE', '4')
    monkeypatch.delenv('NNODES', raising=False)
    monkeypatch.setattr(sys, 'argv', ['swift', 'rlhf', *ARGS])
    swift_main.cli_main()
    built = seen['args']
    assert built[1:3] == ['-m', 'torch.distributed.run']
    assert kind_of(built) == ('swift', 'train')
    launch = read_launch(['--', *built], environ={'CUDA_VISIBLE_DEVICES': '0,1,2,3'})
    assert launch.framework == 'swift' and launch.argv == ARGS and _world(launch) == 4


@pytest.mark.parametrize('entry', [['/usr/local/bin/swift', 'rlhf'], ['-m', 'swift.cli.main', 'rlhf']])
def test_the_swift_command_under_torchrun_runs_one_rlhf_per_rank(monkeypatch, entry):
    """``torchrun --nproc_per_node 2 $(which swift) rlhf ARGS`` (grpo_bt_rm's train_grpo.sh): each rank runs ms-swift's
    own ``cli_main``, which with NPROC_PER_NODE unset runs ``python .../rlhf.py ARGS`` in that rank (captured here,
    nothing runs), so the world is torchrun's; read so."""
    from swift.cli import main as swift_main

    seen = {}

    def run(args):
        seen['args'] = args
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(swift_main.subprocess, 'run', run)
    monkeypatch.delenv('NPROC_PER_NODE', raising=False)
    monkeypatch.setenv('RANK', '1')
    monkeypatch.setenv('WORLD_SIZE', '2')
    monkeypatch.setattr(sys, 'argv', ['swift', 'rlhf', *ARGS])
    swift_main.cli_main()
    assert seen['args'][1].endswith('swift/cli/rlhf.py') and seen['args'][2:] == ARGS  # one process per rank
    launch = read_launch(
        ['--', 'torchrun', '--nproc_per_node', '2', *entry, *ARGS], environ={'CUDA_VISIBLE_DEVICES': '0,1'}
    )
    assert launch.framework == 'swift' and launch.argv == ARGS and _world(launch) == 2


def test_torchrun_args_in_a_variable_before_the_entry(tmp_path):
    """``torchrun $DISTRIBUTED_ARGS ${CODE_PATH}/swift/cli/rlhf.py`` (multi-node, ms-swift issue #6509's shape):
    torchrun's own multi-node options, split from the variable as bash splits it."""
    sh = tmp_path / 'train.sh'
    sh.write_text(
        '#!/bin/bash\nCODE_PATH=/opt/ms-swift\nexport CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n'
        'DISTRIBUTED_ARGS="--nnodes 2 --node_rank 0 --master_addr 10.0.0.1 --master_port 29500 '
        '--nproc_per_node 8"\n'
        f'torchrun $DISTRIBUTED_ARGS ${{CODE_PATH}}/swift/cli/rlhf.py {" ".join(ARGS)}\n'
    )
    launch = read_launch([str(sh)], environ={})
    assert launch.framework == 'swift' and launch.argv == ARGS
    assert {k: launch.env[k] for k in ('NNODES', 'NODE_RANK', 'MASTER_ADDR', 'MASTER_PORT', 'NPROC_PER_NODE')} == {
        'NNODES': '2',
        'NODE_RANK': '0',
        'MASTER_ADDR': '10.0.0.1',
        'MASTER_PORT': '29500',
        'NPROC_PER_NODE': '8',
    }
    assert _world(launch) == 16


def test_torchrun_reads_its_pet_variables():
    """torchrun takes an option it was not given from PET_<NAME> (its ``env`` action): the launch's, not the
    guard's own."""
    launch = read_launch(
        ['--', 'torchrun', '/opt/ms-swift/swift/cli/rlhf.py', *ARGS],
        environ={**CVD8, 'PET_NPROC_PER_NODE': '8', 'PET_NNODES': '2', 'PET_NODE_RANK': '1', 'PET_MASTER_ADDR': 'head'},
    )
    assert _world(launch) == 16 and launch.env['NODE_RANK'] == '1'


def test_an_unresolved_world_size_variable_names_it_and_the_way_out():
    with pytest.raises(
        GuardError,
        match=r'--nnodes \$NNODES: the variable could not be resolved.*pass --env '
        r'NNODES=',
    ) as e:
        read_launch(
            ['--', 'torchrun', '--nnodes', '$NNODES', '--nproc_per_node', '8', '/x/swift/cli/rlhf.py', *ARGS],
            environ={},
        )
    assert '\n' not in str(e.value)
    with pytest.raises(GuardError, match=r'deepspeed \$GPUS: the variable could not be resolved'):
        read_launch(['--', 'deepspeed', '--num_gpus', '$GPUS', 'swift/cli/rlhf.py', *ARGS], environ={})


@pytest.mark.parametrize(
    'argv,said',
    [
        (['torchrun', '--nproc_per_node'], 'torchrun stops at once with "error: argument --nproc-per-node'),
        (
            ['accelerate', 'launch', '--num_processes', 'four', 'train.py'],
            'accelerate launch stops at once with "error: argument --num_processes',
        ),
        (['deepspeed', '--num_gpus', 'two', 'swift/cli/rlhf.py'], 'deepspeed stops at once with "error: argument'),
        (['srun', '-N', '2'], '`srun` with no command to run'),
    ],
)
def test_a_launcher_that_refuses_its_own_options_says_so_in_one_line(argv, said, capsys):
    assert guard.main(['check', '--', *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0], err


def test_a_launcher_is_read_without_its_package(monkeypatch, capsys):
    """deepspeed's parser is rebuilt from its snapshot: a machine without DeepSpeed reads the launch all the same."""
    monkeypatch.setitem(sys.modules, 'deepspeed.launcher.runner', None)  # import fails as on a machine without it
    monkeypatch.setitem(sys.modules, 'deepspeed', None)
    assert guard.main(['check', '--', 'deepspeed', '--num_gpus', '2', 'swift/cli/rlhf.py', *ARGS]) in (0, 1)
    assert 'not installed' not in capsys.readouterr().err


@pytest.mark.parametrize(
    'words,want',
    [
        (['srun', '--nodes=2', '--ntasks-per-node=1', 'torchrun'], ('2', '1')),
        (['srun', '-N2', '-n', '2', '--gres', 'gpu:8', '-l', 'python'], ('2', 'true')),
        (['srun', '--export=ALL', '-N', '4', '--', 'python'], ('4', None)),
    ],
)
def test_srun_options_end_at_the_first_word_that_is_not_one(words, want):
    opts, rest = slurm_options(words[1:])
    assert rest == [words[-1]] and (opts.get('nodes'), opts.get('ntasks-per-node', opts.get('l'))) == want


def test_sbatch_script_with_srun_accelerate(tmp_path):
    """open-r1's slurm/train.slurm shape: the #SBATCH header gives the job's nodes and GPUs, SLURM_NNODES reaches
    the command, srun runs accelerate once per node."""
    sh = tmp_path / 'train.slurm.sh'
    sh.write_text(
        '#!/bin/bash\n#SBATCH --job-name=grpo\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n'
        '#SBATCH --gres=gpu:8\n\nNUM_NODES=$SLURM_NNODES\nexport CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n'
        'srun --nodes=$NUM_NODES --ntasks=$NUM_NODES accelerate launch --multi_gpu --num_machines '
        '$NUM_NODES --num_processes 16 --machine_rank $SLURM_PROCID --main_process_ip head '
        'train_grpo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct --num_generations 8 '
        '--per_device_train_batch_size 2\n'
    )
    assert sbatch_directives(sh.read_text())['gres'] == 'gpu:8'
    launch = read_launch([str(sh)], environ={})
    assert launch.framework == 'trl' and launch.env['NNODES'] == '2' and launch.env['NPROC_PER_NODE'] == '8'
    assert _world(launch) == 16


def test_srun_torchrun_and_srun_python(tmp_path):
    launch = read_launch(
        [
            '--',
            'srun',
            '-N',
            '2',
            '--ntasks-per-node',
            '1',
            'torchrun',
            '--nnodes',
            '2',
            '--nproc_per_node',
            '8',
            '/opt/ms-swift/swift/cli/rlhf.py',
            *ARGS,
        ],
        environ=CVD8,
    )
    assert launch.framework == 'swift' and _world(launch) == 16
    # srun runs python once per task: 2 nodes x 4 tasks
    launch = read_launch(
        ['--', 'srun', '--nodes=2', '--ntasks-per-node=4', 'python', '-u', '/opt/ms-swift/swift/cli/rlhf.py', *ARGS],
        environ={'CUDA_VISIBLE_DEVICES': '0,1,2,3'},
    )
    assert launch.framework == 'swift' and _world(launch) == 8
    # more srun tasks than the launcher inside spans: said
    launch = read_launch(
        ['--', 'srun', '-N', '2', 'torchrun', '--nproc_per_node', '8', '/x/swift/cli/rlhf.py', *ARGS], environ=CVD8
    )
    assert any('forms a group of its own' in n for n in launch.notes)


@pytest.mark.parametrize(
    'argv,want',
    [
        (['python', '-m', 'swift.cli.rollout', '--model', 'm'], ('swift', 'rollout')),
        (['python3', '/opt/ms-swift/swift/cli/rollout.py', '--model', 'm'], ('swift', 'rollout')),
        (['python3.10', '-u', '-m', 'swift.cli.rlhf', '--model', 'm'], ('swift', 'train')),
        (['/usr/bin/python3.11', '-m', 'swift.cli.main', 'rlhf', '--model', 'm'], ('swift', 'train')),
        (['python', '-m', 'swift.cli.main', 'rollout', '--model', 'm'], ('swift', 'rollout')),
        (['megatron', 'rlhf', '--rlhf_type', 'grpo'], ('megatron', 'train')),
        (['python', '-m', 'swift.cli._megatron.rlhf', '--rlhf_type', 'grpo'], ('megatron', 'train')),
        (['torchrun', '--nproc_per_node', '8', '/opt/ms-swift/swift/cli/_megatron/rlhf.py'], ('megatron', 'train')),
        (['python', '-m', 'trl.scripts.vllm_serve', '--model', 'm'], ('trl', 'rollout')),
        (['python', '-m', 'trl.cli.main', 'vllm-serve', '--model', 'm'], ('trl', 'rollout')),
        (['accelerate', 'launch', '/site-packages/trl/scripts/grpo.py', '--model_name_or_path', 'm'], ('trl', 'train')),
        (['python', '-m', 'swift.cli.sft', '--model', 'm'], ('unread', 'train')),
    ],
)
def test_entry_points_from_one_table(argv, want):
    assert kind_of(argv) == want


def test_python_m_swift_cli_rollout_is_read_as_swift_rollout():
    launch = read_launch(
        [
            '--',
            'python',
            '-m',
            'swift.cli.rollout',
            '--model',
            'Qwen/Qwen2.5-7B-Instruct',
            '--vllm_tensor_parallel_size',
            '2',
        ],
        environ={'CUDA_VISIBLE_DEVICES': '6,7'},
    )
    assert launch.kind == 'rollout' and launch.rollout.framework == 'swift'
    assert launch.rollout.tensor_parallel_size == 2 and launch.rollout.gpus == [6, 7]


def test_python_m_swift_cli_main_rlhf_is_swift_rlhf():
    """swift/cli/main.py run as a module is ``swift rlhf``: it starts torchrun from NPROC_PER_NODE itself."""
    launch = read_launch(
        ['--', 'python', '-m', 'swift.cli.main', 'rlhf', *ARGS],
        environ={'NPROC_PER_NODE': '4', 'CUDA_VISIBLE_DEVICES': '0,1,2,3'},
    )
    assert launch.framework == 'swift' and launch.argv == ARGS and _world(launch) == 4


# ---- a trainer the guard did not read: never OK ----------------------------------------------------------------

ROLLOUT = 'CUDA_VISIBLE_DEVICES=7 swift rollout --model Qwen/Qwen2.5-7B-Instruct --vllm_max_model_len 4096 &\n'


def _check(args, capsys):
    rc = guard.main(['check', '--gpus', '8', '--gpu-type', 'A100-80G', '--json', *args])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    'trainer',
    [
        'python my_train.py --lr 1e-5',
        'deepspeed --num_gpus 7 my_train.py',
    ],
)
def test_a_rollout_beside_an_unread_trainer_is_unchecked_never_ok(trainer, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'my_train.py').write_text('import torch\nprint("my own loop")\n')
    sh = tmp_path / 'run.sh'
    sh.write_text('#!/bin/bash\n' + ROLLOUT + trainer + '\n')
    rc, out = _check([str(sh)], capsys)
    assert out['verdict'] == 'UNCHECKED' and rc == 1
    assert out['launch']['rollout'] is not None and 'does not read' in out['unchecked']
    rc, out = _check([str(sh), '--allow-unchecked'], capsys)
    assert rc == 0 and out['verdict'] == 'UNCHECKED'
    # the same trainer alone: nothing to check, one line, exit 2
    sh.write_text('#!/bin/bash\n' + trainer + '\n')
    assert guard.main(['check', str(sh)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and 'does not read' in err[0]


def test_unread_trainer_on_the_command_line_with_rollout(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'my_train.py').write_text('import torch\nprint("my own loop")\n')
    rc, out = _check(['--rollout', ROLLOUT.strip(' &\n'), '--', 'python', 'my_train.py'], capsys)
    assert rc == 1 and out['verdict'] == 'UNCHECKED' and 'does not read' in out['unchecked']


@pytest.mark.parametrize(
    'trainer',
    [
        'CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 NPROC_PER_NODE=7 megatron rlhf --rlhf_type grpo --model '
        'Qwen/Qwen2.5-7B-Instruct --use_vllm true --vllm_mode server --micro_batch_size 1 --global_batch_size 56 '
        '--num_generations 8 --reward_funcs accuracy',
        'NPROC_PER_NODE=7 python -m swift.cli._megatron.rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct '
        '--use_vllm true --vllm_mode server --micro_batch_size 1 --global_batch_size 56 --num_generations 8 '
        '--reward_funcs accuracy',
    ],
)
def test_a_megatron_trainer_beside_a_rollout_server_is_read_and_planned(trainer, tmp_path, capsys, monkeypatch):
    """Server mode in ms-swift's Megatron examples (examples/megatron/grpo/*server*.sh shape): the trainer is read
    by the Megatron front end and planned with ms-swift's arithmetic, and the rollout server is checked beside it."""
    monkeypatch.chdir(tmp_path)
    sh = tmp_path / 'run.sh'
    sh.write_text('#!/bin/bash\n' + ROLLOUT + trainer + '\n')
    rc, out = _check([str(sh)], capsys)
    assert out['framework'] == 'megatron' and 'does not read' not in (out['unchecked'] or '')
    assert out['plan']['world_size'] == 7 and out['plan']['parallel']['dp'] == 7
    assert any(m['role'] == 'rollout' for m in out['memory']), out['memory']


def test_a_trl_script_beside_a_prep_script_is_still_the_trainer(tmp_path, monkeypatch):
    """A script that does not import TRL before the TRL trainer: the trainer read is the TRL one."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'prep.py').write_text('print("prepare data")\n')
    (tmp_path / 'train_grpo.py').write_text('from trl import GRPOConfig, GRPOTrainer, TrlParser\n')
    sh = tmp_path / 'run.sh'
    sh.write_text(
        '#!/bin/bash\npython prep.py\naccelerate launch --num_processes 2 train_grpo.py '
        '--model_name_or_path Qwen/Qwen2.5-7B-Instruct\n'
    )
    launch = read_launch([str(sh)], environ={})
    assert launch.framework == 'trl' and launch.unread_trainer is None and launch.env['NPROC_PER_NODE'] == '2'


def test_srun_running_a_shell_command_string(tmp_path):
    """open-r1's slurm/train.slurm: ``srun $SRUN_ARGS bash -c "$LAUNCHER --role \\$SLURMD_NODENAME: $CMD"``, with
    LAUNCHER an accelerate command that sets its own variables first (its WORLD_SIZE written out here: the script
    computes it with $((...)); its `clear; srun` is written without `clear;`, which the shell reader does not split
    from the word yet)."""
    sh = tmp_path / 'train.slurm.sh'
    sh.write_text(
        '#!/bin/bash\n#SBATCH --job-name=open-r1\n#SBATCH --ntasks-per-node=1\n#SBATCH --exclusive\n'
        '#SBATCH --gres=gpu:8\n#SBATCH --nodes=2\n\nNUM_NODES=$SLURM_NNODES\nWORLD_SIZE=16\n'
        'MASTER_ADDR=head\nMASTER_PORT=6000\nexport CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n'
        'export CMD=" src/open_r1/grpo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct --num_generations 8 '
        '--per_device_train_batch_size 2"\n'
        'export LAUNCHER="ACCELERATE_LOG_LEVEL=info accelerate launch --multi_gpu --gradient_accumulation_steps 4 '
        '--num_machines $NUM_NODES --num_processes $WORLD_SIZE --main_process_ip $MASTER_ADDR --main_process_port '
        '$MASTER_PORT --machine_rank $SLURM_PROCID --rdzv_backend=c10d --max_restarts 1 --tee 3 "\n'
        'SRUN_ARGS=" --wait=60 --kill-on-bad-exit=1 --nodes=$NUM_NODES --ntasks=$NUM_NODES"\n'
        'srun $SRUN_ARGS bash -c "$LAUNCHER --role \\$SLURMD_NODENAME: $CMD" 2>&1\n'
    )
    assert kind_of(['srun', '--nodes=2', 'bash', '-c', 'X=1 accelerate launch t.py']) == ('trl', 'train')
    launch = read_launch([str(sh)], environ={})
    assert launch.framework == 'trl' and launch.trl.script == 'src/open_r1/grpo.py'
    assert (launch.env['NNODES'], launch.env['NPROC_PER_NODE'], launch.env['MASTER_ADDR']) == ('2', '8', 'head')
    assert _world(launch) == 16 and not any('group of its own' in n for n in launch.notes)


def test_trl_script_under_torchrun_one_process_per_gpu(tmp_path, monkeypatch):
    """``torchrun --nproc-per-node gpu`` / ``python -m torch.distributed.run`` running a TRL script: torch's
    ``determine_local_world_size`` counts the visible GPUs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'train_grpo.py').write_text('from trl import GRPOConfig, GRPOTrainer, TrlParser\n')
    flags = ['--model_name_or_path', 'Qwen/Qwen2.5-7B-Instruct', '--num_generations', '6']
    launch = read_launch(
        ['--', 'torchrun', '--nproc-per-node', 'gpu', 'train_grpo.py', *flags],
        environ={'CUDA_VISIBLE_DEVICES': '0,1,2'},
    )
    r = check_launch(launch, Hardware(gpus=8, gpu_type='A100-80G', source='flags'), packages=PKGS, memory=False)
    assert launch.framework == 'trl' and r.plan.world_size == 3
    assert any(a.startswith('`torchrun train_grpo.py` starts one process per visible GPU') for a in r.assumptions)
    launch = read_launch(
        [
            '--',
            'python3',
            '-m',
            'torch.distributed.run',
            '--nnodes=2',
            '--node-rank=0',
            '--master-addr=head',
            '--nproc-per-node=4',
            'train_grpo.py',
            *flags,
        ],
        environ={'CUDA_VISIBLE_DEVICES': '0,1,2,3'},
    )
    assert launch.framework == 'trl' and launch.trl.script == 'train_grpo.py' and _world(launch) == 8
    assert launch.trl.display == 'python3 -m torch.distributed.run train_grpo.py'


def test_slurm_variables_from_the_batch_header_reach_torchrun(tmp_path):
    """``#SBATCH -N 2`` / ``--gpus-per-node=a100:4`` (sbatch(1)): SLURM_NNODES and SLURM_GPUS_ON_NODE as the job's
    commands see them; the interpreter named by a variable the script sets."""
    sh = tmp_path / 'job.sh'
    sh.write_text(
        '#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gpus-per-node=a100:4\n#SBATCH --ntasks-per-node=1\n'
        'PYTHON=/usr/bin/python3.11\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\n'
        'srun $PYTHON -m torch.distributed.run --nnodes $SLURM_NNODES --nproc_per_node $SLURM_GPUS_ON_NODE '
        '--rdzv-backend c10d --rdzv-endpoint head:29400 /opt/ms-swift/swift/cli/rlhf.py ' + ' '.join(ARGS) + '\n'
    )
    launch = read_launch([str(sh)], environ={})
    assert launch.framework == 'swift' and launch.argv == ARGS
    assert (launch.env['NNODES'], launch.env['NPROC_PER_NODE'], launch.env['MASTER_ADDR']) == ('2', '4', 'head')
    assert _world(launch) == 8


def test_an_interpreter_variable_set_nowhere_is_named(tmp_path, capsys):
    sh = tmp_path / 'run.sh'
    sh.write_text('#!/bin/bash\n$PYTHON -m swift.cli.rlhf ' + ' '.join(ARGS) + '\n')
    assert guard.main(['check', str(sh)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and '$PYTHON: the variable could not be resolved' in err[0] and '--env PYTHON=' in err[0]


def test_accelerate_launch_running_swift_entry():
    launch = read_launch(
        ['--', 'accelerate', 'launch', '--num_processes', '4', '/opt/ms-swift/swift/cli/rlhf.py', *ARGS],
        environ={'CUDA_VISIBLE_DEVICES': '0,1,2,3', 'HF_HOME': '/nonexistent'},
    )
    assert launch.framework == 'swift' and launch.argv == ARGS and _world(launch) == 4


def test_trl_grpo_hands_accelerate_its_flags_as_accelerates_parser_has_them():
    """``trl grpo ... --same_network --num_processes 2``: TRL hands the words its parser does not know to accelerate's
    ``launch_command_parser`` (trl/cli/accelerate_launcher.py); ``--same_network`` is a flag there, so the
    ``--num_processes 2`` after it is accelerate's too."""
    from accelerate.commands.launch import launch_command_parser

    words = ['--same_network', '--num_processes', '2']
    real = launch_command_parser().parse_args([*words, 'grpo.py'])
    launch = read_launch(
        ['--', 'trl', 'grpo', '--model_name_or_path', 'Qwen/Qwen2.5-7B-Instruct', *words],
        environ={'HF_HOME': '/nonexistent', 'CUDA_VISIBLE_DEVICES': '0,1'},
    )
    assert real.same_network is True and launch.env['NPROC_PER_NODE'] == str(real.num_processes) == '2'
    assert '--same_network' not in launch.argv


def test_python_m_trl_cli_main_grpo_is_trl_grpo():
    flags = ['--model_name_or_path', 'Qwen/Qwen2.5-7B-Instruct', '--num_generations', '4', '--num_processes', '2']
    launch = read_launch(
        ['--', 'python', '-m', 'trl.cli.main', 'grpo', *flags],
        environ={'HF_HOME': '/nonexistent', 'CUDA_VISIBLE_DEVICES': '0,1'},
    )
    same = read_launch(
        ['--', 'trl', 'grpo', *flags], environ={'HF_HOME': '/nonexistent', 'CUDA_VISIBLE_DEVICES': '0,1'}
    )
    assert launch.framework == 'trl' and (launch.argv, launch.env) == (same.argv, same.env)
    assert launch.env['NPROC_PER_NODE'] == '2'


def test_a_slurm_batch_scripts_gpus_are_the_nodes_gpus(tmp_path, capsys):
    """sbatch(1): ``#SBATCH --gres=gpu:8`` allocates 8 GPUs on each node; with no --gpus and no nvidia-smi those
    are the hardware the launch is planned on (open-r1's slurm/train.slurm shape)."""
    sh = tmp_path / 'train.slurm.sh'
    sh.write_text(
        '#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:8\n'
        'srun torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 --node_rank $SLURM_NODEID '
        '/opt/ms-swift/swift/cli/rlhf.py --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct '
        '--dataset AI-MO/NuminaMath-TIR --reward_funcs accuracy --num_generations 8 '
        '--per_device_train_batch_size 8 --tuner_type lora\n'
    )
    rc = guard.main(['check', '--gpu-type', 'H100', '--json', str(sh)])
    out = json.loads(capsys.readouterr().out)
    assert out['hardware']['gpus'] == 8 and out['hardware']['source'] == 'sbatch'
    assert out['plan']['world_size'] == 16, (rc, out['plan'])


def _script(tmp_path, text: str):
    """The launch of a script ``text`` written to run.sh, read as the guard reads it."""
    sh = tmp_path / 'run.sh'
    sh.write_text(text)
    return read_launch([str(sh)], environ={})


def test_a_slurm_jobs_gpus_are_its_visible_devices(tmp_path):
    """Slurm's GPU gres sets CUDA_VISIBLE_DEVICES for the job (slurm.schedmd.com/gres.html): a batch script that
    counts its GPUs from it (grpo-llm-unlearning's run-grpo.sh: ``IFS=',' read -ra G <<< "${CUDA_VISIBLE_DEVICES:-0}"``)
    starts one process per allocated GPU, not the one its fallback gives."""
    launch = _script(
        tmp_path,
        '#!/bin/bash\n#SBATCH --gres=gpu:2\n'
        'IFS="," read -ra VISIBLE <<< "${CUDA_VISIBLE_DEVICES:-0}"\nNUM_GPUS="${NUM_GPUS:-${#VISIBLE[@]}}"\n'
        'accelerate launch --num_processes "$NUM_GPUS" train.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct\n',
    )
    assert launch.command[:4] == ['accelerate', 'launch', '--num_processes', '2']
    assert launch.trl.accelerate['num_processes'] == 2


def test_a_python_program_on_stdin_is_not_the_trainer(tmp_path):
    """`python - <<'PY' ... PY` (a preflight check before the launch, Tri-modal-Evolution-Agent's Megatron script) is
    a guess at best: the launch after it is read."""
    launch = _script(
        tmp_path,
        "#!/bin/bash\npython - <<'PY'\nimport torch; print(torch.cuda.device_count())\nPY\n"
        'NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct\n',
    )
    assert launch.framework == 'swift' and launch.env['NPROC_PER_NODE'] == '2'


def test_a_wrapper_defined_where_it_is_not_read_runs_its_launch(tmp_path):
    """`run_py swift rlhf ...` with run_py a function of a file the script sources from another machine (k_bds's
    Slurm scripts): the launch it wraps is read, and a note says so. A program that is here is not unwrapped."""
    launch = _script(
        tmp_path,
        '#!/bin/bash\nsource /nonexistent/common.sh\n'
        'NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 run_py swift rlhf --rlhf_type grpo '
        '--model Qwen/Qwen2.5-7B-Instruct\n',
    )
    assert launch.framework == 'swift' and launch.env['NPROC_PER_NODE'] == '2'
    assert any('run_py is defined nowhere here' in n for n in launch.notes)
    env_launch = _script(tmp_path, '#!/bin/bash\nenv swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct\n')
    assert not any('defined nowhere' in n for n in env_launch.notes)
    # a program not installed here whose arguments are options and paths (`rsync -ah SRC/ DST/`) wraps no launch
    copied = _script(
        tmp_path,
        'swift rollout --model Qwen/Qwen2.5-7B-Instruct &\nrsync_x -ah "${OUT}/" "${CKPT}/" || true\n',
    )
    assert copied.kind == 'rollout'


def test_ascend_npus_are_the_visible_devices(tmp_path):
    """ms-swift's own Ascend examples (examples/ascend/...) name their NPUs with ASCEND_RT_VISIBLE_DEVICES, which
    torch_npu's device count honours as CUDA's does CUDA_VISIBLE_DEVICES: 8 processes on NPUs 8-15 of a 16-NPU node are
    one process per visible device. A command that also sets CUDA_VISIBLE_DEVICES keeps it."""
    launch = _script(
        tmp_path,
        '#!/bin/bash\nexport ASCEND_RT_VISIBLE_DEVICES=${ASCEND_RT_VISIBLE_DEVICES:-8,9,10,11,12,13,14,15}\n'
        'NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct\n',
    )
    assert launch.env['CUDA_VISIBLE_DEVICES'] == '8,9,10,11,12,13,14,15'
    assert any('ASCEND_RT_VISIBLE_DEVICES=8,9' in n and 'Ascend NPUs' in n for n in launch.notes)
    both = _script(
        tmp_path,
        'CUDA_VISIBLE_DEVICES=0,1 ASCEND_RT_VISIBLE_DEVICES=4,5 NPROC_PER_NODE=2 swift rlhf --rlhf_type grpo '
        '--model Qwen/Qwen2.5-7B-Instruct\n',
    )
    assert both.env['CUDA_VISIBLE_DEVICES'] == '0,1' and not any('Ascend' in n for n in both.notes)
    pasted = read_launch(
        '-- ASCEND_RT_VISIBLE_DEVICES=2,3 NPROC_PER_NODE=2 swift rlhf --model Qwen/Qwen2.5-7B-Instruct'.split(),
        environ={},
    )
    assert pasted.env['CUDA_VISIBLE_DEVICES'] == '2,3'


def test_an_undecided_role_split_reads_the_branch_with_the_training_launch(tmp_path):
    """A multi-node script whose node rank picks its role (a Baseten Megatron-SWIFT job: ``if [ "$BT_NODE_RANK" -eq
    "$ROLLOUT_NODE" ]; then swift rollout ...; else megatron rlhf ...; fi``), the rank not known here: the branch with
    the training launch is read (the first one would give a lone rollout server), as an undecided ``case`` does.
    A first branch that trains keeps being the one read."""
    launch = _script(
        tmp_path,
        '#!/bin/bash\nLAST=$((GROUP_SIZE - 1))\nif [ "$NODE_RANK_X" -eq "$LAST" ]; then\n'
        '  swift rollout --model Qwen/Qwen2.5-7B-Instruct --vllm_tensor_parallel_size 2 &\n  wait\nelse\n'
        '  NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --use_vllm true '
        '--vllm_mode server --num_generations 8\nfi\n',
    )
    assert launch.framework == 'swift' and launch.env['NPROC_PER_NODE'] == '8'
    assert any('the branch with the launch' in n for n in launch.notes)
    first = _script(
        tmp_path,
        'if [ "$NODE_RANK_X" = 0 ]; then\n  NPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model m\nelse\n'
        '  NPROC_PER_NODE=2 swift rlhf --rlhf_type grpo --model m\nfi\n',
    )
    assert first.env['NPROC_PER_NODE'] == '4'


def test_an_undecided_role_split_reads_the_other_roles_rollout_server(tmp_path):
    """The role the launch does not take still starts the server the launch talks to: ``case "$1" in rollout)
    CUDA_VISIBLE_DEVICES=0,1 swift rollout ...;; train) ... swift rlhf --vllm_mode server ...;; esac`` is run as
    ``bash run.sh rollout`` beside ``bash run.sh train`` (the same node: its GPU ids are this node's), and a node
    rank that picks the rollout node puts it on another node. The rest of that branch is not read."""
    train = (
        'CUDA_VISIBLE_DEVICES=2,3,4,5 NPROC_PER_NODE=4 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct '
        '--use_vllm true --vllm_mode server --num_generations 8'
    )
    serve = 'swift rollout --model Qwen/Qwen2.5-7B-Instruct --vllm_tensor_parallel_size 2'
    same = _script(
        tmp_path,
        f'#!/bin/bash\ncase "$1" in\n  rollout)\n    export LR=1\n    CUDA_VISIBLE_DEVICES=0,1 {serve}\n    ;;\n'
        f'  train)\n    {train}\n    ;;\nesac\n',
    )
    assert same.env['NPROC_PER_NODE'] == '4' and 'LR' not in same.env
    assert same.rollout is not None and same.rollout.source.endswith('run.sh:5')
    assert same.rollout.gpus == [0, 1] and same.rollout.tensor_parallel_size == 2 and same.rollout.remote is None
    assert same.rollout.foreground is None  # another run of the script: it does not hold up this one's launch
    ranked = _script(
        tmp_path,
        f'#!/bin/bash\nif [ "$NODE_RANK_X" -eq 0 ]; then\n  {serve} &\n  wait\nelse\n  {train}\nfi\n',
    )
    assert ranked.rollout is not None and ranked.rollout.source.endswith('run.sh:3')
    assert ranked.rollout.remote and 'another node' in ranked.rollout.remote
    alone = _script(tmp_path, f'#!/bin/bash\ncase "$1" in\n  a) echo hi ;;\n  b) {train} ;;\nesac\n')
    assert alone.rollout is None


def test_a_server_the_script_runs_in_the_foreground_blocks_its_launch(tmp_path):
    """`trl vllm-serve ...` on one line and `accelerate launch ...` on the next: bash runs the server to its end first,
    and a server does not end, so the launch never starts (checked against real bash below). With `&` (or in a group
    run with `&`) it goes on; a wrapper that detaches (tmux -d) is not taken for a blocking server."""
    train = 'CUDA_VISIBLE_DEVICES=1 accelerate launch --num_processes 1 train.py --model_name_or_path m --use_vllm true'
    serve = 'CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model Qwen/Qwen2.5-0.5B-Instruct'
    blocked = _script(tmp_path, f'#!/bin/bash\n{serve}\n{train}\n')
    assert blocked.rollout.foreground and 'line 3' in blocked.rollout.foreground
    for text in (
        f'{serve} &\n{train}\n',
        f'{{ sleep 1; {serve}; }} &\n{train}\n',
        f'CUDA_VISIBLE_DEVICES=0 nohup {serve.split(" ", 1)[1]} > log 2>&1 &\n{train}\n',
    ):
        assert _script(tmp_path, '#!/bin/bash\n' + text).rollout.foreground is None, text
    detached = _script(tmp_path, f'#!/bin/bash\ntmux new-session -d -s vllm "{serve}"\n{train}\n')
    assert detached.rollout is None or detached.rollout.foreground is None
    # real bash: a server that does not exit (here `sleep`) holds the script at its line
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'trl').write_text('#!/bin/sh\nexec sleep 30\n')
    (bin_dir / 'accelerate').write_text(f'#!/bin/sh\necho launched > {tmp_path}/ran\n')
    for name in ('trl', 'accelerate'):
        (bin_dir / name).chmod(0o755)
    (tmp_path / 'run.sh').write_text(f'#!/bin/bash\n{serve}\n{train}\n')
    import subprocess

    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(['bash', str(tmp_path / 'run.sh')], env={'PATH': f'{bin_dir}:/usr/bin:/bin'}, timeout=2)
    assert not (tmp_path / 'ran').exists()
