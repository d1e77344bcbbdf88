"""A launcher script read with the arguments it is run with (`grpo-guard check -- bash train.sh ARGS`), and without
them: its own argument checks (`[ $# -lt 1 ] && { echo usage; exit 1; }`) assumed to pass, a `case "$1"` dispatcher
read down the branch with the launch, and `nvidia-smi` answered for the machine the check is for. Where real bash can
run the script (stand-ins record the launchers' argv, as in test_bash_differential.py), the reading is compared
with it."""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from conftest import run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_recipes.frontends.bash.pure import Machine, nvidia_smi
from grpo_recipes.frontends.shell import read_script

BASH = shutil.which('bash')
pytestmark = pytest.mark.skipif(BASH is None, reason='needs bash')

RECORDER = '#!/bin/sh\nprintf "%s\\n" "$(basename "$0") $*" >> "$RECORD_LOG"\n'

USAGE = """#!/bin/bash
if [ "$#" -lt 1 ]; then
    echo "Usage: $0 <config.yaml> [nproc]"
    exit 1
fi
CONFIG=$1
NPROC=${2:-2}
CUDA_VISIBLE_DEVICES=0,1 accelerate launch --num_processes $NPROC train_grpo.py --config $CONFIG
"""

DISPATCH = """#!/bin/bash
case "$1" in
    rollout)
        CUDA_VISIBLE_DEVICES=2,3 swift rollout --model Qwen/Qwen2.5-7B-Instruct --vllm_tensor_parallel_size 2
        ;;
    train)
        NPROC_PER_NODE=2 CUDA_VISIBLE_DEVICES=0,1 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct
        ;;
    *)
        echo "usage: $0 rollout|train"
        exit 1
        ;;
esac
"""


def bash_runs(tmp_path: Path, text: str, args: list[str]) -> list[str]:
    """The launcher lines real bash runs for `bash script.sh ARGS` (each launcher a recorder)."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    for name in ('accelerate', 'swift'):
        (bin_dir / name).write_text(RECORDER)
        (bin_dir / name).chmod(stat.S_IRWXU)
    for name in ('basename',):
        (bin_dir / name).unlink(missing_ok=True)
        (bin_dir / name).symlink_to(shutil.which(name))
    script, log = tmp_path / 'run.sh', tmp_path / 'record.log'
    script.write_text(text)
    log.write_text('')
    subprocess.run(
        [BASH, str(script), *args],
        cwd=tmp_path,
        env={'PATH': str(bin_dir), 'RECORD_LOG': str(log)},
        capture_output=True,
        timeout=30,
    )
    return [line for line in log.read_text().splitlines() if line]


def swift_commands(text: str) -> list:
    """The `swift` commands of a script, as the guard reads it without its arguments."""
    return [c for c in read_script(text, {}, 'run.sh') if c.argv[:1] == ['swift']]


def guard_runs(text: str, args: list[str] | None) -> list[str]:
    cmds = read_script(text, {}, 'run.sh', args=args)
    return [' '.join(c.argv) for c in cmds if c.argv and c.argv[0] in ('accelerate', 'swift')]


@pytest.mark.parametrize('args', [['cfg.yaml'], ['cfg.yaml', '3'], []])
def test_the_script_with_its_arguments_reads_as_bash_runs_it(tmp_path, args):
    assert guard_runs(USAGE, args) == bash_runs(tmp_path, USAGE, args)  # [] exits at the usage check, as bash does


def test_without_its_arguments_the_check_is_assumed_to_pass():
    cmds = read_script(USAGE, {}, 'run.sh')
    launch = next(c for c in cmds if c.argv[:1] == ['accelerate'])
    assert launch.argv[-2:] == ['--config', '$1'] and '$1' in launch.unresolved
    assert launch.argv[3] == '2'  # ${2:-2}: the default applies when the argument is not given
    assert any('line 2' in a and 'exit 1' in a and 'assumed it passes' in a for a in launch.assumed)


DEFAULTED = """#!/bin/bash
MODEL=${1:-Qwen/Qwen2.5-7B-Instruct}
OUT=${2:-}
[ -z "$OUT" ] && { echo "usage: $0 [MODEL] OUT"; exit 1; }
case "$MODEL" in
    *72B*) N=8 ;;
    *) N=2 ;;
esac
NPROC_PER_NODE=$N swift rlhf --rlhf_type grpo --model $MODEL --output_dir "$OUT"
"""


@pytest.mark.parametrize('args', [['m/7B', 'out'], ['m/72B', 'out'], ['m/7B'], []])
def test_defaults_with_the_arguments_given_read_as_bash_runs_them(tmp_path, args):
    assert guard_runs(DEFAULTED, args) == bash_runs(tmp_path, DEFAULTED, args)  # [] and ['m/7B'] exit, as bash does


def test_without_the_arguments_a_default_is_the_value_but_decides_no_test():
    """`${1:-X}` gives X (what bash runs when $1 is not passed) and a test of it is decided from X (`case "$MODEL"`),
    except into a usage exit: whether the user passes the argument is not known here, so the branch that ends the
    script with an error is assumed not taken. An empty default (`${2:-}`) stands for the argument itself."""
    launch = next(c for c in read_script(DEFAULTED, {}, 'run.sh') if c.argv[:1] == ['swift'])
    assert launch.argv[5] == 'Qwen/Qwen2.5-7B-Instruct'  # the default, as the value
    assert launch.argv[-1] == '${2:-}' and '$2' in launch.unresolved  # the output dir is the user's
    assert any('line 4' in a and 'exit 1' in a and 'assumed it passes' in a for a in launch.assumed)
    assert launch.env['NPROC_PER_NODE'] == '2'  # the case on $MODEL decided from the default, as bash would


def test_a_usage_exit_on_a_default_is_assumed_not_taken():
    for text in (
        'M=${1:-a/b}\nif [ "$M" = "a/b" ]; then echo "pass a model"; exit 1; fi\nswift rlhf --model $M\n',
        'M=${1:-a/b}\nif [ "$M" != "a/b" ]; then :; else echo "pass a model"; exit 1; fi\nswift rlhf --model $M\n',
        'M=${1:-a/b}\n[ "$M" != "a/b" ] || exit 1\nswift rlhf --model $M\n',
        'M=${1:-a/b}\ncase $M in a/b) exit 3;; *) ;; esac\nswift rlhf --model $M\n',
    ):
        cmds = swift_commands(text)
        assert [c.argv for c in cmds] == [['swift', 'rlhf', '--model', 'a/b']], text


@pytest.mark.parametrize('args', [['train'], ['rollout'], ['other']])
def test_a_dispatcher_with_its_argument_reads_as_bash_runs_it(tmp_path, args):
    assert guard_runs(DISPATCH, args) == bash_runs(tmp_path, DISPATCH, args)


def test_a_dispatcher_without_its_argument_is_read_down_the_branch_with_the_launch():
    """... and the other role's server (``bash run.sh rollout``, beside it) is read as the server it talks to."""
    cmds = swift_commands(DISPATCH)
    assert [c.argv[1] for c in cmds] == ['rollout', 'rlhf']
    assert any('line 6' in a and 'the branch with the launch' in a for a in cmds[1].assumed)
    assert any("line 3: read as the script's other role" in a for a in cmds[0].assumed)


