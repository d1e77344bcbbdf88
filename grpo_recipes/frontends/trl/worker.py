"""Run the installed TRL's own argument parser on a TRL launch, in its own process.

Invoked by :mod:`grpo_recipes.realparse` as ``python -m grpo_recipes.frontends.trl.worker`` with a JSON list of
requests on stdin; prints one JSON result line per request, prefixed with ``RESULT_MARK``.

- a training script (``trl grpo``, ``accelerate launch train_grpo.py``, ``python train_grpo.py``): TRL's
  ``TrlParser((ScriptArguments, GRPOConfig, ModelConfig)).parse_args_and_config(argv)``, the call TRL's
  own ``trl/scripts/grpo.py`` makes (``--config file.yaml`` included), which runs every
  ``GRPOConfig.__post_init__`` check;
- ``trl grpo`` (TRL >= 0.29): TRL's CLI itself (trl/cli/main.py's parser with ``return_remaining_strings=True``,
  ``resolve_accelerate_config_argument``, accelerate's ``launch_command_parser`` on the leftovers), then
  trl/scripts/grpo.py's ``make_parser().parse_args_and_config(..., return_remaining_strings=True)``; nothing launched;
- a script that loads its YAML into its own GRPOConfig class (``MyConfig(**yaml.safe_load(...))``): a dataclass of
  that name built on TRL's GRPOConfig with the class's extra fields (read by frontends/trl/script_parsers.py), called
  with the file's keys, so its generated ``__init__`` and GRPOConfig's ``__post_init__`` judge them;
- a rollout server (``trl vllm-serve``): ``TrlParser((vllm_serve.ScriptArguments,))`` on its argv.

argparse's SystemExit is reported with the message argparse printed ("argument --bf16: expected one argument"),
not its exit status.

What a CPU-only machine cannot have is simulated, and the result says so:
- ``world_size``: accelerate's process count is patched onto ``GRPOConfig.world_size`` so the generation
  batch rules see the real number of processes;
- ``--use_cpu true`` is added when the launch does not set ``use_cpu`` (TrainingArguments refuses bf16
  without a GPU: "Your setup doesn't support bf16/gpu").
"""

import contextlib
import io
import json
import os
import sys
import time
import traceback

from grpo_recipes.frontends.swift.worker import RESULT_MARK, _where, jsonable

REPORT_FIELDS = [
    'per_device_train_batch_size',
    'gradient_accumulation_steps',
    'num_generations',
    'generation_batch_size',
    'steps_per_generation',
    'max_completion_length',
    'use_vllm',
    'vllm_mode',
    'vllm_gpu_memory_utilization',
    'vllm_tensor_parallel_size',
    'vllm_max_model_length',
    'vllm_enable_sleep_mode',
    'gradient_checkpointing',
    'beta',
    'loss_type',
    'bf16',
    'ds3_gather_for_generation',
]
MODEL_FIELDS = ['model_name_or_path', 'dtype', 'use_peft', 'lora_r', 'lora_target_modules', 'load_in_4bit']


def _has(argv: list[str], name: str) -> bool:
    return any(a == f'--{name}' or a.startswith(f'--{name}=') or a == f'--{name.replace("_", "-")}' for a in argv)


def _argparse_message(text: str) -> str | None:
    """argparse's own message from what it printed before exiting 2 (``usage: ...`` then ``PROG: error: MSG``)."""
    for line in reversed(text.strip().splitlines()):
        if ': error: ' in line:
            return line.split(': error: ', 1)[1]
    return None


def _exit_message(e: BaseException, printed: str) -> tuple[str, str]:
    """(error type, message): for argparse's SystemExit its printed message, not the exit status."""
    if isinstance(e, SystemExit):
        msg = _argparse_message(printed)
        if msg:
            return 'SystemExit', msg
        return 'SystemExit', f'exit status {e.code}' + (
            f': {printed.strip().splitlines()[-1]}' if printed.strip() else ''
        )
    return type(e).__name__, str(e)


def _trl_cli(argv: list[str], result: dict) -> list[str] | None:
    """``trl grpo ARGV`` as TRL's CLI reads it (trl/cli/main.py, trl/cli/commands/training.py): its TrlParser with
    ``return_remaining_strings=True``, ``--accelerate_config`` resolved, accelerate's own ``launch_command_parser``
    on what is left; -> the words trl/scripts/grpo.py gets (None: a TRL before 0.29, without that CLI). Nothing is
    launched."""
    from accelerate.commands.launch import launch_command_parser

    try:
        from trl.cli.accelerate_config import resolve_accelerate_config_argument
        from trl.cli.commands import get_commands
        from trl.cli.commands.base import CommandContext
        from trl.cli.main import _build_parser
    except ImportError:
        return None
    parser = _build_parser(get_commands())
    args, remaining = parser.parse_args_and_config(args=list(argv), return_remaining_strings=True)
    context = CommandContext(argv=list(argv), remaining_args=remaining)
    launch_args = resolve_accelerate_config_argument(context.remaining_args)
    result['stage'] = (
        'accelerate/commands/launch.py (launch_command_parser, as trl/cli/accelerate_launcher.py calls it)'
    )
    launch_command_parser().parse_args(launch_args + ['grpo.py'] + context.argv_after('grpo'))
    result.pop('stage')
    return context.argv_after('grpo')


