"""TRL training scripts read as Python reads them (issue 27): a PeftModel passed as the model, a YAML the script loads
into its own GRPOConfig class, `trl grpo --config` keys TRL's CLI hands to accelerate, the script's own dataclasses
(read in its repository), its own argparse, the TrainingArguments fields of an older TRL's transformers, and a bare
`--bf16`. The scripts are written here in the shapes of the public sources named at each; none is run."""

import json

import pytest
from conftest import run_cli

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware

H100x8 = Hardware(gpus=8, gpu_type='H100', source='flags')
M = 'Qwen/Qwen2.5-7B-Instruct'


def check(tmp_path, monkeypatch, *argv, trl='0.29.1', hw=H100x8):
    monkeypatch.chdir(tmp_path)
    packages = {'trl': trl, 'math-verify': '0.9.0', 'deepspeed': '0.19.8'}
    report = check_launch(read_launch(list(argv), environ={}), hw, packages=packages)
    return report, {f.rule: f for f in report.findings}


def findings(report, rule):
    return [f for f in report.findings if f.rule == rule]


# --- 1. a PeftModel passed as model= --------------------------------------------------------------------------------
# the shape of PEFT's quicktour (huggingface/peft docs/source/quicktour.md: get_peft_model(model, LoraConfig(...)))
# fed to GRPOTrainer as TRL's docs allow (trl docs/source/grpo_trainer.md: `model` may be a PeftModel)
PEFT_SCRIPT = """import torch
from datasets import load_dataset
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer


def reward_len(completions, **kwargs):
    return [-abs(200 - len(c)) for c in completions]


def main():
    model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen2.5-7B-Instruct", dtype=torch.bfloat16)
    lora_config = LoraConfig(r=32, lora_alpha=64, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                             task_type="CAUSAL_LM")
    model = {wrap}
    args = GRPOConfig(output_dir="out", per_device_train_batch_size=8, num_generations=8,
                      max_completion_length=1024, use_vllm=True, vllm_mode="colocate",
                      vllm_gpu_memory_utilization=0.3, vllm_max_model_length=1536)
    trainer = GRPOTrainer(model=model, reward_funcs=reward_len, args=args,
                          train_dataset=load_dataset("trl-lib/tldr", split="train"))
    trainer.train()


main()
"""


def test_a_peft_model_passed_to_grpotrainer_is_planned_as_lora(tmp_path, monkeypatch):
    (tmp_path / 'train.py').write_text(PEFT_SCRIPT.replace('{wrap}', 'get_peft_model(model, lora_config)'))
    report, rules = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '8', 'train.py')
    cfg = report.cfg
    assert cfg.tuner_type == 'lora' and cfg.lora_rank == 32 and cfg.lora_alpha == 64
    assert cfg.target_modules == ['q_proj', 'k_proj', 'v_proj', 'o_proj'] and cfg.torch_dtype == 'bfloat16'
    assert 'get_peft_model' in report.launch.trl.script_settings
    full = PEFT_SCRIPT.replace('{wrap}', 'model')  # the same script without PEFT trains every weight
    (tmp_path / 'full.py').write_text(full)
    full_report, _ = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '8', 'full.py')
    assert full_report.cfg.tuner_type == 'full'
    # PeftModel.from_pretrained(base, adapter): LoRA too; its LoraConfig is the adapter's (not in the script)
    (tmp_path / 'resume.py').write_text(PEFT_SCRIPT.replace('{wrap}', 'PeftModel.from_pretrained(model, "ckpt/lora")'))
    resumed, _ = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '8', 'resume.py')
    assert resumed.cfg.tuner_type == 'lora' and resumed.cfg.torch_dtype == 'bfloat16'
    assert 'PeftModel.from_pretrained reads it from the adapter' in resumed.launch.trl.script_settings
    # the adapter is here: its adapter_config.json (peft's save_pretrained) is the LoraConfig
    (tmp_path / 'ckpt' / 'lora').mkdir(parents=True)
    (tmp_path / 'ckpt' / 'lora' / 'adapter_config.json').write_text(
        json.dumps(
            {
                'peft_type': 'LORA',
                'r': 8,
                'lora_alpha': 16,
                'target_modules': ['q_proj', 'v_proj'],
                'lora_dropout': 0.05,
            }
        )
    )
    resumed, _ = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '8', 'resume.py')
    assert resumed.cfg.lora_rank == 8 and resumed.cfg.target_modules == ['q_proj', 'v_proj']
    assert 'adapter_config.json r' in resumed.launch.trl.script_settings


# --- 2. a YAML the script loads into its own GRPOConfig class --------------------------------------------------------
# the argparse `--config` + yaml.safe_load + dataclass(**cfg) shape (PyYAML docs: yaml.safe_load; Python docs:
# dataclasses' generated __init__), with TRL's GRPOConfig as the base (trl docs/source/grpo_trainer.md)
SELF_LOADED = """import argparse
from dataclasses import dataclass, field

import yaml
from trl import GRPOConfig, GRPOTrainer


@dataclass
class MyConfig(GRPOConfig):
    length_weight: float = field(default=1.0)
    data_path: str = "data.jsonl"


parser = argparse.ArgumentParser()
parser.add_argument("--config", required=True)
args = parser.parse_args()
with open(args.config) as f:
    cfg = yaml.safe_load(f)
training_args = MyConfig(**cfg)
trainer = GRPOTrainer(model="Qwen/Qwen2.5-7B-Instruct", reward_funcs=[], args=training_args)
trainer.train()
"""
SELF_YAML = (
    'output_dir: out\nper_device_train_batch_size: 4\nnum_generations: 8\nmax_completion_length: 1024\n'
    'use_vllm: true\nvllm_mode: colocate\nvllm_max_model_length: 1536\nlength_weight: 0.5\n'
)


