"""TRL training scripts that write their settings in code (GRPOConfig(...) in train_grpo.py, started with a bare
`accelerate launch train_grpo.py`): the guard reads the literal keywords without running the script."""

import json

from conftest import run_cli

from grpo_recipes.frontends.trl.script import read_script_settings

SCRIPT = """
import torch
from datasets import load_dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM
from trl import GRPOConfig, GRPOTrainer

MODEL = "Qwen/Qwen2.5-7B-Instruct"
COMPLETION = 1024

def reward_len(completions, **kwargs):
    return [-abs(20 - len(c)) for c in completions]

model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.bfloat16)
lora = LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
args = GRPOConfig(
    output_dir="out",
    per_device_train_batch_size=8,
    num_generations=8,
    max_completion_length=COMPLETION,
    use_vllm=True,
    vllm_mode="colocate",
    vllm_gpu_memory_utilization=0.3,
    learning_rate=float(sys.argv[1]),
    gradient_checkpointing=True,
)
trainer = GRPOTrainer(model=model, reward_funcs=reward_len, args=args, peft_config=lora,
                      train_dataset=load_dataset("trl-lib/tldr", split="train"))
trainer.train()
"""


def flags_of(settings):
    out, key = {}, None
    for w in settings.flags:
        if w.startswith('--'):
            key = w[2:]
            out[key] = []
        else:
            out[key].append(w)
    return {k: v[0] if len(v) == 1 else v for k, v in out.items()}


def test_literal_keywords_become_trl_flags():
    s = read_script_settings(SCRIPT)
    f = flags_of(s)
    assert f['per_device_train_batch_size'] == '8' and f['max_completion_length'] == '1024'  # through a name
    assert f['use_vllm'] == 'true' and f['vllm_mode'] == 'colocate' and f['vllm_gpu_memory_utilization'] == '0.3'
    assert f['model_name_or_path'] == 'Qwen/Qwen2.5-7B-Instruct' and f['dtype'] == 'bfloat16'  # from_pretrained
    assert f['use_peft'] == 'true' and f['lora_r'] == '16' and f['lora_target_modules'] == ['q_proj', 'v_proj']
    assert 'output_dir' not in f and 'learning_rate' not in f
    assert any(u.startswith('learning_rate (line') for u in s.unread)  # computed at run time: named, not guessed


def test_a_model_moved_to_its_device_is_the_model_loaded():
    # `from_pretrained(...).to(device)` (and .cuda(), .half()) hands back the model it loaded
    for tail in ('.to(device)', '.cuda()', '.to("cuda").eval()'):
        text = SCRIPT.replace('torch_dtype=torch.bfloat16)', 'torch_dtype=torch.bfloat16)' + tail, 1)
        assert tail in text
        f = flags_of(read_script_settings(text))
        assert f['model_name_or_path'] == 'Qwen/Qwen2.5-7B-Instruct' and f['dtype'] == 'bfloat16', tail


def test_a_script_that_parses_its_flags_gives_no_settings():
    # TRL's own examples/scripts/grpo.py builds its config with TrlParser: the flags are on the command line
    text = (
        'from trl import GRPOConfig, GRPOTrainer, ModelConfig, ScriptArguments, TrlParser\n'
        'parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))\n'
        'script_args, training_args, model_args = parser.parse_args_and_config()\n'
        'trainer = GRPOTrainer(model=model_args.model_name_or_path, args=training_args)\n'
    )
    s = read_script_settings(text)
    assert not s.flags and s.unread == ['model (line 4)']
    assert read_script_settings('def broken(:\n').flags == []


