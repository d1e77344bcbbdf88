"""Run the installed TRL's own argument parser on a TRL launch, in its own process.

Invoked by :mod:`grpo_recipes.realparse` as ``python -m grpo_recipes.frontends.trl.worker`` with a JSON list of
requests on stdin; prints one JSON result line per request, prefixed with ``RESULT_MARK``.

- a training script (``trl grpo``, ``accelerate launch train_grpo.py``, ``python train_grpo.py``): TRL's
  ``TrlParser((ScriptArguments, GRPOConfig, ModelConfig)).parse_args_and_config(argv)``, the call TRL's
  own ``trl/scripts/grpo.py`` makes (``--config file.yaml`` included), which runs every
  ``GRPOConfig.__post_init__`` check;
- a rollout server (``trl vllm-serve``): ``TrlParser((vllm_serve.ScriptArguments,))`` on its argv.

What a CPU-only machine cannot have is simulated, and the result says so:
- ``world_size``: accelerate's process count is patched onto ``GRPOConfig.world_size`` so the generation
  batch rules see the real number of processes;
- ``--use_cpu true`` is added when the launch does not set ``use_cpu`` (TrainingArguments refuses bf16
  without a GPU: "Your setup doesn't support bf16/gpu").
"""
import json
import os
import sys
import time
import traceback

from grpo_recipes.frontends.swift.worker import RESULT_MARK, _where, jsonable

REPORT_FIELDS = ['per_device_train_batch_size', 'gradient_accumulation_steps', 'num_generations',
                 'generation_batch_size', 'steps_per_generation', 'max_completion_length', 'use_vllm', 'vllm_mode',
                 'vllm_gpu_memory_utilization', 'vllm_tensor_parallel_size', 'vllm_max_model_length',
                 'vllm_enable_sleep_mode', 'gradient_checkpointing', 'beta', 'loss_type', 'bf16',
                 'ds3_gather_for_generation']
MODEL_FIELDS = ['model_name_or_path', 'dtype', 'use_peft', 'lora_r', 'lora_target_modules', 'load_in_4bit']


def _has(argv: list[str], name: str) -> bool:
    return any(a == f'--{name}' or a.startswith(f'--{name}=') or a == f'--{name.replace("_", "-")}' for a in argv)


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
        parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))
    saved = dict(os.environ)
    t1 = time.time()
    try:
        if request.get('own_classes'):
            # the script parses with its own dataclasses, which may define what TRL's lack (frontends/trl/config_keys.py):
            # TRL's classes parse, and what they leave is reported as left to the script's
            *parsed, left = parser.parse_args_and_config(argv, return_remaining_strings=True)
            if left:
                result['left_to_script'] = [a for a in left if a.startswith('--')]
                simulated.append('the script\'s own dataclasses (not run here) are left: '
                                 + ' '.join(result['left_to_script']))
        else:
            parsed = parser.parse_args_and_config(argv)
    except BaseException as e:  # argparse raises SystemExit on bad types or choices
        result.update(error_type=type(e).__name__, message=str(e), where=_where(e))
        return result
    finally:
        result['parse_s'] = round(time.time() - t1, 3)
        os.environ.clear()
        os.environ.update(saved)  # a --config file's `env:` block must not leak into the next parse
    result['ok'] = True
    if request.get('what') == 'rollout':
        result['resolved'] = {k: jsonable(v) for k, v in vars(parsed[0]).items()}
    else:
        _, grpo, model = parsed
        result['resolved'] = {**{k: jsonable(getattr(grpo, k, None)) for k in REPORT_FIELDS},
                              **{k: jsonable(getattr(model, k, None)) for k in MODEL_FIELDS}}
    return result


def main() -> int:
    payload = json.loads(sys.stdin.read())
    requests = payload if isinstance(payload, list) else [payload]
    import trl
    for request in requests:
        try:
            result = run(request)
        except BaseException as e:  # an import failure, not a verdict on the launch
            result = {'ok': False, 'crashed': True, 'error_type': type(e).__name__, 'message': str(e),
                      'traceback': traceback.format_exc()[-4000:]}
        result['trl_version'] = trl.__version__
        print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