def test_a_yaml_the_script_loads_itself_is_its_config_classes_keywords(tmp_path, monkeypatch):
    (tmp_path / 'train.py').write_text(SELF_LOADED)
    (tmp_path / 'cfg.yaml').write_text(SELF_YAML)
    argv = ['accelerate', 'launch', '--num_processes', '8', 'train.py', '--config', 'cfg.yaml']
    report, rules = check(tmp_path, monkeypatch, *argv)
    assert report.cfg.per_device_train_batch_size == 4 and report.cfg.max_completion_length == 1024
    assert 'args.config-key' not in rules and 'args.unknown' not in rules  # length_weight: MyConfig's own field
    # a key MyConfig lacks stops its __init__ whatever the TRL release; `env:` is no TrlParser block here, and
    # ModelConfig's model_name_or_path is not GRPOConfig's
    (tmp_path / 'cfg.yaml').write_text(
        SELF_YAML + 'lenght_weight: 0.5\nenv:\n  WANDB_MODE: offline\nmodel_name_or_path: Qwen/Qwen2.5-7B-Instruct\n'
    )
    for trl in ('0.29.1', '0.18.2'):
        report, _ = check(tmp_path, monkeypatch, *argv, trl=trl)
        bad = {f.arguments[0]: f for f in findings(report, 'args.config-key')}
        assert set(bad) == {'lenght_weight', 'env', 'model_name_or_path'}, bad
        f = bad['lenght_weight']
        assert f.severity == 'error'
        assert "MyConfig.__init__() got an unexpected keyword argument 'lenght_weight'" in f.message
        assert f.fix.startswith('remove `lenght_weight` from cfg.yaml')


# --- 3. trl grpo --config with reward_funcs and accelerate_config ---------------------------------------------------
# TRL's CLI docs (trl docs/source/clis.md, v0.29.1): a GRPO config file with reward_funcs, and `accelerate_config:
# zero2` in the config file
TRL_CLI_YAML = (
    'model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ndataset_name: HuggingFaceH4/Polaris-Dataset-53K\n'
    'reward_funcs:\n  - accuracy_reward\naccelerate_config: zero2\nnum_processes: 4\n'
    'dtype: bfloat16\nper_device_train_batch_size: 8\nnum_generations: 8\nuse_vllm: true\n'
    'vllm_mode: colocate\nvllm_max_model_length: 2048\n'
)


def test_trl_grpo_config_file_is_read_as_trls_cli_reads_it(tmp_path, monkeypatch):
    (tmp_path / 'grpo_config.yaml').write_text(TRL_CLI_YAML)
    report, rules = check(tmp_path, monkeypatch, 'trl', 'grpo', '--config', 'grpo_config.yaml')
    assert 'args.config-key' not in rules and 'args.unknown' not in rules, [f.message for f in report.findings]
    acc = report.launch.trl.accelerate
    assert acc['zero_stage'] == 2 and acc['config_source'].endswith('zero2.yaml')  # TRL's packaged zero2
    assert report.plan.world_size == 4  # num_processes: 4 handed to accelerate launch (zero2.yaml says 8)
    # the command line's accelerate option wins over the file's
    report, _ = check(tmp_path, monkeypatch, 'trl', 'grpo', '--config', 'grpo_config.yaml', '--num_processes', '2')
    assert report.plan.world_size == 2
    # a key neither trl grpo's dataclasses nor accelerate know: accelerate launch stops on it (TRL 0.29's CLI)
    (tmp_path / 'grpo_config.yaml').write_text(TRL_CLI_YAML + 'reward_weights_typo: [1.0]\n')
    report, rules = check(tmp_path, monkeypatch, 'trl', 'grpo', '--config', 'grpo_config.yaml')
    f = rules['args.config-key']
    assert f.severity == 'error' and 'unrecognized arguments: --reward_weights_typo' in f.message
    # TRL 0.23-0.28: trl/scripts/grpo.py parses with return_remaining_strings=True and drops it; that release's
    # trl/cli.py passed no launch options to accelerate, so accelerate_config and num_processes did nothing either
    report, _ = check(tmp_path, monkeypatch, 'trl', 'grpo', '--config', 'grpo_config.yaml', trl='0.25.1')
    got = {f.arguments[0]: f for f in findings(report, 'args.config-key')}
    assert set(got) == {'reward_weights_typo', 'accelerate_config', 'num_processes'}
    assert all(f.severity == 'warning' and 'no effect' in f.message for f in got.values())
    report, _ = check(tmp_path, monkeypatch, 'trl', 'grpo', '--config', 'grpo_config.yaml', trl='0.20.0')
    assert findings(report, 'args.config-key')[0].severity == 'error'  # 0.19-0.22's grpo.py refuses every one


