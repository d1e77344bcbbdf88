"""ms-swift's own entry script under another launcher (``deepspeed --num_gpus N .../swift/cli/rlhf.py``,
``deepspeed --include localhost:0,1``, ``torchrun ... swift/cli/rlhf.py``, ``python -m swift.cli.rlhf``) is an
ms-swift launch, with the process layout the launcher gives. The expected layout comes from DeepSpeed's own
``deepspeed/launcher/runner.py::main``, run here with its accelerator's device count standing in for GPUs this
machine does not have and its final ``subprocess.Popen`` captured (nothing is started): the ``--world_info`` it hands
``deepspeed.launcher.launch`` names the slots, one process each."""

import base64
import json

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch
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
    '3',
]
NODE_GPUS = 8


class _FakeAccelerator:  # stands in for the GPUs: deepspeed asks only these two things before launching
    def device_count(self):
        return NODE_GPUS

    def visible_devices_envs(self):
        return ['CUDA_VISIBLE_DEVICES']


class _Captured(Exception):
    pass


def deepspeed_slots(ds_args, cvd, monkeypatch):
    """The slots deepspeed's runner gives the processes on this node, or the error it stops with."""
    from deepspeed.launcher import runner

    seen = {}

    def popen(cmd, env=None):
        info = next(c for c in cmd if c.startswith('--world_info='))
        seen['world'] = json.loads(base64.urlsafe_b64decode(info.split('=', 1)[1]))
        raise _Captured

    monkeypatch.setattr(runner, 'get_accelerator', lambda: _FakeAccelerator())
    monkeypatch.setattr(runner.subprocess, 'Popen', popen)
    if cvd is None:
        monkeypatch.delenv('CUDA_VISIBLE_DEVICES', raising=False)
    else:
        monkeypatch.setenv('CUDA_VISIBLE_DEVICES', cvd)
    try:
        runner.main([*ds_args, '--hostfile', '/nonexistent/hostfile', 'swift/cli/rlhf.py', *ARGS])
    except _Captured:
        return seen['world']['localhost']
    except ValueError as e:
        return str(e)


CASES = [
    (['--num_gpus', '4'], None),
    (['--num_gpus', '2'], '4,5,6,7'),
    (['--include', 'localhost:2,3'], None),
    (['--include', 'localhost:1,5'], '0,1'),
    ([], '0,1,2'),
    ([], None),
    (['--exclude', 'localhost:0'], None),
    (['--num_gpus', '2', '--include', 'localhost:0,1'], None),
    (['--num_accelerators', '3'], None),
]


@pytest.mark.parametrize('ds_args,cvd', CASES)
def test_deepspeed_layout_is_deepspeeds(ds_args, cvd, monkeypatch):
    want = deepspeed_slots(ds_args, cvd, monkeypatch)
    environ = {} if cvd is None else {'CUDA_VISIBLE_DEVICES': cvd}
    argv = ['--', 'deepspeed', *ds_args, '/opt/ms-swift/swift/cli/rlhf.py', *ARGS]
    if isinstance(want, str):
        with pytest.raises(GuardError) as e:
            read_launch(argv, environ=environ)
        assert want in str(e.value)
        return
    launch = read_launch(argv, environ=environ)
    assert launch.framework == 'swift'
    r = check_launch(launch, Hardware(gpus=NODE_GPUS, gpu_type='A100-80G', source='flags'), packages=PKGS, memory=False)
    assert r.plan.world_size == len(want)
    assert launch.env['CUDA_VISIBLE_DEVICES'] == ','.join(map(str, want))
    # 3 prompts x processes must divide by 8 generations: ms-swift's own batch check sees the launcher's count
    assert ('batch.num-generations-divides' in {f.rule for f in r.findings}) == (3 * len(want) % 8 != 0)


@pytest.mark.parametrize(
    'launcher,want',
    [
        (['torchrun', '--nproc_per_node', '4'], 4),
        (['torchrun', '--nproc-per-node=2', '--master_port', '29501'], 2),
        (['python', '-u'], 1),
        (['python', '-m'], 1),
        (['torchrun', '--nproc_per_node', '4', '-m'], 4),
    ],
)
def test_torchrun_and_python_entry(launcher, want):
    from torch.distributed.run import determine_local_world_size, get_args_parser

    entry = ['swift.cli.rlhf'] if launcher[-1] == '-m' else ['swift/cli/rlhf.py']
    if launcher[0] == 'torchrun':  # torch's own parser and count for the same options
        args = get_args_parser().parse_args([*launcher[1:], *entry, *ARGS])
        assert determine_local_world_size(args.nproc_per_node) == want
    # NPROC_PER_NODE only tells `swift rlhf` to start torchrun: swift/cli/rlhf.py ignores it
    launch = read_launch(['--', *launcher, *entry, *ARGS], environ={'NPROC_PER_NODE': '8'})
    assert launch.framework == 'swift' and launch.argv[:2] == ['--rlhf_type', 'grpo']
    r = check_launch(launch, Hardware(gpus=NODE_GPUS, gpu_type='A100-80G', source='flags'), packages=PKGS, memory=False)
    assert r.plan.world_size == want


def test_entry_in_a_launcher_script(tmp_path):
    script = tmp_path / 'train.sh'
    script.write_text(
        'export CUDA_VISIBLE_DEVICES=0,1,2,3\nMS=/opt/ms-swift\ndeepspeed --num_gpus 2 '
        '$MS/swift/cli/rlhf.py \\\n  ' + ' '.join(ARGS) + '\n',
        encoding='utf-8',
    )
    launch = read_launch([str(script)], environ={})
    assert launch.framework == 'swift' and launch.env['NPROC_PER_NODE'] == '2'
    assert launch.argv[launch.argv.index('--model') + 1] == 'Qwen/Qwen2.5-7B-Instruct'


def test_unresolved_process_count_is_said_as_such():
    """ms-swift issue #6509's launch: `torchrun --nproc_per_node=$nproc_per_node ... ${CODE_PATH}/swift/cli/rlhf.py`
    with the variables set outside the script."""
    with pytest.raises(GuardError, match=r'\$nproc_per_node: the variable could not be resolved'):
        read_launch(
            ['--', 'torchrun', '--nproc_per_node=$nproc_per_node', '${CODE_PATH}/swift/cli/rlhf.py', *ARGS], environ={}
        )
    launch = read_launch(['--', 'torchrun', '--nproc_per_node=8', '${CODE_PATH}/swift/cli/rlhf.py', *ARGS], environ={})
    assert launch.framework == 'swift' and launch.env['NPROC_PER_NODE'] == '8'
