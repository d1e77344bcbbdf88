"""`peft_config=get_peft_config(model_args)` (open-r1's grpo.py, TRL's examples/scripts/grpo.py): TRL's helper
returns None unless --use_peft (trl/trainer/utils.py get_peft_config, v0.14.0 to v0.29.1), so the script trains
the full model unless the command line or its --config file sets use_peft."""

import json

from conftest import run_cli

from grpo_recipes.frontends.trl.script import read_script_settings

# the shape of open-r1's src/open_r1/grpo.py: TrlParser, then the trainer with get_peft_config
OPEN_R1 = """
from trl import GRPOTrainer, ModelConfig, TrlParser, get_peft_config
from open_r1.configs import GRPOConfig, GRPOScriptArguments

def main(script_args, training_args, model_args):
    model = get_model(model_args, training_args)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset[script_args.dataset_train_split],
        peft_config=get_peft_config(model_args),
    )
    trainer.train()

if __name__ == "__main__":
    parser = TrlParser((GRPOScriptArguments, GRPOConfig, ModelConfig))
    script_args, training_args, model_args = parser.parse_args_and_config()
    main(script_args, training_args, model_args)
"""

BOUND = OPEN_R1.replace('peft_config=get_peft_config(model_args),', 'peft_config=peft,').replace(
    '    model = get_model', '    peft = get_peft_config(model_args)\n    model = get_model'
)


def test_get_peft_config_is_not_a_lora_setting():
    for text in (OPEN_R1, BOUND):
        s = read_script_settings(text)
        assert '--use_peft' not in s.flags, s.flags
        assert any('get_peft_config' in r for r in s.read)
    # a LoraConfig passed directly still is
    lora = OPEN_R1.replace('get_peft_config(model_args)', 'LoraConfig(r=8)')
    assert '--use_peft' in read_script_settings(lora).flags


def _check(tmp_path, *script_args):
    (tmp_path / 'grpo.py').write_text(OPEN_R1)
    (tmp_path / 'recipe.yaml').write_text(
        'model_name_or_path: Qwen/Qwen2.5-7B-Instruct\ndtype: bfloat16\n'
        'use_vllm: true\nvllm_mode: colocate\nvllm_max_model_length: 2048\n'
        'per_device_train_batch_size: 8\nnum_generations: 8\n'
    )
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '8',
        '--gpu-type',
        'A100-80G',
        '--',
        'accelerate',
        'launch',
        '--use_deepspeed',
        '--zero_stage',
        '3',
        '--num_processes',
        '8',
        'grpo.py',
        '--config',
        'recipe.yaml',
        *script_args,
        cwd=tmp_path,
    )
    return json.loads(proc.stdout)


def test_open_r1_script_without_use_peft_plans_full_training_with_optimizer_states(tmp_path):
    out = _check(tmp_path)
    assert out['config']['tuner_type'] == 'full'
    comps = out['memory'][0]['components']
    assert any('optimizer' in k and v > 1 for k, v in comps.items()), comps
    lora = _check(tmp_path, '--use_peft', 'true')
    assert lora['config']['tuner_type'] == 'lora'