# the shape of jailbreak_research's paper_ahr_grpo/train.sh: a `case` on the experiment sets the rewards, one branch
# ends the script early with `exit 0` ("no training needed"), and the launch comes after the case
EXPERIMENT = """#!/bin/bash
EXP=$1
case $EXP in
    baseline) echo "no training needed"; exit 0 ;;
    asr) REWARDS=asr_reward ;;
    hybrid) REWARDS=hybrid_reward ;;
    *) echo "unknown experiment"; exit 1 ;;
esac
swift rlhf --rlhf_type grpo --reward_funcs $REWARDS
"""


@pytest.mark.parametrize('args', [['baseline'], ['asr'], ['hybrid'], ['other']])
def test_an_experiment_case_with_its_argument_reads_as_bash_runs_it(tmp_path, args):
    assert guard_runs(EXPERIMENT, args) == bash_runs(tmp_path, EXPERIMENT, args)


def test_an_experiment_case_without_its_argument_goes_on_to_the_launch():
    """Undecided: the first branch that goes on past the case (not `exit 0`, not the usage `exit 1`) is read."""
    cmds = swift_commands(EXPERIMENT)
    assert [c.argv[-1] for c in cmds] == ['asr_reward']


def test_nvidia_smi_answers_for_the_machine_checked():
    """nvidia-smi --help-query-gpu: "count: The number of NVIDIA GPUs in the system" (printed on each GPU's row);
    `-L` lists one line per GPU. Without a known machine its output stays unknown."""
    m = Machine(4, 'A100-80G')
    assert nvidia_smi(['--query-gpu=count', '--format=csv,noheader'], m) == '4\n' * 4
    assert nvidia_smi(['--query-gpu=index,name', '--format=csv,noheader'], m).splitlines()[3] == '3, NVIDIA A100-80G'
    assert nvidia_smi(['--query-gpu=count', '--format=csv'], m).splitlines()[0] == 'count'
    assert len(nvidia_smi(['-L'], m).splitlines()) == 4
    text = (
        'N=$(nvidia-smi -L | wc -l)\n'
        'C=$(nvidia-smi --query-gpu=count --format=csv,noheader,nounits | head -n 1)\n'
        'torchrun --nproc_per_node $((N - 1)) train.py --n $C\n'
    )
    cmd = read_script(text, {}, 'run.sh', machine=m)[-1]
    assert cmd.argv[:3] == ['torchrun', '--nproc_per_node', '3'] and cmd.argv[-1] == '4' and not cmd.unresolved
    assert read_script(text, {}, 'run.sh')[-1].unresolved  # no machine named: not known


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_check_takes_the_script_arguments_and_says_when_it_needs_them(tmp_path):
    script = _write(
        tmp_path,
        'train.sh',
        'if [ -z "$1" ]; then echo "usage: $0 MODEL"; exit 2; fi\n'
        'NPROC_PER_NODE=1 CUDA_VISIBLE_DEVICES=0 swift rlhf --rlhf_type grpo --model $1 --tuner_type lora '
        '--use_vllm false --dataset d.jsonl --reward_funcs accuracy\n',
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', '--gpus', '1', '--gpu-type', 'A100-80G', '--',
                   'bash', str(script), 'Qwen/Qwen2.5-7B-Instruct')  # fmt: skip
    assert 'Traceback' not in proc.stderr and json.loads(proc.stdout)['config']['model'] == 'Qwen/Qwen2.5-7B-Instruct'
    # a script that only ends with its usage error, run without arguments: the line, and how to give them
    ends = _write(tmp_path, 'ends.sh', 'MODE="${1:-}"\ncase "$MODE" in\n  "") echo usage; exit 1;;\nesac\n')
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '1', '--gpu-type', 'A100-80G', str(ends))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert 'ends.sh:3: the script ends with exit 1' in proc.stderr and '-- bash ' in proc.stderr


JOB = """#!/bin/bash
#SBATCH --nodes=2
#SBATCH --gres=gpu:4
NODES=($(scontrol show hostnames $SLURM_JOB_NODELIST))
for ((rank=0; rank<2; rank++)); do
    srun --nodes=1 --ntasks=1 --nodelist=${NODES[$rank]} bash train.sh "${NODES[0]}" "$rank" 2 8 &
done
wait
"""
STEP = 'accelerate launch --num_machines $3 --num_processes $4 --machine_rank $2 --main_process_ip $1 train_grpo.py\n'


def test_a_script_srun_runs_is_read_with_its_own_arguments(tmp_path):
    """`srun [OPTIONS] bash train.sh ARGS` in a batch script: train.sh is read as bash runs it on the node (srun's
    options read with its option table), and each argument keeps only what it holds unresolved: the node name from
    `scontrol` stays unknown, the rank and counts beside it are known."""
    (tmp_path / 'train.sh').write_text(STEP)
    from grpo_recipes.frontends.launchers import job_step

    read = read_script(JOB, {}, str(tmp_path / 'run.slurm'), cwd=str(tmp_path), launcher=job_step)
    cmds = [c for c in read if c.argv[0] == 'accelerate']
    first = cmds[0]
    assert first.argv[2:8] == ['--num_machines', '2', '--num_processes', '8', '--machine_rank', '0']
    assert first.argv[9].startswith('$(scontrol') and first.unresolved == [first.argv[9]]
    assert first.env['SLURM_NNODES'] == '1'  # the job step's own --nodes=1


SRUN_C = """#!/bin/bash
#SBATCH --gres=gpu:8
MODEL=${1:-Qwen/Qwen2.5-1.5B-Instruct}
CMD=" \\
    train_grpo.py --model_name_or_path $MODEL \\
    --per_device_train_batch_size 4 \\
    "
LAUNCHER="ACCELERATE_LOG_LEVEL=info accelerate launch --num_processes 7 --machine_rank \\$SLURM_PROCID"
srun --wait=60 --kill-on-bad-exit=1 --jobid 7 bash -c "$LAUNCHER $CMD" 2>&1
"""
# srun on a machine without Slurm: its options dropped, the job step run here (only the argv is compared)
# (srun gives the task its rank: SLURM_PROCID 0 for the first)
SRUN_STUB = (
    '#!/bin/bash\nwhile [ $# -gt 0 ]; do case "$1" in --jobid) shift 2;; -*) shift;; *) break;; esac; done\n'
    'SLURM_PROCID=0 exec "$@"\n'
)