def test_bare_accelerate_launch_reads_the_script(tmp_path):
    (tmp_path / 'train_grpo.py').write_text(SCRIPT)
    proc = run_cli(
        'grpo_recipes.cli.guard',
        'check',
        '--json',
        '--gpus',
        '4',
        '--gpu-type',
        'A100-80G',
        '--',
        'accelerate',
        'launch',
        '--multi_gpu',
        '--num_processes',
        '4',
        'train_grpo.py',
        '--per_device_train_batch_size',
        '4',
        cwd=tmp_path,
    )
    out = json.loads(proc.stdout)
    cfg = out['config']
    assert cfg['model'] == 'Qwen/Qwen2.5-7B-Instruct' and cfg['tuner_type'] == 'lora' and cfg['lora_rank'] == 16
    assert cfg['use_vllm'] and cfg['vllm_mode'] == 'colocate' and cfg['max_completion_length'] == 1024
    assert cfg['per_device_train_batch_size'] == 4  # the command line comes after the script's own values
    note = next(a for a in out['assumptions'] if a.startswith('settings written in train_grpo.py'))
    assert 'per_device_train_batch_size (line 18)' in note and 'LoraConfig r (line 15)' in note
    assert 'not read (computed when the script runs): learning_rate (line 24)' in note
    assert out['memory'], 'the model is known, so memory is planned'


def test_a_placeholder_stays_one_token_in_a_script_fix():
    """Issue 31 item 3: `<your longest prompt> + 2048` is never split into `'<your'` and the rest."""
    from grpo_recipes.frontends.trl.arguments import trl_terms
    from grpo_recipes.frontends.trl.script_cli import argparse_fix, point_fix

    text = trl_terms('vllm_max_model_len: <your longest prompt> + 2048 (grpo-data stats gives the prompt length)')
    at_line = point_fix(text, 'train.py', {'vllm_max_model_length': 12}, 9)
    assert at_line.startswith('train.py:12: vllm_max_model_length=<your longest prompt> + 2048 ')
    added = point_fix(text, 'train.py', {}, 9)
    assert 'add vllm_max_model_length=<your longest prompt> + 2048 to GRPOConfig(...)' in added
    for out in (at_line, added, argparse_fix(text, 'train.py', {'options': {'vllm_max_model_length': '--max-len'}})):
        assert "'<your" not in out and '"<your' not in out
    assert (
        point_fix('--vllm_mode colocate', 'train.py', {}, 9)
        == "train.py:9: add vllm_mode='colocate' to GRPOConfig(...)"
    )


def test_a_choice_and_a_pair_of_settings_point_at_the_script_whole():
    """A fix that offers values (`--num_generations one of [2, 4], or --per_device_train_batch_size 8`) or pairs two
    settings (`--use_vllm true with --vllm_mode colocate`) reads as one place per setting, the choice kept whole."""
    from grpo_recipes.frontends.trl.script_cli import point_fix

    lines = {'num_generations': 132, 'per_device_train_batch_size': 130}
    assert (
        point_fix('--num_generations one of [2, 4], or --per_device_train_batch_size 8', 'train.py', lines, 119)
        == 'train.py:132: num_generations=one of [2, 4], or train.py:130: per_device_train_batch_size=8'
    )
    assert (
        point_fix('--use_vllm true with --vllm_mode colocate', 'train.py', {}, 83)
        == "train.py:83: add use_vllm=True to GRPOConfig(...); train.py:83: add vllm_mode='colocate' to GRPOConfig(...)"
    )


def test_a_placeholder_on_a_command_line_or_in_yaml_is_one_token():
    """`--flag <your longest prompt> + 2048` pasted into a shell redirects from a file `your`: the value is one
    token (N) and the placeholder says what N is."""
    from grpo_recipes.fix_syntax import placeholder_named

    flag = placeholder_named('--vllm_max_model_length <your longest prompt> + 2048 (grpo-data stats)')
    assert flag.startswith('--vllm_max_model_length N (N = <your longest prompt> + 2048)')
    key = placeholder_named('vllm_max_model_length: <your longest prompt> + 2048')
    assert key == 'vllm_max_model_length: N  # N = <your longest prompt> + 2048'
    assert placeholder_named('--vllm_mode colocate') == '--vllm_mode colocate'


