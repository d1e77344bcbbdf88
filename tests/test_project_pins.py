"""The TRL / ms-swift release a launch's project pins (project_pins.py): read with packaging's PEP 508 parser, as pip
reads a requirements line, and used by `check` in place of the installed release unless a flag names one."""

from __future__ import annotations

import pytest
from conftest import run_cli
from helpers import PACKAGES_OK

from grpo_recipes.check import check_launch
from grpo_recipes.frontends import read_launch
from grpo_recipes.hardware import Hardware
from grpo_recipes.project_pins import project_pins


@pytest.mark.parametrize(
    'line,pinned',
    [
        ('trl==0.18.1', '0.18.1'),
        ('trl[vllm] @ git+https://github.com/huggingface/trl@v0.18.1', '0.18.1'),
        ('TRL === 0.14.0  # the release the paper used', '0.14.0'),
        ('ms_swift==3.5.3', '3.5.3'),
        ('ms-swift[llm]==3.8.1; python_version >= "3.10"', '3.8.1'),
        ('trl>=0.18', None),  # a range: any release may be installed
        ('trl==0.18.*', None),
        ('trl @ git+https://github.com/huggingface/trl@main', None),  # a branch, no release
        ('trl', None),
        ('-e .', None),
        ('transformers==4.51.0', None),  # not a framework whose release changes the reading
    ],
)
def test_only_an_exact_release_of_a_framework_is_a_pin(tmp_path, line, pinned):
    (tmp_path / 'requirements.txt').write_text(f'# training\ntorch==2.6.0\n{line}\n')
    name = 'ms-swift' if 'swift' in line.lower() else 'trl'
    got = project_pins([tmp_path]).get(name)
    assert (got[0] if got else None) == pinned


def test_the_nearest_project_file_wins_and_pyproject_counts(tmp_path):
    """A pin beside the script wins over one above it; [project] dependencies of pyproject.toml count; the walk up
    stops at the repository's root."""
    repo = tmp_path / 'repo'
    (repo / 'scripts').mkdir(parents=True)
    (repo / '.git').mkdir()
    (repo / 'pyproject.toml').write_text('[project]\nname = "x"\ndependencies = ["trl==0.19.0", "ms-swift==3.9.0"]\n')
    (repo / 'scripts' / 'requirements-train.txt').write_text('trl==0.17.0\n')
    (tmp_path / 'requirements.txt').write_text('ms-swift==3.2.0\n')  # outside the repository: not its project
    pins = project_pins([repo / 'scripts' / 'run.sh'])
    assert pins['trl'][0] == '0.17.0' and pins['ms-swift'][0] == '3.9.0'
    assert pins['trl'][1].endswith('requirements-train.txt')


TRAIN = """from trl import GRPOConfig, GRPOTrainer

args = GRPOConfig(output_dir="out", per_device_train_batch_size=8, num_generations=8, max_prompt_length=512,
                  max_completion_length=256)
trainer = GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct", reward_funcs=[], args=args)
trainer.train()
"""


def test_check_judges_the_pinned_trl_release(tmp_path):
    """A script that sets max_prompt_length (removed in TRL 0.28) in a project that pins trl==0.18.1 is judged by
    0.18.1's arguments, with a note naming the file; --trl-version still decides."""
    (tmp_path / 'train.py').write_text(TRAIN)
    (tmp_path / 'requirements.txt').write_text('trl==0.18.1\n')
    cmd = ['grpo_recipes.cli.guard', 'check', '--gpus', '1', '--gpu-type', 'A100-80G', '--', 'python', 'train.py']
    p = run_cli(*cmd, cwd=tmp_path, timeout=120)
    out = p.stdout + p.stderr
    assert 'pins trl 0.18.1; judged as trl 0.18.1' in out, out
    assert "unexpected keyword argument 'max_prompt_length'" not in out, out
    p = run_cli(*cmd[:2], '--trl-version', '0.29.1', *cmd[2:], cwd=tmp_path, timeout=120)
    out = p.stdout + p.stderr
    assert 'pins trl' not in out and "unexpected keyword argument 'max_prompt_length'" in out, out


def test_args_release_names_the_release_a_launch_was_written_for():
    """ms-swift 3.2-3.4 arguments (--use_lmdeploy, --num_infer_workers, --vllm_device), unknown to 4.6: one note says
    which releases know them all (releases.json) and how to check with one; a single unknown flag, or one no release
    knows, gives none."""
    base = ['swift', 'rlhf', '--rlhf_type', 'grpo', '--model', 'Qwen/Qwen2.5-7B-Instruct', '--use_vllm', 'false']

    def ids(*extra):
        report = check_launch(
            read_launch([*base, *extra], environ={'NPROC_PER_NODE': '1'}),
            Hardware(gpus=8, gpu_type='A100-80G', source='flags'),
            packages=PACKAGES_OK,
        )
        return {f.rule: f for f in report.findings}

    got = ids('--use_lmdeploy', 'false', '--num_infer_workers', '1', '--vllm_device', 'auto')
    f = got['args.release']
    assert '3.2' in f.message and '3.4' in f.message and '--swift-version 3.4' in f.fix
    assert 'args.release' not in ids('--use_lmdeploy', 'false')
    assert 'args.release' not in ids('--use_lmdeploy', 'false', '--no_such_flag_anywhere', '1')