@pytest.mark.parametrize('args', [['Qwen/Qwen3-4B'], []])
def test_a_string_srun_runs_with_bash_c_reads_as_bash_runs_it(tmp_path, args):
    """early open-r1's slurm/train.slurm: `srun $SRUN_ARGS --jobid $SLURM_JOB_ID bash -c "$LAUNCHER $CMD"`: the string
    is read in a new shell with the job step's variables, as bash runs it on the node."""
    from grpo_recipes.frontends.launchers import job_step

    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'srun').write_text(SRUN_STUB)
    (bin_dir / 'srun').chmod(stat.S_IRWXU)
    (bin_dir / 'bash').symlink_to(BASH)
    real = bash_runs(tmp_path, SRUN_C, args)
    read = read_script(SRUN_C, {}, str(tmp_path / 'run.slurm'), args=args, launcher=job_step)
    got = [' '.join(c.argv) for c in read if c.argv[:1] == ['accelerate']]
    assert got == real and len(real) == 1
    (cmd,) = [c for c in read if c.argv[:1] == ['accelerate']]
    assert cmd.env['SLURM_PROCID'] == '0' and cmd.env['ACCELERATE_LOG_LEVEL'] == 'info'


def test_a_script_argument_in_a_bash_c_string_stays_the_script_argument():
    """`ACCELERATOR=$3` ... `bash -c "accelerate launch --config_file $ACCELERATOR.yaml ..."` with the script's
    arguments not given: the string held the script's $3, not the new shell's (which has none)."""
    text = 'ACC=$3\nL="accelerate launch --config_file recipes/$ACC.yaml"\nbash -c "$L train_grpo.py"\n'
    (cmd,) = [c for c in read_script(text, {}, 'run.sh') if c.argv[:1] == ['accelerate']]
    assert cmd.argv[3] == 'recipes/$3.yaml'
    assert read_script(text, {}, 'run.sh', args=['a', 'b', 'zero3'])[-1].argv[3] == 'recipes/zero3.yaml'


def test_a_batch_script_is_checked_by_any_script_name(tmp_path):
    """A Slurm batch script named .slurm (or .sbatch, or no suffix with a shell's #! line) is read as a script."""
    (tmp_path / 'train.sh').write_text(
        STEP.replace('train_grpo.py', 'train_grpo.py --model_name_or_path Qwen/Qwen2.5-7B')
    )
    for name in ('run.slurm', 'run.sbatch', 'submit'):
        script = _write(tmp_path, name, JOB)
        flags = ['--json', '--gpus', '4', '--gpu-type', 'A100-80G']
        proc = run_cli('grpo_recipes.cli.guard', 'check', *flags, script.name, cwd=str(tmp_path))
        assert 'Traceback' not in proc.stderr and 'not a config file' not in proc.stderr, proc.stderr
        assert json.loads(proc.stdout)['plan']['world_size'] == 8, name


def test_a_backslash_at_the_end_of_the_file_is_read_as_bash_reads_it(tmp_path):
    text = 'swift rlhf --rlhf_type grpo \\\n    --beta 0.001 \\'  # no newline after the last `\`
    assert guard_runs(text, []) == bash_runs(tmp_path, text, []) == ['swift rlhf --rlhf_type grpo --beta 0.001']


def test_a_check_on_a_file_not_here_that_would_exit_is_assumed_to_pass(tmp_path):
    """`[ -x "$VENV/bin/trl" ] || exit 1`: the launch's machine has the file, this one may not; a check that would end
    the script with an error on a file missing here is assumed to pass (noted), one on a file that is here is not."""
    text = (
        'BIN=/nonexistent/venv/bin/trl\n'
        'if [ ! -x "$BIN" ]; then echo "missing $BIN"; exit 1; fi\n'
        '[ -f /nonexistent/data.jsonl ] || exit 2\n'
        'swift rlhf --rlhf_type grpo\n'
    )
    cmds = swift_commands(text)
    assert len(cmds) == 1 and sum('assumed it passes' in a for a in cmds[0].assumed) == 2
    here = tmp_path / 'here.txt'
    here.write_text('')
    text = f'if [ -f {here} ]; then echo found; exit 1; fi\nswift rlhf --rlhf_type grpo\n'
    assert swift_commands(text) == []  # decided: it exits


def test_a_file_sourced_from_the_launch_machine_is_taken_to_load_there(tmp_path):
    """`source /usr/local/Ascend/nnal/atb/set_env.sh || exit 1` (ms-swift's examples/ascend/grpo/*.sh): bash here
    would fail on the missing file and exit; on the launch's machine it loads, so the launch after it is read (noted).
    A file that is here is read as bash reads it."""
    text = 'source /nonexistent/set_env.sh || exit 1\nNPROC_PER_NODE=2 swift rlhf --rlhf_type grpo\n'
    (cmd,) = swift_commands(text)
    assert any('did not read /nonexistent/set_env.sh' in a and "launch's machine" in a for a in cmd.assumed)
    env = tmp_path / 'env.sh'
    env.write_text('exit 3\n')
    text = f'source {env} || exit 1\nswift rlhf --rlhf_type grpo\n'
    assert swift_commands(text) == []


def test_what_a_here_string_holds_unresolved_the_variables_read_hold():
    text = (
        'IFS=, read -ra GPUS <<< "$3"\n'
        'if [ ${#GPUS[@]} -lt 2 ]; then echo "need two GPUs"; exit 1; fi\n'
        'CUDA_VISIBLE_DEVICES=${GPUS[1]} swift rlhf --rlhf_type grpo\n'
    )
    cmd = next(c for c in read_script(text, {}, 'run.sh') if c.argv[:1] == ['swift'])
    assert '$3' in cmd.unresolved  # the array read from $3 is not known, so neither is its size: the check passes


def test_a_vllm_server_beside_the_launch_is_not_a_trainer():
    from grpo_recipes.frontends import kind_of

    assert (
        kind_of(['python', '-m', 'vllm.entrypoints.openai.api_server', '--model', 'meta-llama/Llama-Guard-3-8B'])
        is None
    )
    assert kind_of(['python', '-m', 'sglang.launch_server', '--model-path', 'x']) is None
    assert kind_of(['python', '-m', 'open_r1.grpo', '--config', 'x.yaml']) == ('trl', 'train')


