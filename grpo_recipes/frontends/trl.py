"""TRL front end: ``accelerate launch [opts] SCRIPT [args]``, ``python SCRIPT [args]``, ``torchrun ...``,
``trl grpo [--config file.yaml] [args]``, and ``trl vllm-serve`` rollout servers.

Script arguments are read as TRL's own CLI reads them (``TrlParser`` over GRPOConfig, ModelConfig and
ScriptArguments), from a snapshot of the installed TRL's fields (``trl_args_snapshot.json``, written by
scripts/gen_trl_snapshot.py; a test fails when it drifts). accelerate's options and its config file
are read as ``accelerate launch`` applies them (accelerate/commands/launch.py: command-line options win
over the config file; ``--gpu_ids`` becomes the processes' CUDA_VISIBLE_DEVICES). Nothing is imported
from TRL, accelerate or torch here; nothing is run.
"""
from __future__ import annotations

import difflib
import json
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..config import GRPOConfig
from ..errors import GuardError
from ..launch import Launch, Rollout
from .accelerate_cmd import display_command, launcher_prefix, require_script, trl_cli_launch_args

# accelerate launch options that take a value (accelerate/commands/launch.py launch_command_parser);
# every other option of it is a flag.
ACCELERATE_VALUE_OPTIONS = {
    'config_file', 'num_processes', 'num_machines', 'machine_rank', 'main_process_ip', 'main_process_port',
    'gpu_ids', 'mixed_precision', 'dynamo_backend', 'dynamo_mode', 'num_cpu_threads_per_process', 'zero_stage',
    'offload_optimizer_device', 'offload_param_device', 'offload_optimizer_nvme_path', 'offload_param_nvme_path',
    'gradient_accumulation_steps', 'gradient_clipping', 'zero3_init_flag', 'zero3_save_16bit_model',
    'deepspeed_config_file', 'deepspeed_hostfile', 'deepspeed_exclusion_filter', 'deepspeed_inclusion_filter',
    'deepspeed_multinode_launcher', 'fsdp_version', 'fsdp_sharding_strategy', 'fsdp_reshard_after_forward',
    'fsdp_offload_params', 'fsdp_auto_wrap_policy', 'fsdp_transformer_layer_cls_to_wrap', 'fsdp_state_dict_type',
    'fsdp_activation_checkpointing', 'rdzv_backend', 'rdzv_conf', 'max_restarts', 'monitor_interval',
    'log_dir', 'role', 'tee', 'main_training_function', 'downcast_bf16', 'tpu_cluster', 'tpu_vm', 'env',
    'parallelism_config_dp_replicate_size', 'parallelism_config_dp_shard_size', 'parallelism_config_tp_size',
    'parallelism_config_cp_size', 'fsdp_min_num_params', 'fsdp_backward_prefetch', 'fsdp_forward_prefetch',
    'fsdp_use_orig_params', 'fsdp_cpu_ram_efficient_loading', 'fsdp_sync_module_states', 'mpirun_hostfile',
    'mpirun_ccl', 'same_network', 'dynamo_use_fullgraph', 'dynamo_use_dynamic', 'dynamo_use_regional_compilation',
}
TORCHRUN_VALUE_OPTIONS = {'nproc_per_node', 'nproc-per-node', 'nnodes', 'node_rank', 'node-rank', 'master_addr',
                          'master-addr', 'master_port', 'master-port', 'rdzv_backend', 'rdzv-backend', 'rdzv_endpoint',
                          'rdzv-endpoint', 'rdzv_id', 'rdzv-id', 'max_restarts', 'max-restarts', 'log_dir', 'log-dir'}