# --- 4. a TrlParser over the script's own dataclasses, read in its repository ---------------------------------------
# open-r1's layout (huggingface/open-r1: src/open_r1/grpo.py parses TrlParser((GRPOScriptArguments, GRPOConfig,
# ModelConfig)) with the classes from src/open_r1/configs.py, subclasses of trl's; recipes/*.yaml as --config)
OPEN_R1_GRPO = """import sys

from trl import GRPOTrainer, ModelConfig, TrlParser, get_peft_config

from open_r1.configs import GRPOConfig, GRPOScriptArguments


def main(script_args, training_args, model_args):
    trainer = GRPOTrainer(model=model_args.model_name_or_path, reward_funcs=[], args=training_args,
                          peft_config=get_peft_config(model_args))
    trainer.train()


if __name__ == "__main__":
    parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
"""
OPEN_R1_CONFIGS = """from dataclasses import dataclass, field
from typing import Optional

import trl


@dataclass
class ScriptArguments(trl.ScriptArguments):
    dataset_prompt_column: str = field(default="prompt")


@dataclass
class GRPOConfig(trl.GRPOConfig):
    benchmarks: list[str] = field(default_factory=lambda: [])
    callbacks: list[str] = field(default_factory=lambda: [])
    system_prompt: Optional[str] = field(default=None)
    hub_model_revision: Optional[str] = field(default="main")


@dataclass
class GRPOScriptArguments(ScriptArguments):
    reward_funcs: list[str] = field(default_factory=lambda: ["accuracy", "format", "tag_count"])
    cosine_min_value_wrong: float = field(default=0.0)
"""
R1_YAML = (
    'model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ndtype: bfloat16\nper_device_train_batch_size: 8\n'
    'num_generations: 8\nuse_vllm: true\nvllm_mode: colocate\nvllm_max_model_length: 2048\n'
    'reward_funcs:\n- accuracy\n- format\nsystem_prompt: "think first"\nhub_model_revision: main\n'
    'dataset_prompt_column: problem\n'
)


def _open_r1(tmp_path, extra=''):
    pkg = tmp_path / 'src' / 'open_r1'
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'grpo.py').write_text(OPEN_R1_GRPO)
    (pkg / 'configs.py').write_text(OPEN_R1_CONFIGS)
    (tmp_path / 'recipe.yaml').write_text(R1_YAML + extra)
    return ['accelerate', 'launch', '--num_processes', '8', 'src/open_r1/grpo.py', '--config', 'recipe.yaml']


def test_the_scripts_own_dataclasses_decide_its_config_keys(tmp_path, monkeypatch):
    argv = _open_r1(tmp_path)
    report, rules = check(tmp_path, monkeypatch, *argv)
    assert 'args.config-key' not in rules and 'args.unknown' not in rules, [f.message for f in report.findings]
    assert report.launch.trl.script_parse['own_unread'] == []
    argv = _open_r1(tmp_path, 'sytem_prompt: typo\n')
    report, rules = check(tmp_path, monkeypatch, *argv)  # TRL >= 0.19 stops on a key none of them defines
    f = rules['args.config-key']
    assert f.severity == 'error' and 'Unknown arguments from config file' in f.message
    assert 'GRPOScriptArguments, GRPOConfig, ModelConfig' in f.message
    report, rules = check(tmp_path, monkeypatch, *argv, trl='0.18.2')  # 0.18 drops it silently
    assert rules['args.config-key'].severity == 'warning' and 'no effect' in rules['args.config-key'].message
    # on the command line, HfArgumentParser refuses it whatever the release
    report, rules = check(tmp_path, monkeypatch, *_open_r1(tmp_path), '--sytem_prompt', 'x')
    f = rules['args.unknown']
    assert f.severity == 'error' and 'not used by the HfArgumentParser' in f.message
    # classes that cannot be read here (configs.py absent): a warning, as before
    (tmp_path / 'src' / 'open_r1' / 'configs.py').unlink()
    report, rules = check(tmp_path, monkeypatch, *argv)
    assert rules['args.config-key'].severity == 'warning'


# --- 5. the script's own argparse ----------------------------------------------------------------------------------
# the argparse shape of Python's argparse tutorial (docs.python.org/3/howto/argparse.html) around TRL's GRPOTrainer
# quickstart (trl docs/source/grpo_trainer.md)
ARGPARSE_SCRIPT = """import argparse

from trl import GRPOConfig, GRPOTrainer

parser = argparse.ArgumentParser(description="GRPO on my data")
parser.add_argument("--model", default="Qwen/Qwen2.5-7B-Instruct")
parser.add_argument("--lr", type=float, default=1e-6)
parser.add_argument("--batch_size", type=int, default=8)
parser.add_argument("--use_vllm", action="store_true")
args = parser.{parse}()
training_args = GRPOConfig(output_dir="out", learning_rate=args.lr, per_device_train_batch_size=args.batch_size,
                           num_generations=8, max_completion_length=1024, use_vllm=args.use_vllm,
                           vllm_mode="colocate", vllm_max_model_length=1536)
trainer = GRPOTrainer(model=args.model, reward_funcs=[], args=training_args)
trainer.train()
"""


