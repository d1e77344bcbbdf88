"""Run ms-swift 4.6's own argument parser on one argv, in its own process.

Invoked by :mod:`grpo_recipes.realparse` as ``python -m grpo_recipes.frontends.swift.worker`` with a JSON
request on stdin; prints one JSON result line prefixed with ``RESULT_MARK`` on stdout. It calls
``swift.utils.parse_args(swift.arguments.RLHFArguments, argv)``, which runs every
``__post_init__`` check ``swift rlhf`` runs before loading a model, then applies the pipeline's
``remaining_argv`` rule (``swift/pipelines/base.py``).

Two things that cannot happen on a CPU-only machine are simulated, and the result says so:
- ``world_size``: the trainer's world size (NNODES × NPROC_PER_NODE) is patched onto swift's
  ``GRPOConfig`` so the generation-batch rules see the real number of processes.
- server mode: ``RLHFArguments._init_external_vllm`` would connect to the rollout server during
  parsing (and wait ``vllm_server_timeout`` seconds); it is replaced by a no-op, and the server
  arguments are checked by the guard's own rules instead.
"""

import enum
import json
import os
import sys
import time
import traceback

RESULT_MARK = '@@GRPO_RECIPES_RESULT@@ '

# Resolved values reported back (those a GRPO launch depends on).
REPORT_FIELDS = [
    'rlhf_type',
    'model_type',
    'template',
    'tuner_type',
    'torch_dtype',
    'use_vllm',
    'vllm_mode',
    'vllm_gpu_memory_utilization',
    'vllm_max_model_len',
    'vllm_tensor_parallel_size',
    'num_generations',
    'per_device_train_batch_size',
    'gradient_accumulation_steps',
    'max_completion_length',
    'max_length',
    'truncation_strategy',
    'beta',
    'loss_type',
    'reward_funcs',
    'sleep_level',
    'quant_method',
    'quant_bits',
]


def jsonable(v):
    """A JSON-safe copy of an argument value: Enum members become their value, other objects ``str()``.
    Shared with scripts/gen_swift_snapshot.py."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, enum.Enum) and isinstance(v.value, (str, int, float)):
        return v.value
    return str(v)


def _where(exc: BaseException) -> str:
    """file:line of the innermost ms-swift/trl/transformers frame that raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    for fr in reversed(frames):
        for pkg in ('/swift/', '/trl/', '/transformers/', '/peft/'):
            if pkg in fr.filename:
                return f'{pkg.strip("/")}/{fr.filename.split(pkg, 1)[1]}:{fr.lineno}'
    return f'{frames[-1].filename}:{frames[-1].lineno}' if frames else ''


def run(request: dict) -> dict:
    saved_env = dict(os.environ)
    os.environ.update(request.get('env', {}))
    t0 = time.time()
    from swift.arguments import RLHFArguments
    from swift.rlhf_trainers import arguments as swift_rlhf_arguments
    from swift.utils import parse_args

    import_s = time.time() - t0

    simulated = []
    world = int(request.get('world_size') or 1)
    swift_rlhf_arguments.GRPOConfig.world_size = property(lambda self: world)
    if world > 1:
        simulated.append(f'world_size={world}')
    if request.get('skip_server_connect'):
        RLHFArguments._init_external_vllm = lambda self: None
        simulated.append('server connection skipped')
    else:
        RLHFArguments._init_external_vllm = _ORIGINAL_INIT_EXTERNAL.get('fn', RLHFArguments._init_external_vllm)
    try:
        return _parse(request, parse_args, RLHFArguments, simulated, import_s)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)


_ORIGINAL_INIT_EXTERNAL: dict = {}


def _parse(request, parse_args, RLHFArguments, simulated, import_s) -> dict:

    result = {'ok': False, 'simulated': simulated, 'import_s': round(import_s, 3)}
    t1 = time.time()
    try:
        args, remaining = parse_args(RLHFArguments, request['argv'])
    except BaseException as e:  # argparse raises SystemExit on bad types or choices
        result.update(error_type=type(e).__name__, message=str(e), where=_where(e))
        result['parse_s'] = round(time.time() - t1, 3)
        return result
    result['parse_s'] = round(time.time() - t1, 3)
    result['remaining'] = remaining
    if remaining and not getattr(args, 'ignore_args_error', False):
        result.update(error_type='ValueError', message=f'remaining_argv: {remaining}', where='swift/pipelines/base.py')
        return result
    result['ok'] = True
    result['resolved'] = {k: jsonable(getattr(args, k, None)) for k in REPORT_FIELDS}
    return result


def main() -> int:
    payload = json.loads(sys.stdin.read())
    requests = payload if isinstance(payload, list) else [payload]
    try:
        from swift.arguments import RLHFArguments

        _ORIGINAL_INIT_EXTERNAL['fn'] = RLHFArguments._init_external_vllm
    except BaseException:
        pass
    for request in requests:  # one ms-swift import serves many parses
        try:
            result = run(request)
        except BaseException as e:  # an import failure, not a verdict on the config
            result = {
                'ok': False,
                'crashed': True,
                'error_type': type(e).__name__,
                'message': str(e),
                'traceback': traceback.format_exc()[-4000:],
            }
        sys.stdout.flush()
        print(RESULT_MARK + json.dumps(result), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
