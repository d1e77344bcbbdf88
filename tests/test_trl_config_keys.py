"""Keys of a TRL --config file that TRL's dataclasses lack: TRL >= 0.19's TrlParser stops ("Unknown arguments from
config file", trl/scripts/utils.py, PR #3543), TRL <= 0.18 drops them silently. `check` and `validate` (TRL's own
parser, run here on the installed TRL) must say the same (one decision: frontends/trl_config.py)."""

import json

import pytest
from conftest import run_cli

from grpo_recipes.frontends.trl.config_keys import parser_classes

HW = ['--gpus', '4', '--gpu-type', 'A100-80G']
BASE_YAML = (
    'model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ndtype: bfloat16\nper_device_train_batch_size: 8\n'
    'num_generations: 8\nuse_vllm: true\nvllm_mode: colocate\nvllm_max_model_length: 2048\n'
)
OWN = (
    'from dataclasses import dataclass, field\nfrom trl import ModelConfig, TrlParser\n'
    'from open_r1.configs import GRPOConfig, GRPOScriptArguments\n'
    'parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))\n'
    'script_args, training_args, model_args = parser.parse_args_and_config()\n'
)
TRLS = (
    'from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser\n'
    'parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))\n'
    'script_args, training_args, model_args = parser.parse_args_and_config()\n'
)


def test_whose_dataclasses_parse_the_flags():
    assert parser_classes('trl grpo') == 'trl'
    assert parser_classes('x.py', OWN) == 'own' and parser_classes('x.py', TRLS) == 'trl'
    assert parser_classes('x.py', 'import trl\np = trl.TrlParser((trl.ScriptArguments, trl.GRPOConfig))\n') == 'trl'
    assert parser_classes('x.py', 'print(1)\n') is None


def _launch(tmp_path, extra_yaml, script=None, tag=''):
    (tmp_path / f'cfg{tag}.yaml').write_text(BASE_YAML + extra_yaml)
    if script is None:
        return ['trl', 'grpo', '--config', f'cfg{tag}.yaml']
    (tmp_path / f'grpo{tag}.py').write_text(script)
    return ['accelerate', 'launch', '--num_processes', '4', f'grpo{tag}.py', '--config', f'cfg{tag}.yaml']


def _check(tmp_path, launch, *opts):
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW, *opts, '--', *launch, cwd=tmp_path)
    out = json.loads(proc.stdout)
    return {f['rule']: f for f in out['findings']}


def test_unknown_config_key_by_release(tmp_path):
    # a script parsing with TRL's own dataclasses (`trl grpo` hands such keys to accelerate from 0.29, and
    # warmup_ratio was a TrainingArguments field up to transformers 4.x: tests/test_trl_script_parsers.py)
    launch = _launch(tmp_path, 'warmup_fraction: 0.1\n', TRLS)
    f = _check(tmp_path, launch)['args.config-key']  # installed TRL (>= 0.19)
    assert f['severity'] == 'error' and 'Unknown arguments from config file' in f['message']
    assert f['fix'] == 'remove `warmup_fraction` from cfg.yaml'
    f = _check(tmp_path, launch, '--trl-version', '0.18.2')['args.config-key']
    assert f['severity'] == 'warning' and 'drops unknown config-file keys silently' in f['message']
    # on the command line instead of the file, the command-line rule judges it (not this one)
    assert 'args.config-key' not in _check(tmp_path, _launch(tmp_path, '', TRLS) + ['--warmup_fraction', '0.1'])


def test_a_key_the_release_still_had_is_no_finding(tmp_path):
    launch = _launch(tmp_path, 'max_prompt_length: 256\n')
    assert 'args.config-key' in _check(tmp_path, launch)
    assert 'args.config-key' not in _check(tmp_path, launch, '--trl-version', '0.20.0')


@pytest.mark.slow
def test_check_and_validate_agree_on_config_keys(tmp_path, monkeypatch, capsys):
    """`check` (in process: the fast path) and TRL's own parser (all five launches in one worker, one TRL import, as
    `grpo-guard validate` runs it on each: the same launch reading and process count) give the same verdict."""
    from grpo_recipes.cli.guard import main
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.frontends.launcher_count import apply_default_processes
    from grpo_recipes.realparse import validate_trl_many

    cases = [
        ('warmup_ratio: 0.1\n', None),
        ('torch_dtype: bfloat16\n', None),
        ('warmup_steps: 10\n', None),
        ('system_prompt: hi\n', OWN),
        ('system_prompt: hi\n', TRLS),
    ]
    monkeypatch.chdir(tmp_path)  # the launches name their files relative to where they are typed, as a user would
    refused, launches = [], []
    for i, (extra, script) in enumerate(cases):
        launch = _launch(tmp_path, extra, script, tag=str(i))
        assert main(['check', '--json', *HW, '--', *launch]) in (0, 1)
        checked = {f['rule']: f for f in json.loads(capsys.readouterr().out)['findings']}.get('args.config-key')
        refused.append(checked is not None and checked['severity'] == 'error')
        read = read_launch(launch)
        apply_default_processes(read, None)  # what `grpo-guard validate` does before the parse
        launches.append(read)
    for (extra, script), was_refused, real in zip(cases, refused, validate_trl_many(launches)):
        assert was_refused == (not real.ok), (extra, script, real.message)
        if not real.ok:  # `trl grpo` (TRL 0.29's CLI) hands the key to accelerate launch, which refuses it
            assert (
                'unrecognized arguments' if script is None else 'Unknown arguments from config file'
            ) in real.message, real.message


def test_a_script_not_here_may_define_a_key_trl_never_had(tmp_path):
    """open-r1's `accelerate launch src/open_r1/grpo.py --config ...` checked where grpo.py is not: its parser is not
    read, so a key TRL never had (`system_prompt`, a field of open-r1's own GRPOConfig) may be the script's, a warning;
    a key TRL removed (`torch_dtype`, removed in 0.27) is still refused, and it is named as the config writes it."""
    (tmp_path / 'cfg.yaml').write_text(BASE_YAML + 'system_prompt: be brief\ntorch_dtype: bfloat16\n')
    launch = ['accelerate', 'launch', '--num_processes', '4', 'src/open_r1/grpo.py', '--config', 'cfg.yaml']
    proc = run_cli('grpo_recipes.cli.guard', 'check', '--json', *HW, '--', *launch, cwd=tmp_path)
    found = [f for f in json.loads(proc.stdout)['findings'] if f['rule'] == 'args.config-key']
    by_key = {f['arguments'][0]: f for f in found}
    assert (
        by_key['system_prompt']['severity'] == 'warning'
        and 'its parser was not read' in by_key['system_prompt']['message']
    )
    assert by_key['torch_dtype']['severity'] == 'error' and '`torch_dtype`' in by_key['torch_dtype']['message']
    assert by_key['torch_dtype']['fix'] == 'remove `torch_dtype` from cfg.yaml'