def test_a_port_left_to_chance_does_not_stop_the_check(tmp_path):
    """`--vllm_server_port $((1000 + RANDOM % 7001))`: only running it gives the value, and no value changes the plan;
    it is read as 0 with a note. A value that does decide the plan (--per_device_train_batch_size $BS) still stops."""
    script = _write(
        tmp_path,
        'train.sh',
        'PORT=$((1000 + RANDOM % 7001))\n'
        'CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes 1 train_grpo.py --model_name_or_path '
        'Qwen/Qwen2.5-0.5B-Instruct --use_vllm true --vllm_mode server --vllm_server_port $PORT\n',
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', '--gpus', '2', '--gpu-type', 'A100-80G', str(script))
    assert 'Traceback' not in proc.stderr and proc.returncode != 2, proc.stderr
    assert any('--vllm_server_port' in n and 'read as 0' in n for n in json.loads(proc.stdout)['launch']['notes'])
    script.write_text(script.read_text().replace('--vllm_server_port $PORT', '--per_device_train_batch_size $BS'))
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '2', '--gpu-type', 'A100-80G', str(script))
    assert proc.returncode == 2 and '$BS could not be resolved' in proc.stderr


def test_a_layout_left_to_the_script_arguments_says_how_to_pass_them(tmp_path):
    script = _write(
        tmp_path,
        'train.sh',
        'GPUS=$1\nN=$(echo $GPUS | tr , "\\n" | wc -l)\n'
        'CUDA_VISIBLE_DEVICES=$GPUS NPROC_PER_NODE=$N swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct\n',
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '4', '--gpu-type', 'A100-80G', str(script))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert 'the script takes arguments ($1)' in proc.stderr and f'-- bash {script} ARGS' in proc.stderr


def test_the_job_node_count_is_known_and_its_host_names_are_not():
    """`scontrol show hostnames $SLURM_JOB_NODELIST` prints one line per node of the job (scontrol(1)): the job's
    node count gives `| wc -l`, while the names (`| head -n 1`) stay unknown."""
    text = (
        'N=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | wc -l)\n'
        'MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)\n'
        'accelerate launch --num_machines $N --num_processes $((4 * N)) --main_process_ip $MASTER train_grpo.py\n'
    )
    cmd = read_script(text, {}, 'run.sh', machine=Machine(4, 'A100-80G', nodes=3))[-1]
    assert cmd.argv[2:6] == ['--num_machines', '3', '--num_processes', '12']
    assert cmd.argv[7].startswith('$(scontrol') and cmd.argv[7] in cmd.unresolved  # a host name: not known here
    assert read_script(text, {}, 'run.sh', machine=Machine(4, 'A100-80G'))[-1].argv[3].startswith('$(')  # no count


def test_python_one_liners_scripts_run_for_a_value():
    """`python -c "import torch; print(torch.cuda.device_count())"` is the GPUs the process sees; `import M;
    print(M.__file__)` is where the installed package puts M (importlib.util.find_spec, the real install here)."""
    import importlib.util
    import os

    text = (
        'export CUDA_VISIBLE_DEVICES=0,1,2\n'
        'N=$(python -c "import torch; print(torch.cuda.device_count())")\n'
        'ENTRY=$(python -c "import swift.cli.rlhf; print(swift.cli.rlhf.__file__)")\n'
        'torchrun --nproc_per_node $((N - 1)) $ENTRY --rlhf_type grpo\n'
    )
    cmd = read_script(text, {}, 'run.sh')[-1]
    swift_dir = list(importlib.util.find_spec('swift').submodule_search_locations)[0]
    assert cmd.argv[:4] == ['torchrun', '--nproc_per_node', '2', os.path.join(swift_dir, 'cli', 'rlhf.py')]
    assert not cmd.unresolved
    other = read_script('N=$(python -c "import random; print(random.random())")\necho $N\n', {}, 'run.sh')[-1]
    assert other.unresolved  # any other program: only running it gives its output


def test_a_guessed_trainer_gives_way_to_a_known_launch(tmp_path):
    """`python scripts/prep.py` (not here) would be read as a TRL script only by guess; the `swift rlhf` launch after
    it is the training launch."""
    text = (
        'python scripts/prep_data.py --input a.jsonl --output b.jsonl\n'
        'NPROC_PER_NODE=2 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --dataset b.jsonl\n'
    )
    from grpo_recipes.frontends import read_launch

    launch = read_launch([_write(tmp_path, 'run.sh', text).as_posix()], environ={})
    assert launch.framework == 'swift' and '--rlhf_type' in launch.argv


def test_a_project_copy_of_the_rlhf_entry_is_read_as_swift_rlhf(tmp_path):
    from grpo_recipes.frontends import kind_of

    assert kind_of(['deepspeed', 'scripts/rlhf_ds.py', '--rlhf_type', 'grpo']) == ('swift', 'train')  # not here
    entry = tmp_path / 'my_rlhf.py'
    entry.write_text('from swift.llm import rlhf_main\n\nif __name__ == "__main__":\n    rlhf_main()\n')
    assert kind_of(['torchrun', '--nproc_per_node', '2', str(entry), '--model', 'x']) == ('swift', 'train')
    other = tmp_path / 'train.py'
    other.write_text('from trl import GRPOTrainer\n')
    assert kind_of(['torchrun', str(other), '--rlhf_type', 'grpo']) == ('trl', 'train')  # here: it is TRL's


ENV_DRIVEN = """#!/bin/bash
run() {
    local model="$1"
    shift
    if [[ -z "$model" ]]; then echo "skip: no model"; return 0; fi
    NPROC_PER_NODE=2 swift rlhf --rlhf_type grpo --model "$model" --dataset "$@"
}
IFS=: read -r -a DATA <<< "${DATASETS:-}"
run "${INITIAL_MODEL:-}" "${DATA[@]}"
"""


def test_a_launch_driven_by_the_environment_is_read_past_its_skips(tmp_path):
    """Variables set nowhere here (`${INITIAL_MODEL:-}`) are the user's environment: a branch their empty default
    leads to that leaves before the launch (`return 0`) is assumed not taken, and the launch says which empty values
    it took, and how to give them. With them given, bash and the reader run the same launch."""
    cmds = [c for c in read_script(ENV_DRIVEN, {}, 'run.sh') if c.argv[:1] == ['swift']]
    assert len(cmds) == 1 and any('return' in a and 'assumed it passes' in a for a in cmds[0].assumed)
    assert set(cmds[0].defaults) == {'$INITIAL_MODEL', '$DATASETS'}
    script = _write(tmp_path, 'run.sh', ENV_DRIVEN)
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '2', '--gpu-type', 'A100-80G', str(script))
    assert proc.returncode != 0 and '--env DATASETS=VALUE' in proc.stderr and '--env INITIAL_MODEL=VALUE' in proc.stderr
    env = {'INITIAL_MODEL': 'Qwen/Qwen2.5-7B-Instruct', 'DATASETS': 'a.jsonl:b.jsonl'}
    ours = [' '.join(c.argv) for c in read_script(ENV_DRIVEN, env, 'run.sh') if c.argv[:1] == ['swift']]
    assert ours == bash_runs_env(tmp_path, ENV_DRIVEN, env)