# Names older TRL releases had and the installed TRL does not: (the release that removed it, or None where
# that release is not pinned down here, and the current equivalent).
# vllm_device/vllm_dtype: TRL 0.14-0.15 started vLLM inside the trainer on one spare GPU; 0.16 replaced
# that with `trl vllm-serve` (huggingface/trl PR #3094), and 0.18 added --vllm_mode colocate.
STALE = {
    'vllm_device': ((0, 16), 'TRL 0.14-0.15 ran vLLM on one spare GPU of the trainer\'s (vllm_device); from 0.16 use '
                             '--vllm_mode server with `trl vllm-serve` on GPUs of its own, or (0.18+) --vllm_mode '
                             'colocate'),
    'vllm_dtype': ((0, 16), 'removed with vllm_device (TRL 0.16): the server\'s dtype is `trl vllm-serve --dtype`'),
    'vllm_max_model_len': (None, 'TRL\'s name is vllm_max_model_length (colocate); for a server, '
                                 '`trl vllm-serve --max_model_len`'),
    'max_prompt_length': (None, 'the installed TRL no longer truncates prompts (no max_prompt_length): filter the '
                                'data to the prompt length you plan for (grpo-data filter)'),
}

# Framework-neutral field (GRPOConfig of this package, ms-swift's names) -> TRL's flag, where they differ.
TRL_FLAGS = {
    'vllm_max_model_len': 'vllm_max_model_length', 'tuner_type': 'use_peft', 'lora_rank': 'lora_r',
    'model': 'model_name_or_path', 'sleep_level': 'vllm_enable_sleep_mode', 'target_modules': 'lora_target_modules',
    'torch_dtype': 'dtype',
}
# Launch settings that accelerate, not the script, holds.
ACCELERATE_FLAGS = {'NPROC_PER_NODE': 'num_processes', 'NNODES': 'num_machines', 'NODE_RANK': 'machine_rank',
                    'MASTER_ADDR': 'main_process_ip', 'MASTER_PORT': 'main_process_port'}
# ms-swift settings with no TRL equivalent: the fix search leaves them alone for a TRL launch.
SWIFT_ONLY = ('offload_model', 'offload_optimizer', 'move_model_batches', 'max_length', 'truncation_strategy')


@lru_cache(maxsize=1)
def snapshot() -> dict:
    return json.loads(resources.files('grpo_recipes').joinpath('trl_args_snapshot.json').read_text('utf-8'))


def _fields(*classes: str) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for cls in classes:
        for f in snapshot()[cls]:
            out.setdefault(f['name'], {**f, 'class': cls})
    return out


def _cast(value: str | None, spec: dict) -> Any:
    typ = spec['type']
    if value is None:
        return True if 'bool' in typ else None
    if 'bool' in typ and value.lower() in ('true', 'false', '1', '0', 'yes', 'no'):
        return value.lower() in ('true', '1', 'yes')
    for cast in ((int,) if 'int' in typ and 'float' not in typ else ()) + ((float,) if 'float' in typ else ()):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def parse_args(args: list[str], classes: tuple[str, ...]) -> tuple[dict[str, Any], list[str], list[str]]:
    """``--name value`` / ``--name=value`` / ``--flag`` (dashes or underscores, as HfArgumentParser accepts)
    -> (values, unknown flags, positional words)."""
    fields = _fields(*classes)
    values: dict[str, Any] = {}
    unknown: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith('--'):
            positional.append(tok)
            i += 1
            continue
        name, eq, val = tok[2:].partition('=')
        key = name.replace('-', '_')
        nxt = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith('--') else None
        spec = fields.get(key)
        if spec is None:
            unknown.append(f'--{name}')
            i += 1 if eq or nxt is None else 2
            if not eq and nxt is not None:
                values.setdefault('_unknown_values', {})[key] = nxt
            continue
        if eq:
            values[key] = _cast(val, spec)
            i += 1
        elif 'list' in spec['type']:
            j = i + 1
            items = []
            while j < len(args) and not args[j].startswith('--'):
                items.append(args[j])
                j += 1
            values[key] = items
            i = j
        elif 'bool' in spec['type'] and (nxt is None or nxt.lower() not in ('true', 'false', '1', '0', 'yes', 'no')):
            values[key] = True
            i += 1
        else:
            values[key] = _cast(nxt, spec)
            i += 2
    return values, unknown, positional


