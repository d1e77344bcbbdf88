"""Launches as people write them in shell scripts: ${VAR:-default} and friends, nohup/bash -c/timeout wrappers,
continuation lines that lost their backslash, CRLF files, and a bare `accelerate launch` / `trl grpo`.

Expected values come from the real programs: bash itself expands the words and runs the CRLF script (with a
shell function standing in for `accelerate`, which prints the argv bash hands it), and accelerate's own
launch_command_parser is asked what it does without a script. No GPU is used or needed: the guard reads the
launch; the GPU count is given as --gpus / CUDA_VISIBLE_DEVICES."""

import os
import shutil
import subprocess

import pytest

from grpo_recipes.check import check_launch
from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch
from grpo_recipes.frontends.shell_expand import expand, unresolved
from grpo_recipes.hardware import Hardware

BASH = shutil.which('bash')
PKGS = {'ms-swift': '4.6.0', 'trl': '0.29.1', 'math-verify': '0.9.0', 'msgspec': '0.22.0'}
TRL_ARGS = [
    'train_grpo.py',
    '--model_name_or_path',
    'Qwen/Qwen2.5-7B-Instruct',
    '--use_vllm',
    '--vllm_mode',
    'colocate',
    '--per_device_train_batch_size',
    '8',
    '--num_generations',
    '8',
]
SWIFT = (
    'swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct --tuner_type lora --reward_funcs accuracy '
    '--dataset d.jsonl --num_generations {ng} --per_device_train_batch_size 8'
)


def bash_value(setup: str, word: str) -> tuple[str, str]:
    """(the expanded word, $A afterwards) as bash computes them."""
    out = subprocess.run(
        [BASH, '--norc', '-c', f'{setup}\nprintf "%s\\0%s" "{word}" "${{A-<unset>}}"'],
        capture_output=True,
        text=True,
        env={'PATH': os.environ['PATH']},
        check=True,
    ).stdout
    value, a = out.split('\0')
    return value, a


@pytest.mark.skipif(BASH is None, reason='needs bash')
@pytest.mark.parametrize('setup,scope', [('', {}), ('A=', {'A': ''}), ('A=x', {'A': 'x'})])
@pytest.mark.parametrize(
    'word',
    ['${A:-d}', '${A-d}', '${A:=d}', '${A=d}', '${A:+alt}', '${A+alt}', '${A}', 'pre-${A:-${B:-inner}}-post', '$A/x'],
)
def test_parameter_expansion_matches_bash(setup, scope, word):
    want_value, want_a = bash_value(setup, word)
    scope = dict(scope)
    unset_plain = 'A' not in scope and word in ('${A}', '$A/x')
    got = expand(word, scope)
    if unset_plain:  # bash gives '' for an unset $A; the guard keeps it, to say it could not be resolved
        assert unresolved(got) and got == word
    else:
        assert got == want_value
    assert scope.get('A', '<unset>') == want_a


def test_default_and_assignment_carry_to_later_lines(tmp_path):
    script = tmp_path / 'run.sh'
    script.write_text(
        'MODEL=${MODEL:-Qwen/Qwen2.5-7B-Instruct}\n: ${NG:=4}\nexport CUDA_VISIBLE_DEVICES=${GPUS-0,1}\n'
        'NPROC_PER_NODE=2 ' + SWIFT.format(ng='$NG') + ' --model $MODEL\n',
        encoding='utf-8',
    )
    launch = read_launch([str(script)], environ={})
    assert launch.argv[launch.argv.index('--num_generations') + 1] == '4'
    assert launch.argv[-1] == 'Qwen/Qwen2.5-7B-Instruct'
    assert launch.env['CUDA_VISIBLE_DEVICES'] == '0,1'
    # the environment wins over the defaults, and ${GPUS-...} keeps an empty value
    launch = read_launch([str(script)], environ={'NG': '8', 'GPUS': ''})
    assert launch.argv[launch.argv.index('--num_generations') + 1] == '8'
    assert launch.env['CUDA_VISIBLE_DEVICES'] == ''


def test_unresolved_variable_is_not_reported_as_rejected_by_ms_swift(tmp_path):
    launch = read_launch(['--', *SWIFT.format(ng='$NG').split()], environ={})
    with pytest.raises(GuardError) as e:
        check_launch(launch, Hardware(gpus=1, gpu_type='A100-80G', source='flags'), packages=PKGS)
    assert e.value.exit_code == 2
    assert '$NG could not be resolved' in str(e.value) and 'rejects' not in str(e.value)


