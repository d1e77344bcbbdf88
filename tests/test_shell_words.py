"""Word splitting after expansion, as bash does it: ``${V:-a b}`` is one unit while the line is split, then the
result of an unquoted expansion splits at whitespace; quoted expansions and assignments do not split. The expected
words come from bash itself (printf prints each argument it receives between brackets)."""

import os
import shutil
import subprocess

import pytest

from grpo_recipes.frontends import read_launch
from grpo_recipes.frontends.shell import read_script

BASH = shutil.which('bash')
SETUP = 'W="p q"\nE=\n'
LINES = [
    '--x ${V:-a b} --y',
    '--x "${V:-a b}"',
    '--x ${V:-"a b"} z',
    'a \'$W\' "$W" $W',
    'x $E y',
    'a "" b',
    '--m=${V:-a b}',
    'pre${W}post',
    '--x ${V:-${W}} y',
    '--x ${V:=a b} $V',
    '--n ${W:+1 2}',
]


def bash_words(setup: str, line: str) -> list[str]:
    out = subprocess.run(
        [BASH, '--norc', '-c', f'{setup}printf "%s\\0" {line}'],
        capture_output=True,
        text=True,
        env={'PATH': os.environ['PATH']},
        check=True,
    ).stdout
    return out.split('\0')[:-1]


@pytest.mark.skipif(BASH is None, reason='needs bash')
@pytest.mark.parametrize('line', LINES)
def test_words_after_expansion_match_bash(line):
    cmds = read_script(SETUP + 'printf ' + line + '\n', environ={})
    assert cmds[-1].argv[1:] == bash_words(SETUP, line)


@pytest.mark.skipif(BASH is None, reason='needs bash')
def test_assignment_value_is_not_split(tmp_path):
    got = read_script('A=${V:-a b}\nprintf "$A"\n', environ={})
    assert got[-1].argv[1:] == bash_words('A=${V:-a b}\n', '"$A"') == ['a b']


def test_unquoted_default_with_a_space_gives_the_flag_two_values(tmp_path):
    script = tmp_path / 'run.sh'
    script.write_text(
        'swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct '
        '--reward_funcs ${REWARDS:-accuracy format} --dataset d.jsonl\n',
        encoding='utf-8',
    )
    launch = read_launch([str(script)], environ={})
    i = launch.argv.index('--reward_funcs')
    assert launch.argv[i + 1 : i + 3] == ['accuracy', 'format'] and launch.argv[i + 3] == '--dataset'