def describe_unknown(flag: str, classes: tuple[str, ...], trl_version: str | None = None) -> tuple[str, bool]:
    """(message, fatal) for an argument the snapshot's TRL does not define. A name an older TRL had is fatal
    for the TRL in question when that TRL is at or past the release that removed it (TrlParser rejects it);
    anything else may be the script's own argument. ``trl_version``: the TRL the launch runs (default: the
    snapshot's, which is the installed one)."""
    key = flag.lstrip('-').replace('-', '_')
    snap = snapshot()['trl_version']
    version = trl_version or snap
    vt, st = _vt(version), _vt(snap)
    if key in STALE:
        removed, equivalent = STALE[key]
        if vt is not None and ((removed is not None and vt < removed) or (removed is None and st and vt < st)):
            return '', False  # that TRL still had it (or this package cannot tell): not a finding
        return f'{flag}: not an argument of TRL {version}; {equivalent}', True
    close = difflib.get_close_matches(key, list(_fields(*classes)), n=1, cutoff=0.75)
    hint = f'; did you mean --{close[0]}?' if close else ''
    older = (f' (fields read from TRL {snap}; TRL {version} may differ)' if vt and st and vt != st else '')
    return (f'{flag}: not an argument of TRL {version}\'s GRPOConfig, ModelConfig or ScriptArguments (your script '
            f'may define it){hint}{older}'), False


def in_trl_terms(finding):
    """A finding of a TRL launch with TRL's and accelerate's names in its arguments, message and fix."""
    from dataclasses import replace
    args = [TRL_FLAGS.get(a, ACCELERATE_FLAGS.get(a, a)) for a in finding.arguments]
    return replace(finding, arguments=args, message=trl_terms(finding.message), fix=trl_terms(finding.fix))


def _vt(v) -> tuple[int, ...] | None:
    from ..rules import version_tuple
    return version_tuple(v)


def trl_terms(text: str | None) -> str | None:
    """A message or fix written in the neutral (ms-swift) names, in TRL's and accelerate's terms: ``key: value``
    becomes ``--trl_flag value``, ``ENV: {NPROC_PER_NODE: 4}`` becomes ``accelerate launch --num_processes 4``,
    a ZeRO stage becomes accelerate's DeepSpeed options. The one place where a TRL launch's wording is made."""
    if not text:
        return text

    def env_block(m: re.Match) -> str:
        parts = []
        prefix = []
        for key, val in re.findall(r'(\w+):\s*("[^"]*"|[^,}]+)', m.group(1)):
            val = val.strip().strip('"')
            if key == 'CUDA_VISIBLE_DEVICES':
                prefix.append(f'CUDA_VISIBLE_DEVICES={val}')
            elif key in ACCELERATE_FLAGS:
                parts.append(f'--{ACCELERATE_FLAGS[key]} {val}')
        return ' '.join(prefix + ['accelerate launch'] + parts) if parts else ' '.join(prefix)

    text = re.sub(r'ENV:\s*\{([^}]*)\}', env_block, text)
    text = re.sub(r'\bCUDA_VISIBLE_DEVICES: "([^"]*)"', r'CUDA_VISIBLE_DEVICES=\1', text)
    text = re.sub(r'\bsleep_level: [1-9]', '--vllm_enable_sleep_mode true', text)
    text = re.sub(r'\bsleep_level: 0', '--vllm_enable_sleep_mode false', text)

    def zero(m: re.Match) -> str:
        stage, offload = m.group(1), m.group(2)
        out = f'accelerate launch --use_deepspeed --zero_stage {stage}'
        if offload:
            out += ' --offload_optimizer_device cpu' + (' --offload_param_device cpu' if stage == '3' else '')
        return out

    text = re.sub(r'\bdeepspeed: zero(\d)(_offload)?', zero, text)
    for key, flag in ACCELERATE_FLAGS.items():
        text = re.sub(rf'\b{key}\b', f'accelerate\'s --{flag}', text)
    flags = {f['name'] for cls in CLASSES for f in snapshot()[cls]} | set(TRL_FLAGS)
    text = re.sub(r'(?<![\w-])(\w+): (?=\S)',
                  lambda m: f'--{TRL_FLAGS.get(m.group(1), m.group(1))} ' if m.group(1) in flags else m.group(0), text)
    for key, flag in TRL_FLAGS.items():
        if '_' in key:  # a bare word like "model" is prose, not a flag
            text = re.sub(rf'(?<![\w-]){key}\b', flag, text)
    return text