WRAPPED = [
    'nohup bash -c "accelerate launch --num_processes 2 {args}" > train.log 2>&1 &',
    "bash -c 'cd . && accelerate launch --num_processes 2 {args}'",
    'sh -c "accelerate launch --num_processes 2 {args}"',
    'bash -lc "accelerate launch --num_processes 2 {args}"',
    'nohup accelerate launch --num_processes 2 {args} > log 2>&1 &',
    'setsid accelerate launch --num_processes 2 {args}',
    'timeout 2h accelerate launch --num_processes 2 {args}',
    'timeout -s INT -k 30 2h accelerate launch --num_processes 2 {args}',
    'nice -n 10 accelerate launch --num_processes 2 {args}',
    'CUDA_VISIBLE_DEVICES=0,1 nohup accelerate launch --num_processes 2 {args} &',
    'CUDA_VISIBLE_DEVICES=0,1 nohup bash -c "accelerate launch --num_processes 2 {args}" &',
    'uv run --python 3.11 --with peft --no-sync accelerate launch --num_processes 2 {args}',
    'uv run --env-file .env -- accelerate launch --num_processes 2 {args}',
    'conda run -n grpo --no-capture-output accelerate launch --num_processes 2 {args}',
    'poetry run accelerate launch --num_processes 2 {args}',
]


@pytest.mark.parametrize(
    'words, inner',
    [
        # uv run -m M is python -m M, and uv run F.py is uv run python F.py (uv's `run` documentation)
        (
            ['uv', 'run', '-m', 'swift.cli.rlhf', '--rlhf_type', 'grpo'],
            ['python', '-m', 'swift.cli.rlhf', '--rlhf_type', 'grpo'],
        ),
        (['/opt/bin/uv', 'run', '-p', '3.11', 'train_grpo.py', '--x'], ['python', 'train_grpo.py', '--x']),
        (['uv', 'run', '--extra', 'vllm', 'swift', 'rlhf'], ['swift', 'rlhf']),
        (['micromamba', 'run', '-p', '/env', 'torchrun', 'x.py'], ['torchrun', 'x.py']),
        (['uv', 'sync'], None),
        (['uv', 'run'], None),
    ],
)
def test_environment_runners_give_the_command_they_run(words, inner):
    from grpo_recipes.frontends.bash.wrappers import strip_wrapper

    assert strip_wrapper(words) == inner


@pytest.mark.parametrize('line', WRAPPED)
def test_wrapped_commands_are_read_as_the_inner_command(tmp_path, line):
    text = line.format(args=' '.join(TRL_ARGS))
    script = tmp_path / 'run.sh'
    script.write_text(text + '\n', encoding='utf-8')
    import shlex

    for launch in (
        read_launch([str(script)], environ={}),
        read_launch(['--', *shlex.split(text)[:-1]] if text.endswith('&') else ['--', *shlex.split(text)], environ={}),
    ):
        assert launch.framework == 'trl' and launch.trl['script'] == 'train_grpo.py'
        assert launch.env['NPROC_PER_NODE'] == '2'
        assert '--model_name_or_path' in launch.argv
        if line.startswith('CUDA_VISIBLE_DEVICES'):
            assert launch.env['CUDA_VISIBLE_DEVICES'] == '0,1'


def test_accelerate_really_stops_without_a_training_script():
    from accelerate.commands.launch import launch_command_parser

    with pytest.raises(SystemExit) as e:
        launch_command_parser().parse_args(['--num_processes', '4'])
    assert e.value.code == 2


def test_lost_backslash_names_the_file_and_line(tmp_path):
    script = tmp_path / 'run.sh'
    script.write_text(
        'export CUDA_VISIBLE_DEVICES=0,1\naccelerate launch --num_processes 2\n  ' + ' '.join(TRL_ARGS) + '\n',
        encoding='utf-8',
    )
    with pytest.raises(GuardError) as e:
        read_launch([str(script)], environ={})
    msg = str(e.value)
    assert e.value.exit_code == 2 and f'{script}:2:' in msg and 'training_script' in msg
    assert 'train_grpo.py' in msg and '\n' not in msg
    with pytest.raises(GuardError):
        read_launch(['--', 'accelerate', 'launch', '--num_processes', '2'], environ={})


