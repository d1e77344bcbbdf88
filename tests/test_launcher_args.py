"""The launchers' parsers rebuilt from launcher_args_snapshot.json against the real ones (torch, DeepSpeed and
accelerate are installed here): the snapshot is what the generator writes from the installed versions, and on
generated argvs (every option with valid and invalid values, abbreviations, ``=`` forms, unknown flags, the script
and its arguments, ``PET_*`` defaults) both parsers give the same namespace or the same error."""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import subprocess
import sys

import pytest
from conftest import ROOT

from grpo_recipes.frontends import launcher_args

sys.path.insert(0, str(ROOT / 'scripts'))
import gen_launcher_snapshot as gen  # noqa: E402

NAMES = list(gen.REAL)


def test_snapshot_is_what_the_installed_packages_give():
    proc = subprocess.run(
        [sys.executable, str(ROOT / 'scripts' / 'gen_launcher_snapshot.py'), '--check'],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, 'regenerate: python scripts/gen_launcher_snapshot.py\n' + proc.stderr[-2000:]


class _Refused(Exception):
    pass


def _raise(message):
    raise _Refused(message)


def outcome(build, argv: list[str]):
    """('ok', namespace dict) / ('error', argparse's message) / ('exit', code) / ('build', the error building the
    parser raised)."""
    try:
        parser = build()
    except ValueError as e:
        return ('build', f'{type(e).__name__}: {e}')
    parser.error = _raise
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return ('ok', vars(parser.parse_args(argv)))
    except _Refused as e:
        return ('error', str(e))
    except SystemExit as e:  # --help
        return ('exit', e.code)


def real_deepspeed(argv: list[str]):
    """DeepSpeed's ``runner.parse_args`` itself (it builds its parser and parses in one call)."""
    with contextlib.redirect_stdout(io.StringIO()):
        from deepspeed.launcher import runner
    err = io.StringIO()
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            return ('ok', vars(runner.parse_args(argv)))
    except SystemExit as e:
        text = err.getvalue().strip()
        if e.code == 0:
            return ('exit', 0)
        return ('error', text.splitlines()[-1].split(': error: ', 1)[1])


def real_outcome(name: str, argv: list[str], env: dict[str, str]):
    if name == 'deepspeed':
        return real_deepspeed(argv)
    return outcome(lambda: gen.real_parser(name, env), argv)


def rebuilt_outcome(name: str, argv: list[str], env: dict[str, str]):
    return outcome(lambda: launcher_args.build_parser(name, env), argv)


# ---- generated argvs ------------------------------------------------------------------------------------------

VALUES = ['3', '0', '-1', '2:4', '0.5', 'abc', '', 'gpu', 'a,b', 'a,,b,c', 'yes', 'No', 'maybe', 'true,false,1', 'x=y']


def _values(action: argparse.Action, rng: random.Random) -> list[str]:
    out = list(rng.sample(VALUES, 4))
    if action.choices is not None:
        out += [str(c) for c in action.choices][:3]
    return out


def _abbrev(option: str, rng: random.Random) -> str:
    if option.startswith('--') and len(option) > 4:
        return option[: rng.randint(3, len(option) - 1)]
    return option


def _option_words(action: argparse.Action, rng: random.Random) -> list[list[str]]:
    forms = []
    for opt in action.option_strings:
        if action.nargs == 0:
            forms += [[opt], [_abbrev(opt, rng)], [opt + '=1']]
            continue
        for v in _values(action, rng):
            form = rng.choice(['space', 'eq', 'abbrev', 'abbrev-eq', 'attached'])
            if form == 'space':
                forms.append([opt, v])
            elif form == 'eq':
                forms.append([f'{opt}={v}'])
            elif form == 'abbrev':
                forms.append([_abbrev(opt, rng), v])
            elif form == 'abbrev-eq':
                forms.append([f'{_abbrev(opt, rng)}={v}'])
            else:
                forms.append([opt + v] if not opt.startswith('--') else [opt, v])
        forms.append([opt])  # the value missing (last word, or followed by the script)
    return forms


SCRIPTS = [
    ['train.py'],
    ['train.py', '--lr', '1e-5', '--nnodes', '4'],
    ['-m', 'swift.cli.rlhf', '--rlhf_type', 'grpo'],
    ['--', 'train.py', '--num_processes', '2'],
    ['swift/cli/rlhf.py', '-h'],
    [],
]
UNKNOWN = [
    ['--bogus'],
    ['--bogus=1'],
    ['-Z'],
    ['--num'],
    ['--m'],
    ['--no'],
    ['--help'],
    ['-h'],
    ['-qm'],  # short flags combined
    ['-mq'],
    ['-t3'],  # a short option's value attached
    ['-r', '1'],
    ['--'],
    ['-'],
]


def _env(parser: argparse.ArgumentParser, rng: random.Random) -> dict[str, str]:
    env = {}
    for a in parser._actions:
        if a.option_strings and rng.random() < 0.15:
            value = rng.choice(
                ['1', '0', '2', '4:8', 'abc', '', 'fork'] if a.nargs != 0 else ['1', '0', '', 'abc', '2']
            )
            env[f'PET_{a.dest.upper()}'] = value
    return env


def argvs(name: str, count: int, seed: int) -> list[tuple[list[str], dict[str, str]]]:
    rng = random.Random(seed)
    parser = gen.real_parser(name)
    pool = [w for a in parser._actions if a.option_strings for w in _option_words(a, rng)]
    out = [([*words, *rng.choice(SCRIPTS[:3])], {}) for words in pool]  # every option's forms once
    for _ in range(count):
        words: list[str] = []
        for _ in range(rng.randint(0, 5)):
            words += rng.choice(pool) if rng.random() < 0.9 else rng.choice(UNKNOWN)
        words += rng.choice(SCRIPTS)
        env = _env(parser, rng) if name.startswith('torch') and rng.random() < 0.4 else {}
        out.append((words, env))
    return out


@pytest.mark.parametrize('name', NAMES)
def test_rebuilt_parser_equals_the_real_one(name):
    cases = argvs(name, 400, seed=NAMES.index(name))
    kinds = set()
    for argv, env in cases:
        want = real_outcome(name, argv, env)
        got = rebuilt_outcome(name, argv, env)
        assert got == want, f'{name} {argv} env={env}'
        kinds.add(want[0])
    assert {'ok', 'error'} <= kinds  # the generator reaches both accepted and refused launches


@pytest.mark.parametrize('name', ['torchrun', 'torch.distributed.launch'])
def test_pet_variables_set_the_defaults_as_torch_reads_them(name):
    cases = [
        {'PET_NPROC_PER_NODE': '4', 'PET_NNODES': '2:3', 'PET_MAX_RESTARTS': '3'},
        {'PET_STANDALONE': '1', 'PET_NO_PYTHON': '0', 'PET_MODULE': '1'},
        {'PET_STANDALONE': 'yes'},  # check_env's int(): torch fails while building its parser
        {'PET_MAX_RESTARTS': 'many'},  # an int option's default from the environment, converted when unused
        {'PET_NPROC_PER_NODE': ''},
        {'PET_DUPLICATE_STDOUT_FILTERS': 'a,,b,c'},
    ]
    for env in cases:
        for argv in (['train.py'], ['--max-restarts', '1', 'train.py'], ['--standalone', 'train.py']):
            assert rebuilt_outcome(name, argv, env) == real_outcome(name, argv, env), (argv, env)


def test_custom_types_equal_the_real_ones():
    real = {a.dest: a.type for name in NAMES for a in gen.real_parser(name)._actions}
    words = ['', 'a', 'a,b', 'a,,b', ',,', 'a,,,b', ',a,', 'yes,no,on', 'Y', 'off', '1,0,1', 'maybe', 'true,maybe']

    def run(f, w):
        try:
            return ('ok', f(w))
        except ValueError as e:
            return ('err', str(e))

    for dest in ('duplicate_stdout_filters', 'fp8_override_linear_precision', 'fp8_pad_inner_dim'):
        mine = launcher_args.build_parser(
            'torchrun' if dest.startswith('dup') else 'accelerate launch'
        )._option_string_actions
        ours = next(a.type for a in mine.values() if a.dest == dest)
        for w in words:
            assert run(ours, w) == run(real[dest], w), (dest, w)


def test_nnodes_range_as_torch_reads_it():
    from torch.distributed.run import parse_min_max_nnodes

    for raw in ['1', '2:4', '0:0', ':3', '2:', 'a', '1:2:3', '', ' 2', '2 : 3', '+1:-1', '١']:
        want = got = None
        try:
            want = ('ok', parse_min_max_nnodes(raw))
        except (ValueError, RuntimeError) as e:
            want = (type(e).__name__, str(e))
        try:
            got = ('ok', launcher_args.parse_min_max_nnodes(raw))
        except (ValueError, RuntimeError) as e:
            got = (type(e).__name__, str(e))
        assert got == want, raw


def test_check_on_launchers_imports_none_of_their_packages(tmp_path):
    """`check` on a torchrun / deepspeed / accelerate launch, in a fresh interpreter: torch, accelerate and
    DeepSpeed stay unimported."""
    launches = {
        't.sh': 'torchrun --nproc_per_node 2 --nnodes 1:2 -m swift.cli.rlhf --rlhf_type grpo',
        'p.sh': 'python -m torch.distributed.launch --nproc_per_node 2 --use-env swift/cli/rlhf.py --rlhf_type grpo',
        'd.sh': 'deepspeed --num_gpus 2 swift/cli/rlhf.py --rlhf_type grpo',
        'a.sh': 'accelerate launch --num_processes 2 train_grpo.py --num_generations 4',
    }
    common = ' --model Qwen/Qwen2.5-0.5B-Instruct --dataset AI-MO/NuminaMath-TIR#100 --reward_funcs accuracy'
    for name, line in launches.items():
        (tmp_path / name).write_text(line + (common if 'swift' in line else '') + '\n')
    probe = (
        'import sys\n'
        'from grpo_recipes.cli.guard import main\n'
        'for f in sys.argv[1:]:\n'
        '    code = main(["check", f, "--gpus", "2", "--gpu-type", "A100-80GB"])\n'
        '    print(f, code, [m for m in ("torch", "accelerate", "deepspeed") if m in sys.modules])\n'
    )
    proc = subprocess.run(
        [sys.executable, '-c', probe, *(str(tmp_path / n) for n in launches)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env={**__import__('os').environ, 'PYTHONPATH': str(ROOT), 'HF_HUB_OFFLINE': '1'},
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.endswith(']') and ln.startswith(str(tmp_path))]
    assert len(lines) == len(launches), proc.stdout[-3000:] + proc.stderr[-3000:]
    for ln in lines:
        assert ln.endswith(' []'), ln


def test_a_pet_flag_that_is_not_an_integer_is_one_line(tmp_path, capsys):
    """torch's check_env runs int(PET_STANDALONE) while it builds torchrun's parser (a ValueError, before any
    parsing): the guard says so in one line, exit 2."""
    from grpo_recipes.cli import guard

    script = tmp_path / 'launch.sh'
    script.write_text('PET_STANDALONE=yes torchrun --nproc_per_node 2 train.py\n')
    assert guard.main(['check', str(script), '--gpus', '2', '--gpu-type', 'A100-80GB']) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1 and 'PET_STANDALONE=yes' in err[0] and "invalid literal for int() with base 10: 'yes'" in err[0]
    ), err