def run(request: dict) -> dict:
    t0 = time.time()
    from trl import GRPOConfig, ModelConfig, ScriptArguments, TrlParser

    import_s = time.time() - t0
    simulated: list[str] = []
    argv = list(request['argv'])
    result: dict = {'ok': False, 'simulated': simulated, 'import_s': round(import_s, 3)}
    if request.get('what') == 'rollout':
        from trl.scripts.vllm_serve import ScriptArguments as ServeArguments

        parser = TrlParser((ServeArguments,))
    else:
        world = int(request.get('world_size') or 1)
        GRPOConfig.world_size = property(lambda self: world)
        if world > 1:
            simulated.append(f'world_size={world}')
        if not _has(argv, 'use_cpu'):
            argv += ['--use_cpu', 'true']
            simulated.append('--use_cpu true')
        classes = (ScriptArguments, GRPOConfig, ModelConfig)
        if request.get('classes'):  # the script's TrlParser takes some of TRL's classes only
            import trl

            classes = tuple(getattr(trl, c) for c in request['classes'])
        parser = TrlParser(classes)
    saved = dict(os.environ)
    t1 = time.time()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            parsed = _parse(request, parser, argv, result, simulated)
    except BaseException as e:  # argparse raises SystemExit on bad types or choices
        error_type, message = _exit_message(e, err.getvalue())
        result.update(error_type=error_type, message=message, where=result.pop('stage', None) or _where(e))
        return result
    finally:
        result['parse_s'] = round(time.time() - t1, 3)
        os.environ.clear()
        os.environ.update(saved)  # a --config file's `env:` block must not leak into the next parse
    result['ok'] = True
    if request.get('what') == 'rollout':
        result['resolved'] = {k: jsonable(v) for k, v in vars(parsed[0]).items()}
    else:
        grpo = next((x for x in parsed if isinstance(x, GRPOConfig)), None)
        model = next((x for x in parsed if isinstance(x, ModelConfig)), None)
        result['resolved'] = {
            **{k: jsonable(getattr(grpo, k, None)) for k in REPORT_FIELDS},
            **{k: jsonable(getattr(model, k, None)) for k in MODEL_FIELDS},
        }
    return result


def _parse(request: dict, parser, argv: list[str], result: dict, simulated: list[str]):
    """The parse the launch's own code makes; -> (script args, GRPOConfig, ModelConfig) or (serve args,)."""
    if request.get('what') == 'trl-cli':  # trl grpo: TRL's CLI, accelerate's parser, then trl/scripts/grpo.py's
        from trl.scripts.grpo import make_parser

        words = _trl_cli(request['cli_argv'], result)
        if words is not None:
            extra = [] if _has(words, 'use_cpu') else ['--use_cpu', 'true']
            *parsed, _ = make_parser().parse_args_and_config(words + extra, return_remaining_strings=True)
            return parsed[:3]
        simulated.append("TRL's parser over ScriptArguments, GRPOConfig, ModelConfig (no trl.cli.main before 0.29)")
    if request.get('what') == 'dataclass':  # MyConfig(**yaml.safe_load(...)): the dataclass's own __init__
        import dataclasses

        import yaml
        from trl import GRPOConfig, ModelConfig

        with open(request['config']) as f:
            data = yaml.safe_load(f) or {}
        extra = [(n, 'typing.Any', dataclasses.field(default=None)) for n in request.get('extra') or ()]
        cls = dataclasses.make_dataclass(request['cls'], extra, bases=(GRPOConfig,))
        if isinstance(data, dict) and 'use_cpu' not in data:
            data['use_cpu'] = True  # as for the parser: TrainingArguments refuses bf16 without a GPU
        return None, cls(**data), ModelConfig()
    if request.get('own_classes'):
        # the script parses with its own dataclasses, which may define what TRL's lack (frontends/trl/config_keys.py):
        # TRL's classes parse, and what they leave is reported as left to the script's
        *parsed, left = parser.parse_args_and_config(argv, return_remaining_strings=True)
        if left:
            result['left_to_script'] = [a for a in left if a.startswith('--')]
            simulated.append(
                "the script's own dataclasses (not run here) are left: " + ' '.join(result['left_to_script'])
            )
        return parsed
    return parser.parse_args_and_config(argv)


def main() -> int:
    payload = json.loads(sys.stdin.read())
    requests = payload if isinstance(payload, list) else [payload]
    import trl

    for request in requests:
        try:
            result = run(request)
        except BaseException as e:  # an import failure, not a verdict on the launch
            result = {
                'ok': False,
                'crashed': True,
                'error_type': type(e).__name__,
                'message': str(e),
                'traceback': traceback.format_exc()[-4000:],
            }
        result['trl_version'] = trl.__version__
        print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