def bash_runs_env(tmp_path: Path, text: str, env: dict) -> list[str]:
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / 'swift').write_text(RECORDER)
    (bin_dir / 'swift').chmod(stat.S_IRWXU)
    (bin_dir / 'basename').unlink(missing_ok=True)
    (bin_dir / 'basename').symlink_to(shutil.which('basename'))
    script, log = tmp_path / 'env_run.sh', tmp_path / 'env_record.log'
    script.write_text(text)
    log.write_text('')
    subprocess.run([BASH, str(script)], cwd=tmp_path, env={'PATH': str(bin_dir), 'RECORD_LOG': str(log), **env},
                   capture_output=True, timeout=30)  # fmt: skip
    return [line for line in log.read_text().splitlines() if line]


ASSOC = """#!/bin/bash
declare -A TP
TP["qwen"]=1
TP[mixtral]=2
declare -A DS=([qwen]=zero2 [mixtral]="zero3")
KEY=${1:-qwen}
exec > >(cat) 2>&1
model_of() { case "$1" in qwen) echo Qwen/Qwen2.5-7B-Instruct ;; mixtral) echo mistralai/Mixtral-8x7B-v0.1 ;; esac; }
MODEL=$(model_of "$KEY")
swift rlhf --rlhf_type grpo --model $MODEL --vllm_tensor_parallel_size ${TP[$KEY]} --deepspeed ${DS[$KEY]} --n ${#TP[@]}
"""


@pytest.mark.parametrize('args', [['qwen'], ['mixtral']])
def test_associative_arrays_and_exec_redirections_read_as_bash_runs_them(tmp_path, args):
    """`declare -A` arrays (keys are words), `exec > >(tee log)` (redirections only: the script goes on), a function's
    output captured once."""
    assert guard_runs(ASSOC, args) == bash_runs(tmp_path, ASSOC, args)
    assert len(guard_runs(ASSOC, args)) == 1


def test_without_the_argument_the_default_key_is_read_once():
    (line,) = guard_runs(ASSOC, None)
    assert '--model Qwen/Qwen2.5-7B-Instruct --vllm_tensor_parallel_size 1 --deepspeed zero2 --n 2' in line


def test_a_command_run_in_an_apptainer_image_is_read_with_its_env():
    text = (
        'COMMON="--nv --bind /data:/data --cleanenv"\n'
        'apptainer exec $COMMON --env CUDA_VISIBLE_DEVICES=1,2,WANDB_MODE=offline img.sif accelerate launch '
        '--num_processes 2 train_grpo.py\n'
    )
    cmd = read_script(text, {}, 'run.sh')[-1]
    assert cmd.argv == ['accelerate', 'launch', '--num_processes', '2', 'train_grpo.py']
    assert cmd.env['CUDA_VISIBLE_DEVICES'] == '1,2' and cmd.env['WANDB_MODE'] == 'offline'


def test_a_config_the_script_writes_itself_is_read_as_written(tmp_path):
    """`cat > cfg.yaml <<EOF ... EOF` then `swift rlhf cfg.yaml`: the config is the script's here-document (nothing is
    written to disk); an accelerate config written the same way gives the process count."""
    text = (
        'CFG=gen/grpo.yaml\nmkdir -p gen\n'
        'cat > $CFG <<EOF\nrlhf_type: grpo\nmodel: Qwen/Qwen2.5-7B-Instruct\nper_device_train_batch_size: 4\nEOF\n'
        'cat >> $CFG <<EOF\nnum_generations: 8\nEOF\n'
        'NPROC_PER_NODE=2 swift rlhf $CFG\n'
    )
    from grpo_recipes.frontends import read_launch

    launch = read_launch([str(_write(tmp_path, 'run.sh', text))], environ={})
    assert launch.argv[launch.argv.index('--model') + 1] == 'Qwen/Qwen2.5-7B-Instruct'
    assert launch.argv[launch.argv.index('--num_generations') + 1] == '8'  # the appended part too
    assert not (tmp_path / 'gen').exists()
    acc = (
        'cat > acc.yaml <<EOF\ndistributed_type: MULTI_GPU\nnum_processes: 3\nEOF\n'
        'CUDA_VISIBLE_DEVICES=0,1,2 accelerate launch --config_file acc.yaml train_grpo.py --model_name_or_path x\n'
    )
    launch = read_launch([str(_write(tmp_path, 'acc.sh', acc))], environ={})
    assert launch.trl.accelerate['num_processes'] == 3


def test_a_command_run_in_a_docker_container_sees_its_gpus_and_env():
    """`docker run --gpus '"device=2,3"' -e K=V IMAGE CMD`: CMD sees two GPUs, numbered 0 and 1 inside (NVIDIA
    Container Toolkit), and K."""
    text = (
        'docker run --rm -it --gpus \'"device=2,3"\' --shm-size 64g -e NPROC_PER_NODE=2 -v $PWD:/w -w /w img:latest '
        'swift rlhf --rlhf_type grpo\n'
    )
    cmd = read_script(text, {}, 'run.sh')[-1]
    assert cmd.argv == ['swift', 'rlhf', '--rlhf_type', 'grpo']
    assert cmd.env['CUDA_VISIBLE_DEVICES'] == '0,1' and cmd.env['NPROC_PER_NODE'] == '2'
    assert 'CUDA_VISIBLE_DEVICES' not in read_script(text.replace('\'"device=2,3"\'', 'all'), {}, 'run.sh')[-1].env


def test_nested_branches_on_defaults_are_not_probed_again_and_again():
    """Twenty nested `if [ "${V:-a}" = a ]` around the launch read within the reader's step bound: a branch with no
    `exit`/`return` (nor a function that has one) cannot leave, so it is not probed."""
    text = (
        ''.join(f'if [ "${{V{i}:-a}}" = "a" ]; then\n' for i in range(20))
        + 'swift rlhf --rlhf_type grpo\n'
        + 'fi\n' * 20
    )
    assert [c.argv[:2] for c in read_script(text, {}, 'run.sh')] == [['swift', 'rlhf']]


def test_a_usage_exit_after_a_redirected_echo_is_seen():
    """`echo "..." >&2` then `exit 1` in a branch: the exit is found however the branch's commands are written."""
    text = (
        'CFG="${CONFIG:-}"\nif [[ ! -f "${CFG}" ]]; then\n  echo "[ERROR] no config: ${CFG}" >&2\n  exit 1\nfi\n'
        'swift rlhf $CFG\n'
    )
    cmds = swift_commands(text)
    assert len(cmds) == 1 and any('exit 1' in a and 'assumed it passes' in a for a in cmds[0].assumed)