def test_the_scripts_own_argparse_judges_its_flags(tmp_path, monkeypatch):
    (tmp_path / 'train.py').write_text(ARGPARSE_SCRIPT.replace('{parse}', 'parse_args'))
    launch = ['accelerate', 'launch', '--num_processes', '8', 'train.py']
    report, rules = check(tmp_path, monkeypatch, *launch, '--lr', '1e-5', '--batch_size', '4', '--use_vllm')
    assert 'args.unknown' not in rules, [f.message for f in report.findings]
    assert report.cfg.per_device_train_batch_size == 4 and report.cfg.use_vllm  # GRPOConfig(...=args.x) takes them
    assert report.cfg.model == M  # trainer(model=args.model): the flag's default
    report, rules = check(tmp_path, monkeypatch, *launch, '--batch_size', '4', '--per_device_train_batch_size', '2')
    f = rules['args.unknown']
    assert f.severity == 'error'
    assert 'argparse would exit 2: unrecognized arguments: --per_device_train_batch_size 2' in f.message
    assert report.cfg.per_device_train_batch_size == 4  # the TRL flag never reaches TRL: the script's value
    # a fix is written in the script's own options (--batch_size), or at its lines, never as a TRL flag it refuses
    report, rules = check(
        tmp_path,
        monkeypatch,
        *launch,
        '--batch_size',
        '64',
        '--use_vllm',
        hw=Hardware(gpus=8, gpu_type='A100-40G', source='flags'),
    )
    fix = rules['memory.fix'].fix
    assert '--batch_size ' in fix and '--per_device_train_batch_size' not in fix and 'train.py:11: ' in fix, fix
    report, rules = check(tmp_path, monkeypatch, *launch, '--batch_size')
    assert (
        rules['args.unknown'].severity == 'error'
        and 'argument --batch_size: expected one argument' in rules['args.unknown'].message
    )
    # parse_known_args: what argparse leaves goes on; here nothing reads it (a warning, no effect)
    (tmp_path / 'known.py').write_text(
        ARGPARSE_SCRIPT.replace('{parse}', 'parse_known_args').replace(
            'args = parser.parse_known_args()', 'args, rest = parser.parse_known_args()'
        )
    )
    report, rules = check(
        tmp_path,
        monkeypatch,
        'accelerate',
        'launch',
        '--num_processes',
        '8',
        'known.py',
        '--batch_size',
        '4',
        '--bogus',
        '1',
    )
    f = rules['args.unknown']
    assert f.severity == 'warning' and '--bogus 1' in f.message and 'no effect' in f.message
    assert report.cfg.per_device_train_batch_size == 4


def test_parse_known_args_hands_the_rest_to_trls_parser(tmp_path, monkeypatch):
    # argparse for the script's own options, the rest to TRL's parser (as TRL's examples/scripts do with
    # HfArgumentParser(...).parse_args_into_dataclasses(args=...))
    text = (
        'import argparse\nfrom trl import GRPOConfig, GRPOTrainer, TrlParser\n'
        'p = argparse.ArgumentParser()\np.add_argument("--run_tag", default="x")\n'
        'opts, rest = p.parse_known_args()\n'
        'training_args, = TrlParser((GRPOConfig,)).parse_args_into_dataclasses(args=rest)\n'
        'GRPOTrainer(model="Qwen/Qwen2.5-7B-Instruct", reward_funcs=[], args=training_args).train()\n'
    )
    (tmp_path / 'train.py').write_text(text)
    report, rules = check(
        tmp_path,
        monkeypatch,
        'accelerate',
        'launch',
        '--num_processes',
        '8',
        'train.py',
        '--run_tag',
        'a',
        '--per_device_train_batch_size',
        '2',
        '--num_generations',
        '8',
        '--max_completion_length',
        '256',
        '--bogus',
        '1',
    )
    assert report.cfg.per_device_train_batch_size == 2
    f = rules['args.unknown']
    assert f.arguments == ['bogus'] and f.severity == 'error' and 'not used by the HfArgumentParser' in f.message
    # TrlParser reading sys.argv itself (not handed `rest`) sees argparse's own options too, and refuses them
    (tmp_path / 'argv.py').write_text(
        text.replace('parse_args_into_dataclasses(args=rest)', 'parse_args_into_dataclasses()')
    )
    report, rules = check(
        tmp_path,
        monkeypatch,
        'accelerate',
        'launch',
        '--num_processes',
        '8',
        'argv.py',
        '--run_tag',
        'a',
        '--per_device_train_batch_size',
        '2',
        '--num_generations',
        '8',
    )
    assert rules['args.unknown'].arguments == ['run_tag'] and rules['args.unknown'].severity == 'error'


# --- 6. an older TRL: the TrainingArguments fields of the transformers it required ----------------------------------


def test_an_older_trl_knows_its_transformers_fields_and_the_scripts_own(tmp_path, monkeypatch):
    # open-r1's recipes set warmup_ratio (a TrainingArguments field up to transformers 4.x; TRL 0.18 required
    # transformers>=4.50.0, pyproject.toml at v0.18.0) and reward_funcs (the script's GRPOScriptArguments)
    argv = _open_r1(tmp_path, 'warmup_ratio: 0.1\n')
    report, rules = check(tmp_path, monkeypatch, *argv, trl='0.18.2')
    assert 'args.config-key' not in rules and 'args.unknown' not in rules, [f.message for f in report.findings]
    # transformers 5 (what TRL 0.29.1 runs with here) has no warmup_ratio: TRL 0.29.1's TrlParser stops
    report, rules = check(tmp_path, monkeypatch, *argv)
    assert rules['args.config-key'].severity == 'error' and rules['args.config-key'].arguments == ['warmup_ratio']
    # a TRL-classes script on the command line, too
    (tmp_path / 'plain.py').write_text(
        'from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser\n'
        'p = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))\n'
        'a = p.parse_args_and_config()\n'
    )
    report, rules = check(
        tmp_path,
        monkeypatch,
        'accelerate',
        'launch',
        'plain.py',
        '--model_name_or_path',
        M,
        '--warmup_ratio',
        '0.1',
        '--per_device_train_batch_size',
        '8',
        '--num_generations',
        '8',
        trl='0.18.2',
    )
    assert 'args.unknown' not in rules