def _accelerate_options(args: list[str]) -> tuple[dict[str, Any], list[str]]:
    """accelerate launch's own options -> (options, the script and its args)."""
    opts: dict[str, Any] = {}
    i = 0
    while i < len(args):
        tok = args[i]
        if not tok.startswith('-'):
            return opts, args[i:]
        if tok in ('-m', '--module'):
            opts['module'] = True
            i += 1
            continue
        name, eq, val = tok.lstrip('-').partition('=')
        key = name.replace('-', '_')
        if key in ACCELERATE_VALUE_OPTIONS:
            if eq:
                opts[key] = val
                i += 1
            else:
                opts[key] = args[i + 1] if i + 1 < len(args) else None
                i += 2
        else:
            opts[key] = True
            i += 1
    return opts, []


def _read_yaml(path: Path, what: str) -> dict:
    import yaml
    try:
        data = yaml.safe_load(path.read_text(encoding='utf-8')) or {}
    except FileNotFoundError:
        raise GuardError(f'{what} {path}: no such file') from None
    except (OSError, yaml.YAMLError) as e:
        raise GuardError(f'{what} {path}: cannot read it as YAML ({str(e).splitlines()[0]})') from None
    if not isinstance(data, dict):
        raise GuardError(f'{what} {path}: the top level must be a mapping')
    return data


def default_accelerate_config(environ: Mapping[str, str]) -> Path:
    """accelerate's default config file (accelerate/commands/config/config_args.py: HF_HOME or
    ~/.cache/huggingface, then accelerate/default_config.yaml)."""
    home = environ.get('HF_HOME') or os.path.join(os.path.expanduser('~'), '.cache', 'huggingface')
    return Path(home) / 'accelerate' / 'default_config.yaml'


def packaged_accelerate_config(name: str) -> Path | None:
    """One of the accelerate configs the installed TRL ships (``trl/accelerate_configs/NAME.yaml``: zero1-3,
    fsdp1-2, multi_gpu, single_gpu), found without importing TRL; None if TRL or the config is missing."""
    import importlib.util
    try:
        spec = importlib.util.find_spec('trl')
    except (ImportError, ValueError):
        return None
    for base in (spec.submodule_search_locations or []) if spec else []:
        p = Path(base) / 'accelerate_configs' / f'{name}.yaml'
        if p.is_file():
            return p
    return None


def _config_file(cfg_path: str) -> tuple[Path, str]:
    """accelerate's --config_file as a path to read, and how it was found. TRL's documented commands pass
    ``examples/accelerate_configs/deepspeed_zero3.yaml`` (a file of TRL's repository, relative to its checkout);
    outside a checkout that path is read as the copy TRL ships in its package (trl/accelerate_configs/zero3.yaml,
    which the ``trl`` CLI's --accelerate_config zero3 uses), and the verdict says so."""
    path = Path(cfg_path)
    if path.is_file() or path.parent.name != 'accelerate_configs':
        return path, str(cfg_path)
    name = path.stem[len('deepspeed_'):] if path.stem.startswith('deepspeed_') else path.stem
    packaged = packaged_accelerate_config(name)
    if packaged is None:
        return path, str(cfg_path)
    return packaged, f'{cfg_path} (not found here; read as the installed TRL\'s trl/accelerate_configs/{name}.yaml)'