def test_a_script_using_trl_through_its_own_package_is_a_trl_script(tmp_path):
    """`src/pkg/train.py` importing `pkg.training.trainer`, whose class subclasses TRL's GRPOTrainer (EHR-R1): the
    script uses TRL. Found as Python finds the package (the script's directory or an ancestor, or relative)."""
    from grpo_recipes.frontends.entrypoints import imports_trl

    pkg = tmp_path / 'src' / 'pkg'
    (pkg / 'training').mkdir(parents=True)
    (pkg / '__init__.py').write_text('')
    (pkg / 'training' / '__init__.py').write_text('')
    (pkg / 'training' / 'trainer.py').write_text('from trl import GRPOTrainer\nclass T(GRPOTrainer):\n    pass\n')
    (pkg / 'train.py').write_text('import argparse\nfrom pkg.training.trainer import T\n')
    assert imports_trl(str(pkg / 'train.py')) is True
    (pkg / 'relative.py').write_text('from .training import trainer\n')
    assert imports_trl(str(pkg / 'relative.py')) is True
    (pkg / 'other.py').write_text('import torch\nfrom pkg.training import __init__\n')
    assert imports_trl(str(pkg / 'other.py')) is False
    assert imports_trl(str(pkg / 'missing.py')) is None


def test_a_project_copy_of_trls_vllm_server_is_not_the_trainer(tmp_path, monkeypatch):
    """REA-RL's scripts/vllm.sh starts `python src/rea_rl/vllm_server.py` (a copy of trl's vllm_serve.py: TrlParser,
    is_uvicorn_available) before `accelerate launch src/rea_rl/grpo.py`: the server is not read as the trainer."""
    from grpo_recipes.frontends import read_launch
    from grpo_recipes.frontends.entrypoints import serves_http

    monkeypatch.chdir(tmp_path)
    (tmp_path / 'vllm_server.py').write_text(
        'from trl import TrlParser\nfrom trl.import_utils import is_fastapi_available, is_uvicorn_available\n'
    )
    (tmp_path / 'grpo.py').write_text('from trl import GRPOTrainer, TrlParser\n')
    (tmp_path / 'run.sh').write_text(
        'CUDA_VISIBLE_DEVICES=2 nohup python -u vllm_server.py --model m --port 8000 > log 2>&1 &\n'
        'CUDA_VISIBLE_DEVICES=0,1 accelerate launch --num_processes 2 grpo.py --model_name_or_path '
        'Qwen/Qwen2.5-7B-Instruct\n'
    )
    assert serves_http('vllm_server.py') and not serves_http('grpo.py') and not serves_http('missing.py')
    launch = read_launch(['run.sh'], environ={})
    assert launch.trl.script == 'grpo.py'


def test_a_keyword_trl_no_longer_has_written_in_code_points_at_its_line(tmp_path, monkeypatch, capsys):
    """`GRPOConfig(..., max_prompt_length=512)` in the script (text-simplification's train_grpo.py) on TRL 0.29: the
    dataclass refuses it; the finding names the line and quotes what the real GRPOConfig raises."""
    import json

    from trl import GRPOConfig

    from grpo_recipes.cli.guard import main

    try:
        GRPOConfig(output_dir=str(tmp_path / 'o'), max_prompt_length=512)
        real = None
    except TypeError as e:
        real = str(e)
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'train.py').write_text(
        'from trl import GRPOConfig, GRPOTrainer\n'
        'args = GRPOConfig(output_dir="o", per_device_train_batch_size=4,\n'
        '                  max_prompt_length=512)\n'
        'GRPOTrainer(model="Qwen/Qwen2.5-7B-Instruct", args=args, reward_funcs=[])\n'
    )
    main(['check', '--json', '--gpus', '1', '--gpu-type', 'A100-80G', '--', 'accelerate', 'launch', 'train.py'])
    out = json.loads(capsys.readouterr().out)
    (f,) = [f for f in out['findings'] if f['rule'] == 'args.unknown']
    assert real is not None and real in f['message'] and 'train.py:3' in f['message']