@pytest.mark.skipif(BASH is None, reason='needs bash')
def test_crlf_continuation_is_read_as_bash_reads_it(tmp_path):
    script = tmp_path / 'run.sh'
    script.write_bytes(b'accelerate launch --num_processes 2 \\\r\n  ' + ' '.join(TRL_ARGS).encode() + b'\r\n')
    # bash: the `\` quotes the CR, the command ends at line 1, line 2 runs on its own
    shim = 'accelerate() { printf \'%q|\' "$@"; echo; }; train_grpo.py() { echo SEPARATE; }; '
    out = subprocess.run([BASH, '--norc', '-c', shim + f'source {script}'], capture_output=True, text=True).stdout
    assert out.splitlines()[0] == "launch|--num_processes|2|$'\\r'|" and 'SEPARATE' in out
    with pytest.raises(GuardError) as e:
        read_launch([str(script)], environ={})
    assert f'{script}:1:' in str(e.value) and 'CR' in str(e.value)
    # CRLF without a broken continuation: read, with a note
    script.write_bytes(
        b'CUDA_VISIBLE_DEVICES=0 accelerate launch --num_processes 1 ' + ' '.join(TRL_ARGS).encode() + b'\r\n'
    )
    launch = read_launch([str(script)], environ={})
    assert launch.trl['script'] == 'train_grpo.py' and any('CRLF' in n for n in launch.notes)


def _trl_report(argv, env, gpus=None, tmp_path=None):
    environ = {'HF_HOME': str(tmp_path), **env}  # no accelerate default config file there
    launch = read_launch(['--', *argv], environ=environ)
    return check_launch(launch, Hardware(gpus=gpus, gpu_type='A100-80G', source='flags'), packages=PKGS, memory=False)


@pytest.mark.parametrize('head', [['accelerate', 'launch'], ['trl', 'grpo']])
def test_bare_accelerate_starts_one_process_per_visible_gpu(tmp_path, head):
    argv = head + (TRL_ARGS if head[0] == 'accelerate' else TRL_ARGS[1:])
    r = _trl_report(argv, {'CUDA_VISIBLE_DEVICES': '0,1,2,3'}, gpus=8, tmp_path=tmp_path)
    assert r.plan.world_size == 4 and 'device.data-parallel' not in {f.rule for f in r.findings}
    assert any('one process per visible GPU' in a for a in r.assumptions)
    r = _trl_report(argv, {}, gpus=2, tmp_path=tmp_path)  # no CUDA_VISIBLE_DEVICES: the node's GPUs
    assert r.plan.world_size == 2
    # an accelerate config file decides when there is one
    (tmp_path / 'accelerate').mkdir()
    (tmp_path / 'accelerate' / 'default_config.yaml').write_text('distributed_type: "NO"\nnum_processes: 1\n')
    r = _trl_report(argv, {'CUDA_VISIBLE_DEVICES': '0,1,2,3'}, gpus=8, tmp_path=tmp_path)
    assert r.plan.world_size == 1


@pytest.mark.parametrize(
    'argv,name,prefix',
    [
        (
            ['accelerate', 'launch', '--num_processes', '1', *TRL_ARGS],
            '`accelerate launch train_grpo.py`',
            'CUDA_VISIBLE_DEVICES=0 accelerate launch ...',
        ),
        (['trl', 'grpo', '--num_processes', '1', *TRL_ARGS[1:]], '`trl grpo`', 'CUDA_VISIBLE_DEVICES=0 trl grpo ...'),
        (['python', *TRL_ARGS], '`python train_grpo.py`', 'CUDA_VISIBLE_DEVICES=0 python ...'),
    ],
)
def test_messages_name_the_command_as_typed(tmp_path, argv, name, prefix):
    r = _trl_report(argv, {'CUDA_VISIBLE_DEVICES': '0,1'}, gpus=2, tmp_path=tmp_path)
    f = next(f for f in r.findings if f.rule == 'device.data-parallel')
    assert f.message.startswith(name) and f.fix.startswith(prefix)
    assert 'trl trl' not in f.message + f.fix and 'accelerate train_grpo' not in f.message + f.fix


def test_unresolved_model_and_dataset_are_said_as_such(tmp_path):
    launch = read_launch(
        [
            '--',
            'swift',
            'rlhf',
            '--rlhf_type',
            'grpo',
            '--model',
            '$MODEL_DIR',
            '--reward_funcs',
            'format',
            '--dataset',
            '$DATA/train.jsonl',
        ],
        environ={},
    )
    r = check_launch(launch, Hardware(gpus=1, gpu_type='A100-80G', source='flags'), packages=PKGS)
    assert '$MODEL_DIR could not be resolved' in r.memory_unchecked
    assert not [f for f in r.findings if f.rule == 'data.missing-local']