GETOPTS = (
    'while getopts "{spec}" opt; do swift "$opt" "${{OPTARG-unset}}" "$OPTIND"; done\n'
    'swift end "$OPTIND" "$@"\n'
    'f() {{ local OPTIND=1; while getopts "{spec}" o "$@"; do swift f "$o" "${{OPTARG-unset}}"; done; }}\n'
    'f "$@"\n'
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(
    spec=st.sampled_from(['m:d:vg:', ':m:d:vg:', 'ab', ':a:', 'm:']),
    args=st.lists(
        st.sampled_from(['-m', 'Qwen', '-vd', 'x.jsonl', '-gfoo', '-z', '--', '-', 'pos', '-ab', '-a', '--long']),
        max_size=6,
    ),
)  # fmt: skip
def test_getopts_reads_the_options_as_bash_does(tmp_path, spec, args):
    """`while getopts "m:d:..." opt; do case $opt in ...`: option parsing in launch scripts (clusters, missing
    arguments, `--`, silent mode, a function's own arguments), compared with real bash."""
    text = GETOPTS.format(spec=spec)
    assert guard_runs(text, args) == bash_runs(tmp_path, text, args)


def test_options_not_given_leave_the_defaults():
    """Without the script's arguments, getopts takes none: the values set before the loop are planned (noted)."""
    text = (
        'MODEL=Qwen/Qwen2.5-7B-Instruct\nwhile getopts "m:" o; do case $o in m) MODEL=$OPTARG;; esac; done\n'
        'swift rlhf --rlhf_type grpo --model "$MODEL"\n'
    )
    (cmd,) = swift_commands(text)
    assert cmd.argv[-1] == 'Qwen/Qwen2.5-7B-Instruct' and any('getopts' in a for a in cmd.assumed)
    assert guard_runs(text, ['-m', 'Qwen/Qwen3-8B'])[-1].endswith('--model Qwen/Qwen3-8B')


def test_an_escaped_quote_the_grammar_trips_on_reads_as_bash_runs_it(tmp_path):
    """tree-sitter-bash loses its place on `\\"` followed by `)` inside a `${V:-...}` default in double quotes (a
    prompt written into a script, thinganhado/ms-swift 04_stage3_grpo2_curriculum.sh); bash reads it, and so does
    the guard, giving the same words."""
    text = (
        'PROMPT="${PROMPT:-Answer as (T1=..., En1=\\"...\\"); (T2=..., En2=\\"...\\")'
        ' - T: one of {speech, non-speech\\}}"\n'
        'swift rlhf --rlhf_type grpo --system "$PROMPT" --beta "${BETA:-0.04}"  # a \\"comment\\"\n'
    )
    got = guard_runs(text, [])
    assert got == bash_runs(tmp_path, text, []) and len(got) == 1 and 'En1="..."); (T2' in got[0]


def test_an_unquoted_value_splits_around_what_it_holds_unresolved():
    """`SRUN_ARGS="--wait=60 --nodelist=$(...)"` then `srun $SRUN_ARGS ...`: the known words split as bash splits
    them; the unresolved text as written stays within one word (its output is not known here)."""
    text = (
        'NODES=$(my-hosts --all | paste -sd,)\n'
        'ARGS=" --wait=60  --nodelist=$NODES --kill-on-bad-exit=1 "\n'
        'swift rlhf $ARGS --rlhf_type grpo\n'
    )
    (cmd,) = swift_commands(text)
    assert cmd.argv == [
        'swift',
        'rlhf',
        '--wait=60',
        '--nodelist=$(my-hosts --all | paste -sd,)',
        '--kill-on-bad-exit=1',
        '--rlhf_type',
        'grpo',
    ]


@pytest.mark.parametrize(
    ('directives', 'nodes'),
    [
        (['--ntasks-per-node=1', '--gres=gpu:8'], '1'),
        (['--ntasks=16', '--ntasks-per-node=8'], '2'),
        (['--nodes=3'], '3'),
        (['--ntasks=16'], None),
    ],
)
def test_a_batch_script_without_nodes_gets_the_nodes_sbatch_gives(directives, nodes):
    """sbatch(1) -N: without --nodes, enough nodes for the tasks asked for (one when no --ntasks)."""
    from grpo_recipes.frontends.launchers import batch_env, sbatch_directives

    text = '#!/bin/bash\n' + ''.join(f'#SBATCH {d}\n' for d in directives) + 'echo hi\n'
    assert batch_env(sbatch_directives(text)).get('SLURM_NNODES') == nodes


def test_a_script_srun_runs_in_a_container_is_read_with_its_arguments(tmp_path):
    """`srun -N1 singularity exec --nv --env A=1 IMAGE bash train.sh ARGS`: the script in the image, with the job
    step's variables, the image's --env and its own arguments."""
    from grpo_recipes.frontends.launchers import job_step

    (tmp_path / 'train.sh').write_text('accelerate launch --num_machines $1 --num_processes $2 train_grpo.py\n')
    job = '#!/bin/bash\n#SBATCH --nodes=2\nsrun -N1 singularity exec --nv --env A=1 img.sif bash train.sh 1 4\n'
    read = read_script(job, {}, str(tmp_path / 'run.slurm'), cwd=str(tmp_path), launcher=job_step)
    (cmd,) = [c for c in read if c.argv[:1] == ['accelerate']]
    assert cmd.argv[2:6] == ['--num_machines', '1', '--num_processes', '4']
    assert (cmd.env['A'], cmd.env['SLURM_NNODES']) == ('1', '1')


def test_a_program_looked_up_with_command_v_reads_as_bash_runs_it(tmp_path):
    """`SWIFT_BIN="$(command -v swift || true)"; [[ -z $SWIFT_BIN ]] && exit 1; "$SWIFT_BIN" rlhf ...`: the program is
    on the launch machine's PATH, and its name runs it as the path would."""
    text = (
        'SWIFT_BIN="$(command -v swift || true)"\n'
        'if [[ -z "${SWIFT_BIN}" ]]; then echo "no swift" >&2; exit 1; fi\n'
        'W=$(which swift)\n'
        '"${SWIFT_BIN}" rlhf --rlhf_type grpo --beta 0.0\n'
        '"$W" rlhf --rlhf_type grpo\n'
    )
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'which').symlink_to(shutil.which('which'))
    assert (
        guard_runs(text, [])
        == bash_runs(tmp_path, text, [])
        == [
            'swift rlhf --rlhf_type grpo --beta 0.0',
            'swift rlhf --rlhf_type grpo',
        ]
    )