def accelerate_settings(opts: dict[str, Any], environ: Mapping[str, str]) -> dict[str, Any]:
    """The launch settings accelerate applies: its config file (given or default), then command-line options."""
    cfg_path = opts.get('config_file')
    source = None
    conf: dict = {}
    if cfg_path:
        path, source = _config_file(str(cfg_path))
        conf = _read_yaml(path, '--config_file')
    else:
        default = default_accelerate_config(environ)
        if default.is_file():
            conf, source = _read_yaml(default, 'accelerate default config'), str(default)
    ds = conf.get('deepspeed_config') or {}
    out: dict[str, Any] = {
        'config_source': source,
        'distributed_type': conf.get('distributed_type'),
        'num_processes': conf.get('num_processes'),
        'num_machines': conf.get('num_machines', 1),
        'machine_rank': conf.get('machine_rank', 0),
        'main_process_ip': conf.get('main_process_ip'),
        'gpu_ids': conf.get('gpu_ids'),
        'mixed_precision': conf.get('mixed_precision'),
        'zero_stage': ds.get('zero_stage') if conf.get('distributed_type') == 'DEEPSPEED' else None,
        'offload_optimizer_device': ds.get('offload_optimizer_device'),
        'offload_param_device': ds.get('offload_param_device'),
        'fsdp': conf.get('distributed_type') == 'FSDP',
    }
    for key in ('num_processes', 'num_machines', 'machine_rank', 'main_process_ip', 'gpu_ids', 'mixed_precision',
                'zero_stage', 'offload_optimizer_device', 'offload_param_device'):
        if opts.get(key) is not None:
            out[key] = opts[key]
    if opts.get('use_deepspeed') and out['zero_stage'] is None:
        out['zero_stage'] = 2  # accelerate's --zero_stage default
    if opts.get('use_fsdp'):
        out['fsdp'] = True
    if opts.get('multi_gpu') and out['num_processes'] is None:
        out['num_processes_missing'] = True
    for key in ('num_processes', 'num_machines', 'machine_rank', 'zero_stage'):
        v = out.get(key)
        if v is not None:
            try:
                out[key] = int(v)
            except (TypeError, ValueError):
                raise GuardError(f'accelerate launch --{key} {v!r}: must be an integer') from None
    return out