def test_rollout_flag_with_bash_c_reads_the_server_command():
    launch = read_launch(
        ['--', *SWIFT.format(ng='8').split(), '--use_vllm', 'true', '--vllm_mode', 'server'],
        environ={},
        rollout="nohup bash -c 'cd /srv && CUDA_VISIBLE_DEVICES=1 swift rollout --model "
        "Qwen/Qwen2.5-7B-Instruct' > rollout.log 2>&1 &",
    )
    assert launch.rollout is not None and launch.rollout.gpus == [1]


def test_a_commented_assignment_expansion_assigns_nothing(tmp_path):
    script = tmp_path / 'run.sh'
    script.write_text(
        '# CUDA_VISIBLE_DEVICES=${NG:=2} swift rollout --model Qwen/Qwen2.5-7B-Instruct\n'
        + SWIFT.format(ng='${NG:-8}')
        + '\n',
        encoding='utf-8',
    )
    launch = read_launch([str(script)], environ={})
    assert launch.argv[launch.argv.index('--num_generations') + 1] == '8'


def test_read_from_a_here_string_assigns_as_bash_does():
    # `IFS=' ' read -r -a ARR <<< "$LIST"` (a list turned into an array) then "${ARR[@]}" in the launch: the values
    # bash gives (checked under /bin/bash by the read-here-string construct of test_bash_differential), resolved
    from grpo_recipes.frontends.shell import read_script

    text = (
        'R="acc,fmt  , x"\nR="${R//,/ }"\nIFS=\' \' read -r -a A <<< "$R"\nIFS=, read -r f1 rest <<< "a,b, c ,d  "\n'
        'read a b <<< \'x\\ y z\'\nread -r -d : tok <<< "p:q"\n'
        'swift rlhf --reward_funcs "${A[@]}" --f1 "$f1" --rest "$rest" --a "$a" --b "$b" --tok "$tok"\n'
    )
    (cmd,) = [c for c in read_script(text, {}, source='run.sh') if c.argv[:1] == ['swift']]
    assert not cmd.unresolved
    assert cmd.argv[2:] == [
        '--reward_funcs', 'acc', 'fmt', 'x', '--f1', 'a', '--rest', 'b, c ,d  ', '--a', 'x y', '--b', 'z', '--tok', 'p',
    ]  # fmt: skip


def test_bash_running_a_script_file_reads_that_script(tmp_path):
    # `VAR=x bash tools/train/run.sh ARGS` (a wrapper script calling the real launcher): bash runs the file in a new
    # shell that sees the exported variables and the command's own prefix, not the caller's plain ones
    (tmp_path / 'tools').mkdir()
    (tmp_path / 'tools' / 'run.sh').write_text('swift rlhf --m "$M" --x "${X:-unset}" --y "${Y:-unset}" --a "$1"\n')
    text = 'export M=exp\nY=plain\nX=pre bash tools/run.sh "p q"\n'
    from grpo_recipes.frontends.shell import read_script

    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        cmds = [c for c in read_script(text, {}, source=str(tmp_path / 'w.sh')) if c.argv[:1] == ['swift']]
    finally:
        os.chdir(old)
    assert [c.argv[2:] for c in cmds] == [['--m', 'exp', '--x', 'pre', '--y', 'unset', '--a', 'p q']]
    assert not cmds[0].unresolved


def test_nameref_and_posix_class_resolve_as_bash_does():
    # a function filling the array its caller names (`local -n out=$2`), emptiness tested with ${raw//[[:space:]]/}:
    # the values /bin/bash gives (test_bash_differential's nameref-and-posix-class construct), with nothing unresolved
    from grpo_recipes.frontends.shell import read_script

    text = (
        'fill() {\n  local raw="${1:-}"\n  local -n out="$2"\n  raw="${raw//,/ }"\n  out=()\n'
        '  if [ -n "${raw//[[:space:]]/}" ]; then out=($raw); fi\n}\nfill "a,b c" L\nfill "  " E\nout=top\n'
        'V="x1-y2_Z"\nswift rlhf "${L[@]}" ${#L[@]} ${#E[@]} "$out" "${V//[[:digit:]]/}" "${V//[![:alpha:]]/.}"\n'
    )
    (cmd,) = [c for c in read_script(text, {}, source='run.sh') if c.argv[:1] == ['swift']]
    assert not cmd.unresolved
    assert cmd.argv[2:] == ['a', 'b', 'c', '3', '0', 'top', 'x-y_Z', 'x..y..Z']