def test_a_wrapper_that_runs_the_script_it_is_given_says_so(tmp_path):
    """`INNER=${1:?...}; bash "$INNER" "$@"` (a multi-node wrapper): the launch is in the script it is given."""
    wrapper = _write(tmp_path, 'launch.sh', 'INNER="${1:?inner script required}"; shift || true\nbash "$INNER" "$@"\n')
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '1', '--gpu-type', 'A100-80G', str(wrapper))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert 'launch.sh:2: no launch command here; it runs another script' in proc.stderr and '-- bash ' in proc.stderr
    inner = _write(tmp_path, 'grpo.sh', 'swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct "$@"\n')
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', '--gpus', '1', '--gpu-type', 'A100-80G', '--',
                   'bash', str(wrapper), str(inner), '--beta', '0.0')  # fmt: skip
    assert json.loads(proc.stdout)['config']['beta'] == 0.0


GLOBS = """for f in data/*.jsonl; do swift "$f"; done
swift rlhf --dataset data/*.jsonl "data/*.jsonl" data/none*.x data/t?ain.jsonl 'data/*'
A=(data/[tv]*)
swift "${A[@]}" data/.h* data/*
P="data/*.jsonl"
swift $P "$P"
"""


def test_pathname_expansion_reads_as_bash_runs_it(tmp_path):
    """`--dataset data/*.jsonl`, `for f in data/*.jsonl`: the files here that match, sorted, dot files only where the
    pattern says so, quoted text literal, no match kept as written."""
    (tmp_path / 'data').mkdir()
    for name in ('train.jsonl', 'val.jsonl', '.hidden', 'b.txt'):
        (tmp_path / 'data' / name).write_text('')
    got = [' '.join(c.argv) for c in read_script(GLOBS, {}, 'run.sh', cwd=str(tmp_path)) if c.argv[0] == 'swift']
    assert got == bash_runs(tmp_path, GLOBS, []) and len(got) == 5
    assert got[2].startswith('swift rlhf --dataset data/train.jsonl data/val.jsonl data/*.jsonl data/none*.x')


OPTIONAL_OVERRIDE = """MODEL_ID="${MODEL_ID:-Qwen/Qwen2.5-7B-Instruct}"
if [[ $# -ge 1 && -n "${1:-}" ]]; then
  MODEL_ID="$1"
fi
if [ -n "$2" ]; then swift rlhf --rlhf_type grpo --model "$MODEL_ID" --beta "$2"; fi
swift rlhf --rlhf_type grpo --model "$MODEL_ID"
"""


@pytest.mark.parametrize('args', [[], ['Qwen/Qwen3-8B'], ['Qwen/Qwen3-8B', '0.1']])
def test_an_optional_argument_override_reads_as_bash_runs_it(tmp_path, args):
    """`if [[ $# -ge 1 ]]; then MODEL_ID=$1; fi` with the arguments given is bash's reading."""
    assert guard_runs(OPTIONAL_OVERRIDE, args) == bash_runs(tmp_path, OPTIONAL_OVERRIDE, args)


def test_without_the_arguments_an_optional_override_is_not_taken():
    """Without the script's arguments, the override is taken as not given (the default is planned, noted); a branch
    on them that runs the launch is still read."""
    cmds = [c for c in read_script(OPTIONAL_OVERRIDE, {}, 'run.sh') if c.argv[:1] == ['swift']]
    assert [c.argv[-2:] for c in cmds] == [['--beta', '$2'], ['--model', 'Qwen/Qwen2.5-7B-Instruct']]
    assert any("a test of the script's own arguments" in a for a in cmds[-1].assumed)


def test_a_function_calling_itself_on_unknown_values_is_not_followed_forever():
    """`kill_tree() { for child in $(ps -o pid= --ppid "$1"); do kill_tree "$child"; done; }` (seea-r1): the loop's
    values are the unknown output of `ps`, each call's argument holds it, and the recursion stops being followed."""
    text = (
        'kill_tree() {\n'
        '    local pid=$1\n'
        '    for child in $(ps -o pid= --ppid "$pid"); do kill_tree "$child"; done\n'
        '    kill -9 "$pid" 2>/dev/null\n'
        '}\n'
        'kill_tree 123\n'
        'swift rlhf --rlhf_type grpo\n'
    )
    (cmd,) = swift_commands(text)
    assert any('kill_tree calls itself on values not known here' in a for a in cmd.assumed)


def test_a_wait_for_a_file_and_a_cd_into_the_launch_machines_project_are_taken_as_done():
    """`cd /scratch/.../project || exit 1` and `until [ -f "$ENDPOINT" ]; do sleep 15; ...; exit 1; done` (a Slurm job
    waiting for a judge job's file, penelope): the launch machine has the directory and the file comes; both noted.
    A loop on a file that is here is read as bash runs it."""
    text = (
        'cd /nonexistent/project || { echo "no project"; exit 1; }\n'
        'W=0\n'
        'until [ -f /nonexistent/project/endpoint.txt ]; do sleep 15; W=$((W + 15)); '
        'if [ $W -ge 60 ]; then exit 1; fi; done\n'
        'swift rlhf --rlhf_type grpo\n'
    )
    (cmd,) = swift_commands(text)
    assert any('did not cd to /nonexistent/project' in a for a in cmd.assumed)
    assert any('the loop waits for a file that is not here' in a for a in cmd.assumed)


SBATCH_WRAP = """MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}
sbatch --cpus-per-task=48 --gpus=3 -p h100 -o logs/%j.log -J grpo \\
  --wrap="export ALLOC='expandable_segments:True' \\
NPROC_PER_NODE=3; \\
swift rlhf --rlhf_type grpo --model $MODEL --beta 0.04"
"""
# sbatch on a machine without Slurm: the job's command run at once in sh (only the argv is compared)
SBATCH_STUB = '#!/bin/bash\nfor a in "$@"; do case "$a" in --wrap=*) exec sh -c "${a#--wrap=}";; esac; done\n'


def test_a_job_sbatch_wraps_reads_as_sh_runs_it(tmp_path):
    """`sbatch --gpus=3 ... --wrap="...; swift rlhf ..."` (VTS): the job's command, run by sh, with the job's
    variables: its GPUs on the node."""
    from grpo_recipes.frontends.launchers import job_step

    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'sbatch').write_text(SBATCH_STUB)
    (bin_dir / 'sbatch').chmod(stat.S_IRWXU)
    (bin_dir / 'sh').symlink_to(shutil.which('sh'))
    real = bash_runs(tmp_path, SBATCH_WRAP, [])
    read = read_script(SBATCH_WRAP, {}, str(tmp_path / 'run.sh'), launcher=job_step)
    (cmd,) = [c for c in read if c.argv[:1] == ['swift']]
    assert [' '.join(cmd.argv)] == real
    assert (cmd.env['NPROC_PER_NODE'], cmd.env['SLURM_GPUS_ON_NODE']) == ('3', '3')