def load_trl(argv: list[str], env: Mapping[str, str], source: str) -> Launch:
    """A TRL training launch -> Launch (framework 'trl'); the GRPO settings are read by :func:`to_config`."""
    head = os.path.basename(argv[0])
    env = dict(env)
    info: dict[str, Any] = {'launcher': head}
    launch_env: dict[str, str] = {k: env[k] for k in ('CUDA_VISIBLE_DEVICES', 'NNODES', 'NODE_RANK', 'MASTER_ADDR')
                                  if k in env}
    script_args: list[str]
    if head == 'accelerate' or (head == 'trl' and argv[1:2] == ['grpo']):
        if head == 'accelerate':
            opts, rest = _accelerate_options(argv[2:])
            script = rest[0] if rest else None
            script_args = rest[1:]
            require_script(script, source)  # accelerate's usage error: no training script
        else:
            acc_words, script_args = trl_cli_launch_args(argv[2:], ACCELERATE_VALUE_OPTIONS, set(_fields(*CLASSES)))
            opts, script = _accelerate_options(acc_words)[0], 'trl grpo'
            if '--accelerate_config' in script_args:  # trl/cli/accelerate_config.py: a file, or a packaged name
                i = script_args.index('--accelerate_config')
                if i + 1 >= len(script_args):
                    raise GuardError(f'{source}: --accelerate_config needs a config name (zero3, ...) or a file')
                name = script_args[i + 1]
                found = name if Path(name).is_file() else packaged_accelerate_config(name)
                if found is None:
                    raise GuardError(f'{source}: --accelerate_config {name}: neither a file nor a config the '
                                     f'installed TRL ships (trl/accelerate_configs: zero1, zero2, zero3, fsdp1, '
                                     f'fsdp2, multi_gpu, single_gpu)')
                opts['config_file'] = str(found)
                script_args = script_args[:i] + script_args[i + 2:]
        acc = accelerate_settings(opts, env)
        info.update(accelerate=acc, script=script)
        if acc.get('num_processes') is None and acc.get('config_source') is None:  # accelerate_cmd.py
            info.update(nproc_from_devices=True, launcher_cvd=env.get('CUDA_VISIBLE_DEVICES'))
        n = acc.get('num_processes') or 1
        machines = max(1, acc.get('num_machines') or 1)
        launch_env['NPROC_PER_NODE'] = str(max(1, n // machines))
        if machines > 1:
            launch_env.update(NNODES=str(machines), NODE_RANK=str(acc.get('machine_rank') or 0))
            if acc.get('main_process_ip'):
                launch_env['MASTER_ADDR'] = str(acc['main_process_ip'])
        gpu_ids = acc.get('gpu_ids')
        if gpu_ids not in (None, 'all', ''):
            launch_env['CUDA_VISIBLE_DEVICES'] = str(gpu_ids)  # accelerate: prepare_multi_gpu_env
            info['gpu_ids'] = str(gpu_ids)
    elif head in ('torchrun', 'deepspeed'):
        i, opts = 1, {}
        while i < len(argv) and argv[i].startswith('-'):
            name, eq, val = argv[i].lstrip('-').partition('=')
            if name in TORCHRUN_VALUE_OPTIONS or name in ('num_gpus', 'num_nodes', 'include'):
                opts[name.replace('-', '_')] = val if eq else (argv[i + 1] if i + 1 < len(argv) else None)
                i += 1 if eq else 2
            else:
                i += 1
        script, script_args = (argv[i] if i < len(argv) else None), argv[i + 1:]
        info.update(script=script, torchrun=opts)
        per_node = opts.get('nproc_per_node') or opts.get('num_gpus') or '1'
        launch_env['NPROC_PER_NODE'] = str(per_node)
        if opts.get('nnodes') or opts.get('num_nodes'):
            launch_env['NNODES'] = str(opts.get('nnodes') or opts.get('num_nodes'))
    else:  # python SCRIPT / python -m module
        rest = argv[1:]
        while rest and rest[0].startswith('-') and rest[0] != '-m':
            rest = rest[1:]
        if rest[:1] == ['-m']:
            script, script_args = ' '.join(rest[:2]), rest[2:]
        else:
            script, script_args = (rest[0] if rest else None), rest[1:]
        info.update(script=script)
    info.update(display=display_command(argv, script), prefix=launcher_prefix(argv))
    info['script_args'] = list(script_args)  # as typed (TRL's own parser reads --config itself)
    if script and script.endswith('.py') and os.path.isfile(script):
        # a script that writes GRPOConfig(...) in code: its literal keywords, then the command line's flags
        from .trl_script import read_script_settings
        try:
            settings = read_script_settings(Path(script).read_text(encoding='utf-8'))
        except (OSError, UnicodeDecodeError) as e:
            raise GuardError(f'{script}: cannot read ({e})') from None
        if settings.flags or settings.unread:
            script_args = settings.flags + list(script_args)
            info['script_settings'] = settings.note(script)
            info['script_flags'] = settings.flags
    config_file = None
    if '--config' in script_args:  # TrlParser: a YAML whose keys are defaults, command line wins
        i = script_args.index('--config')
        if i + 1 >= len(script_args):
            raise GuardError(f'{source}: --config needs a YAML file')
        config_file = script_args[i + 1]
        data = _read_yaml(Path(config_file), '--config')
        file_args: list[str] = []
        for k, v in data.items():
            if k == 'env' and isinstance(v, dict):
                continue
            file_args += [f'--{k}'] + ([str(x) for x in v] if isinstance(v, list) else [json.dumps(v) if isinstance(
                v, dict) else str(v)])
        script_args = file_args + script_args[:i] + script_args[i + 2:]
        info['trl_config'] = config_file
    names = {'max_length': 'max_prompt_length', 'vllm_max_model_len': 'vllm_max_model_length',
             'tuner_type': 'use_peft', 'lora_rank': 'lora_r', 'model': 'model_name_or_path',
             'sleep_level': 'vllm_enable_sleep_mode', 'NPROC_PER_NODE': 'accelerate launch --num_processes',
             'deepspeed': 'accelerate --config_file (deepspeed_config.zero_stage)'}
    return Launch(argv=script_args, env=launch_env, config_file=config_file or source, framework='trl', names=names,
                  trl=info, command=list(argv))


CLASSES = ('GRPOConfig', 'ModelConfig', 'ScriptArguments')


# TRL 0.14-0.15 (vLLM inside the trainer): the defaults that differ from the snapshot's TRL, from
# trl v0.15.2 trl/trainer/grpo_config.py (vllm_device "auto", vllm_gpu_memory_utilization 0.9,
# max_prompt_length 512, vllm_max_model_len None: the model's context).
OLD_VLLM_DEFAULTS = {'vllm_device': 'auto', 'vllm_gpu_memory_utilization': 0.9, 'max_prompt_length': 512}


def is_in_trainer_vllm(trl_version: str | None) -> bool:
    """True for the TRL releases that started vLLM inside the trainer on ``vllm_device`` (0.14-0.15)."""
    v = _vt(trl_version)
    return v is not None and v < (0, 16)


def to_config(launch: Launch, trl_version: str | None = None) -> tuple[GRPOConfig, list[str]]:
    """TRL's settings in the framework-neutral GRPOConfig (TRL's defaults where the user set nothing).
    ``trl_version``: the TRL the launch runs, when older than the snapshot's (names it still had are read)."""
    values, unknown, _ = parse_args(launch.argv, CLASSES)
    d = {f['name']: f['default'] for f in snapshot()['GRPOConfig']}
    m = {f['name']: f['default'] for f in snapshot()['ModelConfig']}
    d.update({k: v for k, v in values.items() if k in d})
    m.update({k: v for k, v in values.items() if k in m})
    old = values.get('_unknown_values', {})
    if is_in_trainer_vllm(trl_version):
        for k, default in OLD_VLLM_DEFAULTS.items():
            d[k] = values[k] if k in values else old.get(k, default)
        if str(old.get('vllm_max_model_len', '')).isdigit():
            d['vllm_max_model_length'] = int(old['vllm_max_model_len'])
        d['vllm_mode'] = 'colocate'  # replaced by old_vllm_device once the device is known
        launch.trl['vllm_device'] = str(d['vllm_device']) if d.get('use_vllm') else None
    acc = launch.trl.get('accelerate') or {}
    stage = acc.get('zero_stage')
    deepspeed = None
    if stage is not None:
        deepspeed = f'zero{stage}'
        if stage == 3 and acc.get('offload_param_device') in ('cpu', 'nvme'):
            deepspeed = 'zero3_offload'
        elif acc.get('offload_optimizer_device') in ('cpu', 'nvme'):
            deepspeed = f'zero{stage}_offload'
    peft = bool(m.get('use_peft'))
    targets = m.get('lora_target_modules') or ['q_proj', 'v_proj']  # PEFT's default for Qwen2/Llama
    if isinstance(targets, str):
        targets = [targets]
    host = d.get('vllm_server_host')
    cfg = GRPOConfig(
        model=m.get('model_name_or_path'), rlhf_type='grpo', tuner_type='lora' if peft else 'full',
        torch_dtype={'bfloat16': 'bfloat16', 'float16': 'float16', 'float32': 'float32'}.get(str(m.get('dtype')),
                                                                                               None),
        quant_method='bnb' if (m.get('load_in_4bit') or m.get('load_in_8bit')) else None,
        quant_bits=4 if m.get('load_in_4bit') else (8 if m.get('load_in_8bit') else None),
        lora_rank=int(m.get('lora_r') or 16), lora_alpha=float(m.get('lora_alpha') or 32), target_modules=targets,
        beta=float(d.get('beta') or 0.0),
        per_device_train_batch_size=int(d['per_device_train_batch_size']),
        gradient_accumulation_steps=int(d.get('gradient_accumulation_steps') or 1),
        steps_per_generation=d.get('steps_per_generation'), generation_batch_size=d.get('generation_batch_size'),
        num_generations=int(d['num_generations']), num_iterations=int(d.get('num_iterations') or 1),
        max_length=int(d['max_prompt_length']) if d.get('max_prompt_length') is not None else None,
        max_completion_length=int(d['max_completion_length']),
        use_vllm=bool(d.get('use_vllm')), vllm_mode=d.get('vllm_mode') if d.get('use_vllm') else None,
        vllm_gpu_memory_utilization=float(d.get('vllm_gpu_memory_utilization') or 0.3),
        vllm_tensor_parallel_size=int(d.get('vllm_tensor_parallel_size') or 1),
        vllm_max_model_len=d.get('vllm_max_model_length'),
        # TRL puts vLLM to sleep at level 2 (weights and KV cache freed): trl/generation/vllm_generation.py
        sleep_level=2 if d.get('vllm_enable_sleep_mode') else 0,
        vllm_server_host=[host] if isinstance(host, str) else host,
        vllm_server_port=[int(d.get('vllm_server_port') or 8000)],
        vllm_server_base_url=[d['vllm_server_base_url']] if d.get('vllm_server_base_url') else None,
        deepspeed=deepspeed, fsdp='full_shard' if acc.get('fsdp') else None,
        gradient_checkpointing=bool(d.get('gradient_checkpointing')),
        use_liger_kernel=bool(d.get('use_liger_loss') or d.get('use_liger_kernel')),
        optim=str(values['optim']) if 'optim' in values else None,
        ds3_gather_for_generation=bool(d.get('ds3_gather_for_generation', True)),
        reward_funcs=['(script)'],
        explicit=frozenset(values),
    )
    if cfg.vllm_server_host == ['0.0.0.0']:
        cfg.vllm_server_host = ['127.0.0.1']  # TRL's client default host is where the server listens
    return cfg, unknown


def old_vllm_device(cfg: GRPOConfig, launch: Launch, trl_version: str | None) -> list[str]:
    """TRL 0.14-0.15: where ``vllm_device`` puts vLLM, as GRPOTrainer resolves it ("auto": cuda:0 when one GPU
    is visible, else cuda:<num_processes>, the GPU after the training ones). A dedicated device is planned like a
    rollout server on that GPU; one shared with training like colocate. Returns the assumptions made."""
    dev = launch.trl.get('vllm_device')
    if not (cfg.use_vllm and dev and is_in_trainer_vllm(trl_version)):
        return []
    from ..plan import world_size
    env = launch.env
    vis = [int(x) for x in env['CUDA_VISIBLE_DEVICES'].split(',')] if env.get('CUDA_VISIBLE_DEVICES', '').strip(
        ).replace(',', '').isdigit() else None
    count = len(vis) if vis is not None else None
    nproc = world_size(env)  # accelerator.num_processes
    if dev == 'auto':
        idx = 0 if count == 1 else nproc
    elif dev.startswith('cuda:') and dev[5:].isdigit():
        idx = int(dev[5:])
    else:
        return [f'vllm_device {dev!r}: not a cuda:N device; vLLM planned beside rank 0']
    launch.trl['vllm_device_index'] = idx
    cfg.vllm_tensor_parallel_size = 1
    if idx < nproc:
        cfg.vllm_mode = 'colocate'
        return [f'TRL {trl_version}: vLLM runs in the training process on cuda:{idx} (vllm_device {dev}), beside '
                f'the trainer on that GPU; planned as colocate']
    cfg.vllm_mode = 'server'
    cfg.vllm_server_host = ['(in-trainer)']
    physical = vis[idx] if vis is not None and idx < len(vis) else idx
    launch.trl['vllm_device_gpu'] = physical
    return [f'TRL {trl_version}: vLLM runs in the training process of rank 0 on its own GPU (vllm_device {dev} = '
            f'cuda:{idx}, physical GPU {physical}) at vllm_gpu_memory_utilization '
            f'{cfg.vllm_gpu_memory_utilization}; that GPU is planned like a rollout server\'s']


def read_vllm_serve(argv: list[str], env: Mapping[str, str], source: str) -> Rollout:
    """``trl vllm-serve ARGS`` -> Rollout (trl/scripts/vllm_serve.py ScriptArguments)."""
    args = list(argv)
    if os.path.basename(args[0]) == 'trl' and args[1:2] == ['vllm-serve']:
        args = args[2:]
    elif args[1:3] == ['-m', 'trl.scripts.vllm_serve']:
        args = args[3:]
    values, unknown, _ = parse_args(args, ('VllmServeArguments',))
    d = {f['name']: f['default'] for f in snapshot()['VllmServeArguments']}
    d.update(values)
    descr = []
    for u in unknown:
        close = difflib.get_close_matches(u.lstrip('-').replace('-', '_'), list(d), n=1, cutoff=0.75)
        descr.append(f'{u}: not an argument of trl vllm-serve {snapshot()["trl_version"]}'
                     + (f'; did you mean --{close[0]}?' if close else ''))
    return Rollout(framework='trl', argv=args, env=dict(env), source=source, model=d.get('model'),
                   tensor_parallel_size=int(d.get('tensor_parallel_size') or 1),
                   data_parallel_size=int(d.get('data_parallel_size') or 1),
                   max_model_len=d.get('max_model_len'),
                   gpu_memory_utilization=float(d.get('gpu_memory_utilization') or 0.9),
                   enforce_eager=bool(d.get('enforce_eager')), unknown=descr,
                   engine_kwargs=json.dumps({'kv_cache_dtype': d['kv_cache_dtype']}) if d.get('kv_cache_dtype')
                   else None)
