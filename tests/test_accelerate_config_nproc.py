"""An accelerate config file without ``num_processes``: the guard's process count (or its refusal) is what the
installed accelerate's own ``_validate_launch_command`` decides for the same file and options (run here on CPU: with
a config file accelerate never counts devices, so no GPU is needed)."""

import pytest

from grpo_recipes.errors import GuardError
from grpo_recipes.frontends import read_launch

ARGS = ['train_grpo.py', '--model_name_or_path', 'Qwen/Qwen2.5-7B-Instruct', '--per_device_train_batch_size', '8']
CONFIGS = {
    'multi_gpu': 'distributed_type: MULTI_GPU\nmixed_precision: bf16\n',
    'deepspeed': 'distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\n',
    'no': 'distributed_type: "NO"\nmixed_precision: bf16\n',
    'with_count': 'distributed_type: MULTI_GPU\nnum_processes: 4\n',
    'no_type': 'mixed_precision: bf16\nnum_processes: 2\n',
}


def accelerate_says(path, extra):
    """num_processes after accelerate's own validation, or the error it stops with."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    args = launch_command_parser().parse_args(['--config_file', str(path), *extra, *ARGS])
    try:
        _validate_launch_command(args)
    except ValueError as e:
        return str(e)
    return args.num_processes


@pytest.mark.parametrize('name', list(CONFIGS))
@pytest.mark.parametrize('extra', [[], ['--num_processes', '3']])
def test_config_without_num_processes_as_accelerate_reads_it(tmp_path, name, extra):
    cfg = tmp_path / f'{name}.yaml'
    cfg.write_text(CONFIGS[name], encoding='utf-8')
    want = accelerate_says(cfg, extra)
    argv = ['--', 'accelerate', 'launch', '--config_file', str(cfg), *extra, *ARGS]
    if isinstance(want, int):
        launch = read_launch(argv, environ={'HF_HOME': str(tmp_path)})
        assert int(launch.env['NPROC_PER_NODE']) == want
    else:
        with pytest.raises(GuardError) as e:
            read_launch(argv, environ={'HF_HOME': str(tmp_path)})
        assert want in str(e.value) and str(cfg) in str(e.value)