BRACES = """X=pre
swift a{1..3}b {x,y{1,2}} {01..03} {a..e..2} '{1,2}' "{1,2}" ${X}{1,2} {5..1} {1..10..3} {,a} {a} x{}y
swift {a,b}{c,d} {a,"b c"} {-2..2} "$(echo {1,2})" {1..3..0} --kw {"a":1,"b":2} {1..x} \\{1,2}
for i in {1..3}; do swift loop $i; done
A=(m{1,2} n)
swift "${A[@]}"
B={1,2}
swift "$B"
"""


def test_brace_expansion_reads_as_bash_runs_it(tmp_path):
    """`for i in {1..5}` (REA-RL), `data_{a,b}.jsonl`: brace expansion before every other expansion, as bash."""
    assert guard_runs(BRACES, []) == bash_runs(tmp_path, BRACES, []) and len(bash_runs(tmp_path, BRACES, [])) == 7


IDIOMS = """set -a
source ./vars.env
set +a
export $(grep -v '^#' .env | xargs)
export "QUOTED=a b"
N=4
GPUS=$(seq -s, 0 $((N-1)))
NP=$(echo $GPUS | tr ',' '\\n' | wc -l)
IFS=',' read -ra ARR <<< "$GPUS"
swift a $GPUS $NP ${#ARR[@]} $FOO $BAR "$QUOTED" $(( 16 / N ))
"""


def test_environment_files_and_gpu_lists_read_as_bash_runs_them(tmp_path):
    """`export $(grep -v '^#' .env | xargs)` (EHR-R1), `set -a; source vars.env`, `seq -s,`, `read -ra` of a GPU
    list: as bash runs them."""
    (tmp_path / 'vars.env').write_text('FOO=foo1\n')
    (tmp_path / '.env').write_text('# a comment\nBAR=bar1\n')
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    for tool in ('grep', 'xargs', 'echo', 'seq', 'tr', 'wc'):  # xargs runs echo
        (bin_dir / tool).symlink_to(shutil.which(tool))
    got = [' '.join(c.argv) for c in read_script(IDIOMS, {}, 'run.sh', cwd=str(tmp_path)) if c.argv[0] == 'swift']
    assert got == bash_runs(tmp_path, IDIOMS, []) == ['swift a 0,1,2,3 4 4 foo1 bar1 a b 4']


def test_an_argument_list_built_from_data_that_is_not_here_says_so(tmp_path):
    """`for f in "$DATA"/*.jsonl; do ... VAL+=("$f") ...; done` with the data only on the launch's machine: the glob
    stays as written (as bash here would keep it), VAL stays empty, and ms-swift's refusal of `--val_dataset` with
    nothing after it says where the arguments come from."""
    script = _write(
        tmp_path,
        'train.sh',
        'TRAIN=(); VAL=()\n'
        'for f in /nonexistent/data/*.jsonl; do case "$f" in *val*) VAL+=("$f");; *) TRAIN+=("$f");; esac; done\n'
        'NPROC_PER_NODE=1 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --dataset "${TRAIN[@]}" '
        '--val_dataset "${VAL[@]}"\n',
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '1', '--gpu-type', 'A100-80G', str(script))
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert 'expected at least one argument' in proc.stderr and 'files that are not here' in proc.stderr
    assert '/nonexistent/data/*.jsonl: matches no file here' in proc.stderr


def test_a_process_count_computed_from_a_variable_names_it(tmp_path):
    """`--num_processes $(( 4 * $COUNT_NODE - 4 ))` with COUNT_NODE from a parent script: the message names COUNT_NODE
    for --env, and with it given the launch reads."""
    script = _write(
        tmp_path,
        'sub.sh',
        'accelerate launch --num_processes $(( 4 * $COUNT_NODE - 4 )) --num_machines $(( $COUNT_NODE - 1 )) '
        'train_grpo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct\n',
    )
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--gpus', '4', '--gpu-type', 'A100-80G', str(script))
    assert proc.returncode == 2 and '--env COUNT_NODE=VALUE' in proc.stderr
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', '--gpus', '4', '--gpu-type', 'A100-80G',
                   '--env', 'COUNT_NODE=2', str(script))  # fmt: skip
    assert json.loads(proc.stdout)['plan']['world_size'] == 4


@pytest.mark.parametrize(
    'launch',
    [
        'accelerate launch --num_processes 8 --num_machines 2 --machine_rank $SLURM_PROCID '
        '--main_process_port $MASTER_PORT train_grpo.py --seed_port $MASTER_PORT',
        'torchrun --nnodes 2 --nproc_per_node 4 --node_rank $NODE_RANK --master_port $MASTER_PORT train_grpo.py '
        '--seed_port $MASTER_PORT',
    ],
)
def test_a_rank_or_port_left_to_the_parent_script_does_not_stop_the_launcher(tmp_path, launch):
    """A sub-script run without the script that sets them (`--machine_rank $SLURM_PROCID`): the rank and the port
    decide nothing planned; the launcher's parser takes them as 0, the note says they were not resolved, and the
    training script's own words stay as written."""
    from grpo_recipes.frontends import read_launch

    (tmp_path / 'train_grpo.py').write_text('from trl import GRPOTrainer, TrlParser\n')
    (tmp_path / 'sub.sh').write_text(launch + '\n')
    launch_ = read_launch([str(tmp_path / 'sub.sh')], environ={})
    assert launch_.trl.script_args[-2:] == ['--seed_port', '$MASTER_PORT']


# the shape of VINLE-GRPO's run_grpo.sh: an optional config file as the first argument; without it, the values are the
# script's own defaults (with it, they come from a program's output that only running it gives)
OPTIONAL_CONFIG = """#!/bin/bash
CONFIG_FILE="${1:-}"
if [ -n "$CONFIG_FILE" ]; then
    eval $(python3 read_config.py "$CONFIG_FILE")
elif [ $# -gt 5 ]; then
    RANK=4
else
    RANK=32
fi
MODE=${MODE:-smoke}
if [[ "$1" == "full" ]]; then STEPS=-1; else STEPS=16; fi
swift rlhf --rlhf_type grpo --lora_rank $RANK --max_steps $STEPS
"""


def test_an_optional_argument_not_given_reads_as_bash_runs_the_script_without_it(tmp_path):
    """A test that reads only the script's own arguments, directly (``$1``, ``$#``) or through a variable set from
    them (``CONFIG_FILE=${1:-}``), is decided as bash decides it when the script is run without arguments: the branch
    with the defaults, not the one that reads a config through a program. Held to real bash, run without arguments."""
    assert guard_runs(OPTIONAL_CONFIG, None) == bash_runs(tmp_path, OPTIONAL_CONFIG, [])
    launch = swift_commands(OPTIONAL_CONFIG)[0]
    assert launch.argv[-4:] == ['--lora_rank', '32', '--max_steps', '16']
    assert any("line 3: a test of the script's own arguments" in a for a in launch.assumed)
