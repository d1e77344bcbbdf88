"""What a launch leaves to the cluster (issue 27, part 2): a scheduler's or launcher's variables (``$RANK``,
``$MASTER_PORT``, ``$nnodes``, ``SLURM_*``) are "not resolved", not errors, unless their value decides the process
count, where the guard stops (exit 2) naming the variable and the flag and asks for ``--env NAME=VALUE``; an
example's ``<DATA_PATH>`` is a placeholder to fill in; a sweep's launches are read one per value."""

import json

import pytest
from conftest import run_cli

from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch

SWIFT = (
    'swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --dataset AI-MO/NuminaMath-TIR '
    '--reward_funcs accuracy --num_generations 8 --per_device_train_batch_size 8 --tuner_type lora'
)
TORCHRUN = (
    'torchrun --nnodes {nnodes} --node_rank $NODE_RANK --nproc_per_node {nproc} --master_addr $MASTER_ADDR '
    '--master_port $MASTER_PORT train_grpo.py --model_name_or_path Qwen/Qwen2.5-7B-Instruct '
    '--per_device_train_batch_size 8 --num_generations 8'
)


def _script(tmp_path, text):
    p = tmp_path / 'run.sh'
    p.write_text(text, encoding='utf-8')
    return p


def test_cluster_variables_that_decide_nothing_are_notes(tmp_path):
    p = _script(
        tmp_path,
        'export MASTER_PORT=${MASTER_PORT:-29500}\n'
        'NNODES=2 NODE_RANK=$RANK MASTER_ADDR=$MASTER_ADDR NPROC_PER_NODE=8 \\\n' + SWIFT + '\n',
    )
    launch = read_launch([str(p)], environ={})
    assert launch.env['NODE_RANK'] == '$RANK' and launch.env['MASTER_PORT'] == '29500'
    assert any('not resolved here: $RANK, $MASTER_ADDR' in n for n in launch.notes)
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(p),
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--json',
        env={'MASTER_PORT': ''},
    )
    rules = {f['rule'] for f in json.loads(proc.stdout)['findings']}
    assert 'launch.env-int' not in rules and 'launch.multi-node' not in rules  # NODE_RANK=$RANK: set, not an error


@pytest.mark.parametrize(
    'text,named',
    [
        ('NPROC_PER_NODE=$SLURM_GPUS_ON_NODE ' + SWIFT, 'NPROC_PER_NODE=$SLURM_GPUS_ON_NODE'),
        ('NNODES=$nnodes NPROC_PER_NODE=8 ' + SWIFT, 'NNODES=$nnodes'),
        (TORCHRUN.format(nnodes='$NNODES', nproc=4), '--nnodes $NNODES'),
        (TORCHRUN.format(nnodes=1, nproc='${GPUS_PER_NODE}'), '--nproc_per_node ${GPUS_PER_NODE}'),
    ],
)
def test_an_unresolved_process_count_stops_with_the_variable_and_flag(tmp_path, text, named):
    p = _script(tmp_path, text + '\n')
    with pytest.raises(GuardError) as e:
        read_launch([str(p)], environ={})
    msg = str(e.value)
    assert e.value.exit_code == 2 and f'{p}:1: {named} decides the process count' in msg
    name = named.split('$', 1)[1].strip('{}')
    assert f'--env {name}=VALUE' in msg and '\n' not in msg


def test_env_option_gives_the_cluster_values(tmp_path):
    p = _script(tmp_path, 'NNODES=$nnodes NODE_RANK=$RANK MASTER_ADDR=10.0.0.1 NPROC_PER_NODE=$GPUS ' + SWIFT + '\n')
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(p), '--gpus', '8', '--gpu-type', 'A100-80G', '--json')
    assert proc.returncode == 2 and '--env nnodes=VALUE' in proc.stderr and 'Traceback' not in proc.stderr
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        str(p),
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--json',
        '--env',
        'nnodes=2',
        '--env',
        'RANK=1',
        '--env',
        'GPUS=8',
    )
    out = json.loads(proc.stdout)
    assert out['plan']['world_size'] == 16, out['plan']
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(p), '--env', 'nnodes')
    assert proc.returncode == 2
    assert proc.stderr.strip() == 'error: --env nnodes: expected NAME=VALUE (e.g. --env NNODES=2)'


def test_a_placeholder_the_parser_accepts_is_to_fill_in(tmp_path):
    p = _script(tmp_path, SWIFT.replace('AI-MO/NuminaMath-TIR', '<DATA_PATH>') + '\n')
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(p), '--gpus', '8', '--gpu-type', 'A100-80G')
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f'error: {p}:1: --dataset <DATA_PATH> is a placeholder of an example script, left '
        f'to fill in: put the real value there'
    )


def test_a_sweep_checks_its_first_launch_and_says_so(tmp_path):
    p = _script(tmp_path, 'for LR in 1e-6 1e-5 5e-5; do\n  ' + SWIFT + ' --learning_rate $LR\ndone\n')
    launch = read_launch([str(p)], environ={})
    assert launch.argv[launch.argv.index('--learning_rate') + 1] == '1e-6'
    assert any('runs 3 launch(es) in a loop' in n and 'LR=1e-6' in n for n in launch.notes)


def test_expr_of_an_unknown_count_is_not_blamed_on_the_parser(tmp_path):
    p = _script(tmp_path, SWIFT + ' --gradient_accumulation_steps $(expr 16 / $nproc_per_node)\n')
    proc = run_cli('grpo_recipes.cli.guard', 'check', str(p), '--gpus', '8', '--gpu-type', 'A100-80G')
    assert proc.returncode == 2 and 'rejects' not in proc.stderr
    assert '$(expr 16 / $nproc_per_node) could not be resolved' in proc.stderr
    p.write_text('nproc_per_node=8\n' + p.read_text())
    launch = read_launch([str(p)], environ={})
    assert launch.argv[-1] == '2'


def test_continuation_in_a_double_quoted_bash_c_is_one_command(tmp_path):
    p = _script(tmp_path, 'nohup bash -c "CUDA_VISIBLE_DEVICES=0,1 NPROC_PER_NODE=2 \\\n' + SWIFT + '" > log 2>&1 &\n')
    launch = read_launch([str(p)], environ={})
    assert launch.env['NPROC_PER_NODE'] == '2' and '--num_generations' in launch.argv


def test_nothing_in_a_comment_is_run_and_installed_programs_are_assumed(tmp_path):
    # prose naming `swift rollout` in backquotes is not a rollout command; `command -v` finds the program
    p = _script(
        tmp_path,
        '# Steps: start `swift rollout` first, then this script\n'
        'if ! command -v swift >/dev/null 2>&1; then\n  echo "install ms-swift"; exit 1\nfi\n' + SWIFT + '\n',
    )
    launch = read_launch([str(p)], environ={})
    assert launch.rollout is None and '--num_generations' in launch.argv


def test_a_variable_holding_an_unresolved_substitution_stays_one_word():
    """open-r1's and many Slurm scripts' shape: ``MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head
    -n 1)`` then ``--main_process_ip $MASTER_ADDR``: bash splits the command's output (one host name), never the
    text as written, so the launcher's next option must stay an option of the launcher."""
    from grpo_recipes.frontends.shell import read_script

    text = (
        'MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)\n'
        'accelerate launch --main_process_ip $MASTER_ADDR --main_process_port 29500 train.py --lr 1\n'
    )
    argv = read_script(text, {}, 'run.sh')[-1].argv
    assert argv[3] == '$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)'
    assert argv[4:7] == ['--main_process_port', '29500', 'train.py']