def test_transformers_fields_file_matches_the_installed_release_reading():
    # the generator reads TrainingArguments with ast; on the installed transformers it must agree with dataclasses
    import dataclasses
    import importlib.util
    import pathlib
    import sys

    import transformers

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / 'scripts'))
    from gen_trl_transformers_fields import training_arguments_fields

    src = pathlib.Path(importlib.util.find_spec('transformers.training_args').origin).read_text()
    assert training_arguments_fields(src) == [
        f.name for f in dataclasses.fields(transformers.TrainingArguments) if f.init
    ]


# --- 7. a bare --bf16 ----------------------------------------------------------------------------------------------


def test_a_namespace_returned_by_the_scripts_helper_is_read(tmp_path, monkeypatch):
    """``def parse_args(): parser = ...; return parser.parse_args()`` then ``args = parse_args()`` (GRPO_Finetuning's
    train_grpo.py; also a helper that returns a name bound to the namespace): GRPOConfig(...=args.x) takes the
    parsed values, as running the script would."""
    body = ARGPARSE_SCRIPT.replace('{parse}', 'parse_args')
    head, tail = body.split('parser = ', 1)
    options, rest = tail.split('args = parser.parse_args()\n', 1)
    for ret in ('    return parser.parse_args()\n', '    ns = parser.parse_args()\n    return ns\n'):
        indented = ''.join(f'    {line}\n' for line in ('parser = ' + options).splitlines())
        script = f'{head}def parse_args():\n{indented}{ret}\n\nargs = parse_args()\n{rest}'
        (tmp_path / 'train.py').write_text(script)
        launch = ['accelerate', 'launch', '--num_processes', '8', 'train.py']
        report, rules = check(tmp_path, monkeypatch, *launch, '--batch_size', '4', '--model', 'Qwen/Qwen2.5-1.5B')
        assert report.cfg.per_device_train_batch_size == 4 and report.cfg.model == 'Qwen/Qwen2.5-1.5B', script


def test_bare_bf16_is_argparses_error(tmp_path, monkeypatch):
    # GRPOConfig's `bf16: bool | None = None` (TRL >= 0.19): HfArgumentParser gives nargs="?" only to a bool without
    # a None default (transformers/hf_argparser.py _parse_dataclass_field), so argparse wants a value
    base = [
        'accelerate',
        'launch',
        '--num_processes',
        '8',
        'train.py',
        '--model_name_or_path',
        M,
        '--per_device_train_batch_size',
        '8',
        '--num_generations',
        '8',
    ]
    report, rules = check(tmp_path, monkeypatch, *base, '--bf16', '--dtype', 'bfloat16')
    f = rules['args.value']
    assert f.severity == 'error' and '"argument --bf16: expected one argument"' in f.message and f.fix == '--bf16 true'
    assert not report.ok
    report, rules = check(tmp_path, monkeypatch, *base, '--bf16', 'true')
    assert 'args.value' not in rules
    report, rules = check(tmp_path, monkeypatch, *base, '--use_vllm', 'maybe')
    assert 'Truthy value expected: got maybe' in rules['args.value'].message
    report, rules = check(tmp_path, monkeypatch, *base, '--bf16', trl='0.18.2')  # bf16 was `bool = False` then
    assert 'args.value' not in rules


@pytest.mark.slow
def test_validate_prints_argparses_message(tmp_path):
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'validate',
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '2',
        'train_grpo.py',
        '--model_name_or_path',
        M,
        '--bf16',
        '--per_device_train_batch_size',
        '4',
        cwd=tmp_path,
    )
    assert proc.returncode == 1
    assert 'argument --bf16: expected one argument' in proc.stdout and 'SystemExit at' in proc.stdout
    assert 'SystemExit 2' not in proc.stdout and '\n         2\n' not in proc.stdout
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '2',
        '--gpu-type',
        'H100',
        '--',
        'accelerate',
        'launch',
        '--num_processes',
        '2',
        'train_grpo.py',
        '--model_name_or_path',
        M,
        '--bf16',
        '--per_device_train_batch_size',
        '4',
        cwd=tmp_path,
    )
    assert proc.returncode == 1 and 'argument --bf16: expected one argument' in proc.stdout


