"""`$(grep ... config.yaml | awk '{print $2}')`, `cut -d ... -f N`, `| xargs`: the reader computes these from the
files a script reads, in the forms `bash.pure.text_tool` accepts; each is compared with the real grep, awk, cut and
xargs on the same input (a form the reader does not accept must say it does not know, never guess)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grpo_recipes.frontends.bash import pure
from grpo_recipes.frontends.shell import read_script

TOOLS = {name: shutil.which(name) for name in ('grep', 'awk', 'cut', 'xargs')}
pytestmark = pytest.mark.skipif(not all(TOOLS.values()), reason='needs grep, awk, cut and xargs')

WORDS = st.sampled_from(
    ['model', 'model_name_or_path:', 'Qwen/Qwen2.5-7B', '"x"', 'a=b', '', '  ', '\t', '#', 'lr:', '1e-6']
)
LINE = st.lists(WORDS, max_size=5).map(' '.join)
TEXT = st.lists(LINE, max_size=6).map(lambda lines: ''.join(line + '\n' for line in lines))
ARGS = st.one_of(
    st.tuples(st.just('grep'), st.lists(st.sampled_from(['-v', '-i', '-F', '-E']), max_size=2, unique=True),
              st.sampled_from(['model', '^model', 'path:$', 'Qwen', '"', 'MODEL', '^lr:', 'a.b', 'x+'])).map(
        lambda t: [t[0], *t[1], t[2]]),
    st.tuples(st.just('awk'), st.sampled_from([[], ['-F', ':'], ['-F', '"'], ['-F='], ['-F,']]),
              st.sampled_from(['{print $1}', '{print $2}', '{ print $NF }', '{print $0}', '{print NF}'])).map(
        lambda t: [t[0], *t[1], t[2]]),
    st.tuples(st.just('cut'), st.sampled_from([['-d', '"'], ['-d:'], ['-d', ' ']]),
              st.sampled_from([['-f', '2'], ['-f2'], ['-f1']])).map(lambda t: [t[0], *t[1], *t[2]]),
    st.just(['xargs']),
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(argv=ARGS, text=TEXT)
def test_text_tools_compute_what_the_real_ones_print(argv, text):
    try:
        out, status = pure.run(argv, '/', None, text)
    except pure.Impure:
        return  # not a form the reader computes: the substitution stays unresolved
    real = subprocess.run([TOOLS[argv[0]], *argv[1:]], input=text, capture_output=True, text=True, timeout=10)
    assert (out, status) == (real.stdout, real.returncode), (argv, text)


def test_a_script_reads_its_model_from_its_own_config(tmp_path):
    # open-r1 style launchers: the vLLM server's model is read back from the training config
    (tmp_path / 'config.yaml').write_text('# GRPO\nmodel_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nbf16: true\n')
    text = (
        "MODEL=$(grep 'model_name_or_path:' config.yaml | awk '{print $2}')\n"
        'CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model $MODEL\n'
        'NAME=$(grep model_name_or_path config.yaml | cut -d "/" -f 2)\n'
        'echo $NAME\n'
    )
    cmds = read_script(text, {}, 'run.sh', cwd=str(tmp_path))
    assert cmds[0].argv == ['trl', 'vllm-serve', '--model', 'Qwen/Qwen2.5-1.5B-Instruct'] and not cmds[0].unresolved
    assert cmds[1].argv == ['echo', 'Qwen2.5-1.5B-Instruct']
    # a file that is not here: not known, and said so
    missing = read_script(text.replace('config.yaml', 'other.yaml'), {}, 'run.sh', cwd=str(tmp_path))
    assert next(c for c in missing if c.argv[0] == 'trl').unresolved
