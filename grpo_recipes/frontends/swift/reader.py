"""ms-swift front end: ``swift rlhf`` launches (a YAML/JSON config, flags, or both) and ``swift rollout``
servers, read exactly as ``swift/cli/main.py`` 4.6 reads them (``parse_yaml_args``: each top-level key
becomes ``--key value``; lists become several values, dicts JSON; the file's ``ENV:`` block sets
variables the environment does not already set)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from ... import swift_args
from ...bounded_load import loads_json, safe_load_yaml  # no billion laughs, no deep nesting
from ...errors import GuardError
from ...launch import CONFIG_SUFFIXES, LAUNCH_ENV_KEYS, Launch, Rollout


def _value_to_argv(value: Any) -> list[str]:
    if isinstance(value, list):
        return [str(v) for v in value]
    if isinstance(value, dict):
        return [json.dumps(value, ensure_ascii=False)]
    return [str(value)]


def launch_from_mapping(
    config: Mapping[str, Any], extra_argv: list[str], environ: Mapping[str, str], source: str = '<config>'
) -> Launch:
    """Pure core of ``parse_yaml_args``: config mapping + extra argv + process environment → Launch."""
    if not isinstance(config, Mapping):
        raise GuardError(
            f'{source}: the top level must be a mapping of argument: value '
            f'(got {type(config).__name__}); write e.g. `rlhf_type: grpo`'
        )
    config = dict(config)
    env_block = config.pop('ENV', None)
    file_env: dict[str, str] = {}
    notes: list[str] = []
    merged = dict(environ)
    if env_block:
        if not isinstance(env_block, Mapping):
            raise GuardError(
                f'{source}: `ENV:` must be a mapping of VARIABLE: value '
                f'(got {type(env_block).__name__}); write e.g. `ENV: {{NPROC_PER_NODE: 2}}`'
            )
        for k, v in env_block.items():
            file_env[str(k)] = str(v)
            if k not in environ:
                merged[str(k)] = str(v)
            elif str(v) != environ[k]:
                notes.append(
                    f'{k} is already set in environment, using `{environ[k]}` instead of `{v}` (from {source} ENV)'
                )
    argv: list[str] = []
    for k, v in config.items():
        argv.append(f'--{k}')
        argv += _value_to_argv(v)
    argv += list(extra_argv)
    env = {k: merged[k] for k in LAUNCH_ENV_KEYS if k in merged}
    return Launch(argv=argv, env=env, file_env=file_env, config_file=source, notes=notes)


def read_config_file(path: str | os.PathLike) -> Any:
    """Load a YAML or JSON config the way ms-swift does, with one-line errors."""
    from ..written import text_of

    p = Path(path)
    text = text_of(p)  # a config the launch script writes itself before its launch (`cat > cfg.yaml <<EOF`)
    if text is None and not p.exists():
        raise GuardError(f'{p}: no such file; pass the path of a swift rlhf YAML/JSON config')
    if text is None and p.is_dir():
        raise GuardError(f'{p}: is a directory; pass the path of a swift rlhf YAML/JSON config')
    try:
        text = p.read_text(encoding='utf-8') if text is None else text
    except UnicodeDecodeError as e:
        raise GuardError(f'{p}: not valid UTF-8 at byte {e.start}; save the file as UTF-8') from None
    except OSError as e:
        raise GuardError(f'{p}: cannot read ({e.strerror})') from None
    if p.suffix == '.json':
        try:
            return loads_json(text)
        except json.JSONDecodeError as e:
            raise GuardError(f'{p}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}') from None
    import yaml

    try:
        return safe_load_yaml(text)
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = f'{p}:{mark.line + 1}:{mark.column + 1}' if mark is not None else str(p)
        problem = getattr(e, 'problem', None) or str(e).splitlines()[0]
        raise GuardError(f'{where}: invalid YAML: {problem}') from None


def load_swift(args: list[str], environ: Mapping[str, str] | None = None) -> Launch:
    """``args`` is what follows ``swift rlhf``: a config file and extra flags, or flags only.

    A leading ``swift rlhf`` (or ``swift rlhf`` after ``--``) is accepted and dropped, so a user can
    paste their command line as is.
    """
    environ = dict(os.environ if environ is None else environ)
    args = list(args)
    if args[:1] == ['--']:
        args = args[1:]
    if args[:2] == ['swift', 'rlhf']:
        args = args[2:]
    if args and args[0].endswith(CONFIG_SUFFIXES):
        config = read_config_file(args[0])
        if config is None:  # ms-swift would pass the path on as an unknown argument
            raise GuardError(f'{args[0]}: the file is empty; put `rlhf_type: grpo` and the other arguments in it')
        return launch_from_mapping(config, args[1:], environ, source=args[0])
    if args and not args[0].startswith('-'):
        raise GuardError(f'{args[0]}: not a config file (expected .yaml, .yml or .json) nor a --flag')
    return launch_from_mapping({}, args, environ, source='<command line>')


# Arguments ``swift rollout`` defines beyond the VllmArguments it shares with ``swift rlhf``
# (swift/arguments/deploy_args.py: DeployArguments and RolloutArguments, ms-swift 4.6).
# tests/test_frontends.py checks this list against the installed RolloutArguments.
ROLLOUT_ONLY = (
    'host',
    'port',
    'api_key',
    'ssl_keyfile',
    'ssl_certfile',
    'owned_by',
    'served_model_name',
    'verbose',
    'log_interval',
    'log_level',
    'max_logprobs',
    'vllm_use_async_engine',
    'use_gym_env',
    'multi_turn_scheduler',
    'max_turns',
    'vllm_enable_lora',
    'vllm_max_lora_rank',
    'gym_env',
    'context_manager',
    'infer_backend',
    'result_path',
    'write_batch_size',
    'metric',
    'val_dataset_sample',
    'reward_model_plugin',
    'stream',
    'vllm_server_pass_dataset',
)


def read_rollout(argv: list[str], env: Mapping[str, str], source: str) -> Rollout:
    """``swift rollout ARGS`` -> Rollout. Its vLLM arguments are VllmArguments (shared with swift rlhf), so
    the same snapshot parser reads them; ``vllm_max_num_seqs`` defaults to 256 there (deploy_args.py)."""
    args = list(argv)
    if args[:2] == ['swift', 'rollout']:
        args = args[2:]
    if args and args[0].endswith(CONFIG_SUFFIXES):
        cfg = read_config_file(args[0])
        if not isinstance(cfg, Mapping):
            raise GuardError(f'{args[0]}: the top level must be a mapping of argument: value')
        args = launch_from_mapping(cfg, args[1:], env, source=args[0]).argv
    values, remaining, explicit = swift_args.parse_explicit(args)
    unknown: list[str] = []
    intended: dict[str, Any] = {}
    i = 0
    known_rollout = {f'--{n}' for n in ROLLOUT_ONLY}
    while i < len(remaining):
        tok = remaining[i]
        flag = tok.split('=', 1)[0]
        value = (
            tok.split('=', 1)[1]
            if '=' in tok
            else (remaining[i + 1] if i + 1 < len(remaining) and not remaining[i + 1].startswith('--') else None)
        )
        step = 1 + (value is not None and '=' not in tok)
        if flag in known_rollout:
            i += step
            continue
        if flag.startswith('--'):
            u = swift_args.explain_remaining([flag])
            desc = u[0].describe() if u else f'unknown argument {flag}'
            unknown.append(desc)
            if u and u[0].suggestion and value is not None:
                intended[u[0].suggestion.lstrip('-')] = value
        i += step

    def pick(name: str, cast, default):
        v = intended.get(name, values.get(name))
        try:
            return cast(v) if v is not None else default
        except (TypeError, ValueError):
            return default

    util = values.get('vllm_gpu_memory_utilization') if 'vllm_gpu_memory_utilization' in explicit else None
    return Rollout(
        framework='swift',
        argv=args,
        env=dict(env),
        source=source,
        model=values.get('model'),
        tensor_parallel_size=pick('vllm_tensor_parallel_size', int, 1),
        data_parallel_size=pick('vllm_data_parallel_size', int, 1),
        max_model_len=pick('vllm_max_model_len', int, None),
        gpu_memory_utilization=pick('vllm_gpu_memory_utilization', float, 0.9) if util is None else float(util),
        max_num_seqs=pick('vllm_max_num_seqs', int, None) or 256,
        enforce_eager=bool(values.get('vllm_enforce_eager')),
        engine_kwargs=values.get('vllm_engine_kwargs'),
        quantization=values.get('vllm_quantization'),
        use_gym_env=bool(values.get('use_gym_env')),
        unknown=unknown,
        intended=intended,
    )