@pytest.mark.slow
def test_check_and_validate_agree_on_the_scripts_own_parsers(tmp_path, monkeypatch):
    # validate runs the real parsers where they can run here (TRL's CLI and accelerate's launch parser for trl grpo,
    # the dataclass __init__ of a self-loaded config, Python's argparse on the script's add_argument calls) and the
    # fields read from the script's own files; check must refuse exactly what they refuse
    from grpo_recipes.realparse import validate_trl_many

    monkeypatch.chdir(tmp_path)
    _open_r1(tmp_path, 'sytem_prompt: typo\n')
    (tmp_path / 'r1_ok.yaml').write_text(R1_YAML)
    (tmp_path / 'grpo_config.yaml').write_text(TRL_CLI_YAML)
    (tmp_path / 'grpo_typo.yaml').write_text(TRL_CLI_YAML + 'reward_weights_typo: [1.0]\n')
    (tmp_path / 'self.py').write_text(SELF_LOADED)
    (tmp_path / 'self_ok.yaml').write_text(SELF_YAML)
    (tmp_path / 'self_bad.yaml').write_text(SELF_YAML + 'lenght_weight: 0.5\n')
    (tmp_path / 'ap.py').write_text(ARGPARSE_SCRIPT.replace('{parse}', 'parse_args'))
    (tmp_path / 'two.py').write_text(
        'from trl import GRPOConfig, ScriptArguments, TrlParser\n'
        'p = TrlParser((ScriptArguments, GRPOConfig))\n'
        'script_args, training_args = p.parse_args_and_config()\n'
    )
    acc = ['accelerate', 'launch', '--num_processes', '2']
    cases = [
        (['trl', 'grpo', '--config', 'grpo_config.yaml'], None),
        (['trl', 'grpo', '--config', 'grpo_typo.yaml'], 'unrecognized arguments: --reward_weights_typo'),
        (acc + ['self.py', '--config', 'self_ok.yaml'], None),
        (acc + ['self.py', '--config', 'self_bad.yaml'], "got an unexpected keyword argument 'lenght_weight'"),
        (acc + ['src/open_r1/grpo.py', '--config', 'r1_ok.yaml'], None),
        (acc + ['src/open_r1/grpo.py', '--config', 'recipe.yaml'], 'Unknown arguments from config file'),
        (acc + ['ap.py', '--batch_size', '4'], None),
        (acc + ['two.py', '--num_generations', '4'], None),
        (acc + ['two.py', '--model_name_or_path', M], 'not used by the HfArgumentParser'),
        (
            acc + ['ap.py', '--per_device_train_batch_size', '2'],
            'unrecognized arguments: --per_device_train_batch_size',
        ),
    ]
    launches = [read_launch(argv, environ={}) for argv, _ in cases]
    results = validate_trl_many(launches)
    for (argv, refusal), launch, real in zip(cases, launches, results):
        report = check_launch(launch, H100x8, packages={'trl': '0.29.1', 'math-verify': '0.9.0'})
        refused = [f.message for f in report.findings if f.severity == 'error' and f.rule.startswith('args.')]
        assert real.ok == (refusal is None), (argv, real.message)
        assert bool(refused) == (refusal is not None), (argv, refused)
        if refusal:
            assert refusal in real.message, (argv, real.message)


@pytest.mark.parametrize(
    'code, words, verdict',
    [
        # rebuilt and run by Python's argparse: its own messages
        (
            'p.add_argument("--n", type=int, required=True)\na = p.parse_args()',
            ['--n', 'x'],
            "argument --n: invalid int value: 'x'",
        ),
        (
            'p.add_argument("--n", type=int, required=True)\na = p.parse_args()',
            [],
            'the following arguments are required: --n',
        ),
        ('p.add_argument("--flag", action=argparse.BooleanOptionalAction)\na = p.parse_args()', ['--no-flag'], None),
        ('p.add_argument("--x", action=MyAction)\na = p.parse_args()', ['--x'], None),  # a custom action: lenient
        (
            'g = p.add_argument_group("g")\ng.add_argument("--lr", type=float)\na = p.parse_args(sys.argv[1:])',
            ['--lr', '1e-5', '--zz'],
            'unrecognized arguments: --zz',
        ),
        # not rebuilt (the parser is not whole here, or parses a list of its own): no verdict of its own
        ('def add(q):\n    q.add_argument("--z")\nadd(p)\na = p.parse_args()', ['--z', '1'], 'not read'),
        ('p.add_argument("--z")\na = p.parse_args([])', ['--zz'], 'not read'),
        ('for n in ["a", "b"]:\n    p.add_argument(f"--{n}")\na = p.parse_args()', ['--a', '1'], 'not read'),
    ],
)
def test_the_scripts_argparse_is_rebuilt_only_when_whole(code, words, verdict):
    from grpo_recipes.frontends.trl.script_parsers import script_argparse

    got = script_argparse(f'import argparse, sys\np = argparse.ArgumentParser()\n{code}\n', words, prog='t.py')
    if verdict == 'not read':
        assert got is None
    else:
        assert got is not None and got.error == verdict


def test_dataclass_fields_follow_imports_and_bases(tmp_path):
    # open-r1's own classes through `from open_r1.configs import ...` in a src/ layout, bases up to trl's
    from grpo_recipes.frontends.trl.script_parsers import parser_dataclasses

    _open_r1(tmp_path)
    script = tmp_path / 'src' / 'open_r1' / 'grpo.py'
    own = parser_dataclasses(script.read_text(), str(script))
    assert own.classes == ['GRPOScriptArguments', 'GRPOConfig', 'ModelConfig'] and own.unread == []
    assert {
        'reward_funcs',
        'dataset_prompt_column',
        'dataset_name',
        'system_prompt',
        'num_generations',
        'lora_r',
    } <= own.fields
    assert own.method == 'parse_args_and_config' and not own.remaining_ok


def test_a_trl_field_the_scripts_classes_lack_is_refused(tmp_path, monkeypatch):
    # TRL's own examples parse with the classes they need only (e.g. TrlParser((ScriptArguments, GRPOConfig)));
    # a ModelConfig flag on such a script stops HfArgumentParser even though TRL's usual classes have it
    (tmp_path / 'two.py').write_text(
        'from trl import GRPOConfig, ScriptArguments, TrlParser\n'
        'p = TrlParser((ScriptArguments, GRPOConfig))\n'
        'script_args, training_args = p.parse_args_and_config()\n'
    )
    report, rules = check(
        tmp_path,
        monkeypatch,
        'accelerate',
        'launch',
        'two.py',
        '--model_name_or_path',
        M,
        '--per_device_train_batch_size',
        '8',
        '--num_generations',
        '8',
    )
    f = rules['args.unknown']
    assert f.arguments == ['model_name_or_path'] and 'not used by the HfArgumentParser' in f.message
    # a name an older TRL had keeps its own explanation on a script with its own classes
    report, rules = check(tmp_path, monkeypatch, *_open_r1(tmp_path), '--vllm_device', 'auto')
    assert 'trl vllm-serve' in rules['args.unknown'].message


# --- the script's own dataclass fields, and a YAML it loads into a dict --------------------------------------------
# The shape of a tutorial script (boss-chanon/tutorial_grpo_on_lanta train.py): HfArgumentParser((ScriptArguments,
# GRPOConfig)) and GRPOTrainer(model=script_args.model_name); the value is what transformers' own HfArgumentParser
# makes of the command line (differential: the real parser on the same dataclass).
OWN_FIELDS = """from dataclasses import dataclass, field
from transformers import HfArgumentParser
from trl import GRPOConfig, GRPOTrainer


@dataclass
class ScriptArguments:
    model_name: str = field(default="Qwen/Qwen2.5-1.5B-Instruct")
    use_lora: bool = False


def main():
    parser = HfArgumentParser((ScriptArguments, GRPOConfig))
    script_args, training_args = parser.parse_args_into_dataclasses()
    trainer = GRPOTrainer(model=script_args.model_name, reward_funcs=[], args=training_args)
    trainer.train()


main()
"""


@pytest.mark.parametrize('words', [[], ['--model_name', M], [f'--model_name={M}', '--use_lora', 'True']])
def test_own_dataclass_field_is_the_model(tmp_path, monkeypatch, words):
    from dataclasses import dataclass, field

    from transformers import HfArgumentParser

    @dataclass
    class ScriptArguments:
        model_name: str = field(default='Qwen/Qwen2.5-1.5B-Instruct')
        use_lora: bool = False

    real = HfArgumentParser(ScriptArguments).parse_args_into_dataclasses(args=words)[0].model_name
    (tmp_path / 'train.py').write_text(OWN_FIELDS)
    base = ['--output_dir', 'o', '--per_device_train_batch_size', '8', '--num_generations', '8']
    report, _ = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '8', 'train.py', *base, *words)
    assert report.cfg.model == real


# The shape of a project script that loads its own YAML (nirmalpratheep/Alignment_and_Reasoning_RL train_trl.py):
# config = load_config("config/grpo_config.yaml"); GRPOConfig(max_completion_length=config['grpo']['max_tokens'])
YAML_DICT = """import yaml
import torch
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer


def load_config(config_path: str = "config/grpo_config.yaml") -> dict:
    with open(config_path, 'r') as f:
        return yaml.safe_load(f)


def main():
    config = load_config({arg})
    model_name = config['model']['name']
    model = AutoModelForCausalLM.from_pretrained(model_name, torch_dtype=torch.bfloat16)
    args = GRPOConfig(output_dir="o", per_device_train_batch_size=config['training']['batch_size'],
                      num_generations=config['grpo'].get('group_size', 8),
                      max_completion_length=config['grpo']['max_tokens'])
    GRPOTrainer(model=model, reward_funcs=[], args=args).train()


main()
"""


@pytest.mark.parametrize('arg', ['"config/grpo_config.yaml"', ''])
def test_yaml_the_script_loads_into_a_dict(tmp_path, monkeypatch, arg):
    import yaml

    text = 'model:\n  name: Qwen/Qwen2.5-7B-Instruct\ntraining:\n  batch_size: 4\ngrpo:\n  max_tokens: 1536\n'
    (tmp_path / 'config').mkdir()
    (tmp_path / 'config' / 'grpo_config.yaml').write_text(text)
    (tmp_path / 'train.py').write_text(YAML_DICT.format(arg=arg))
    config = yaml.safe_load(text)  # what the script's own expressions evaluate to
    report, _ = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '2', 'train.py')
    cfg = report.cfg
    assert cfg.model == config['model']['name']
    assert cfg.per_device_train_batch_size == config['training']['batch_size']
    assert cfg.num_generations == config['grpo'].get('group_size', 8)
    assert cfg.max_completion_length == config['grpo']['max_tokens']


def test_yaml_loaded_from_a_with_block_among_others(tmp_path, monkeypatch):
    """``with open("cfg.yaml") as f: config = yaml.safe_load(f)`` beside other ``with`` blocks (proofrl's main.py
    shape): the file that handle opened, and nothing else is taken for it."""
    (tmp_path / 'cfg.yaml').write_text('train:\n  completion: 640\n')
    (tmp_path / 'train.py').write_text(
        'import yaml\nfrom trl import GRPOConfig, GRPOTrainer\n\n'
        'with open("log.txt") as g:\n    pass\n'
        'with open("cfg.yaml") as f:\n    config = yaml.safe_load(f)\n'
        'with open("other.txt") as f2:\n    pass\n'
        'args = GRPOConfig(output_dir="o", max_completion_length=config["train"]["completion"])\n'
        'GRPOTrainer(model="Qwen/Qwen2.5-7B-Instruct", reward_funcs=[], args=args).train()\n'
    )
    report, _ = check(tmp_path, monkeypatch, 'accelerate', 'launch', '--num_processes', '1', 'train.py')
    assert report.cfg.max_completion_length == 640


# The shape of a script that takes its settings from the environment (Broyojo/humor-r1 train_grpo_qwen3vl.py):
# POLICY = os.environ.get("POLICY_MODEL_NAME", "..."); GRPOConfig(per_device_train_batch_size=int(os.environ.get(...)))
ENV_SCRIPT = """import os
from trl import GRPOConfig, GRPOTrainer

POLICY = os.environ.get("POLICY_MODEL_NAME", "Qwen/Qwen2.5-1.5B-Instruct")
USE_VLLM = os.environ.get("USE_VLLM", "1") == "1"
args = GRPOConfig(
    output_dir="o",
    per_device_train_batch_size=int(os.environ.get("PER_DEVICE_BATCH", "2")),
    num_generations=int(os.getenv("NUM_GENERATIONS", "4")),
    max_completion_length=int(os.environ["MAX_COMPLETION_LENGTH"]),
    use_vllm=USE_VLLM,
    vllm_mode="colocate",
)
GRPOTrainer(model=POLICY, reward_funcs=[], args=args).train()
"""


@pytest.mark.parametrize(
    'environ',
    [
        {'MAX_COMPLETION_LENGTH': '700'},
        {'MAX_COMPLETION_LENGTH': '900', 'PER_DEVICE_BATCH': '8', 'USE_VLLM': '0', 'POLICY_MODEL_NAME': M},
    ],
)
def test_settings_read_from_the_environment(tmp_path, monkeypatch, environ):
    """The values are what Python computes from the same environment: the script's expressions run here on it."""
    import ast

    (tmp_path / 'train.py').write_text(ENV_SCRIPT)
    monkeypatch.chdir(tmp_path)
    report = check_launch(
        read_launch(['accelerate', 'launch', '--num_processes', '1', 'train.py'], environ=environ),
        H100x8,
        packages={'trl': '0.29.1', 'math-verify': '0.9.0', 'deepspeed': '0.19.8'},
    )
    tree = ast.parse(ENV_SCRIPT)  # the script's own expressions, evaluated by Python with os.environ = environ
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, 'id', '') == 'GRPOConfig')
    monkeypatch.setattr('os.environ', dict(environ))
    import os

    scope = {'os': os, 'USE_VLLM': os.environ.get('USE_VLLM', '1') == '1'}
    real = {k.arg: eval(compile(ast.Expression(k.value), 'train.py', 'eval'), scope) for k in call.keywords}
    cfg = report.cfg
    assert cfg.per_device_train_batch_size == real['per_device_train_batch_size']
    assert cfg.num_generations == real['num_generations']
    assert cfg.max_completion_length == real['max_completion_length']
    assert cfg.use_vllm == real['use_vllm']
    assert cfg.model == environ.get('POLICY_MODEL_NAME', 'Qwen/Qwen2.5-1.5B-Instruct')


def test_a_word_that_is_no_number_is_argparses_error(tmp_path, monkeypatch):
    # a field typed `int | None` (GRPOConfig.generation_batch_size): HfArgumentParser gives the option type=int, so
    # argparse stops on "2.0"; it reached the plan as a string and stopped check with a TypeError
    base = ['accelerate', 'launch', '--num_processes', '2', 'train.py', '--model_name_or_path', M]
    report, rules = check(
        tmp_path,
        monkeypatch,
        *base,
        '--per_device_train_batch_size',
        '2',
        '--generation_batch_size',
        '2.0',
        hw=Hardware(gpus=2, gpu_type='H100', source='flags'),
    )
    f = rules['args.value']
    assert (
        f.severity == 'error'
        and "invalid int value: '2.0'" in f.message
        and f.fix.startswith('--generation_batch_size N')
        and '<int>' in f.fix
    )
    assert not report.ok
    report, rules = check(tmp_path, monkeypatch, *base, '--learning_rate=1e-6', '--per_device_train_batch_size', '8')
    assert 'args.value' not in rules


@pytest.mark.slow
def test_number_words_refused_as_the_real_trl_parser_refuses_them():
    # differential: TRL's own TrlParser (its HfArgumentParser on ScriptArguments, GRPOConfig, ModelConfig) against the
    # snapshot parser check uses, on the same words
    import contextlib
    import io

    trl = pytest.importorskip('trl')
    from grpo_recipes.frontends.trl.arguments import parse_args

    words = (
        ['--generation_batch_size', '2.0'],
        ['--learning_rate', 'abc'],
        ['--num_generations=eight'],
        ['--max_completion_length', '1e3'],
        ['--temperature', '0.7'],
        ['--beta=0'],
        ['--lora_r', 'x'],
        ['--vllm_gpu_memory_utilization', '.3'],
    )
    for argv in words:
        parser = trl.TrlParser((trl.ScriptArguments, trl.GRPOConfig, trl.ModelConfig))
        printed = io.StringIO()
        real = None
        try:
            with contextlib.redirect_stderr(printed):
                parser.parse_args_and_config(['--use_cpu', 'true', '--output_dir', 'o', '--dataset_name', 'd', *argv])
        except SystemExit:
            real = printed.getvalue().strip().splitlines()[-1].split(': error: ', 1)[1]
        ours = parse_args(argv, ('ScriptArguments', 'GRPOConfig', 'ModelConfig'))[0].get('_errors', {})
        assert list(ours.values()) == ([real] if real else []), argv
