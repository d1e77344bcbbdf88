"""TRL front end: ``accelerate launch [opts] SCRIPT [args]``, ``python SCRIPT [args]``, ``torchrun ...``,
``trl grpo [--config file.yaml] [args]``, and ``trl vllm-serve`` rollout servers.

Script arguments are read as TRL's own CLI reads them (``TrlParser`` over GRPOConfig, ModelConfig and
ScriptArguments), from a snapshot of the installed TRL's fields (``trl_args_snapshot.json``, written by
scripts/gen_trl_snapshot.py; a test fails when it drifts). accelerate's options and its config file
are read as ``accelerate launch`` applies them (accelerate/commands/launch.py: command-line options win
over the config file; ``--gpu_ids`` becomes the processes' CUDA_VISIBLE_DEVICES). The launchers' own options are
read by their own parsers (accelerate's ``launch_command_parser``, torchrun's, DeepSpeed's: frontends/launchers.py),
imported when a launch uses them; nothing is imported from TRL, nothing is run.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping

from ...config import GRPOConfig
from ...errors import GuardError
from ...launch import Launch, Rollout, TrlSpecifics, visible_devices
from ...plan import world_size
from ...versions import version_tuple
from .accelerate import (
    _accelerate_options,
    _read_yaml,
    accelerate_option_names,
    accelerate_settings,
    packaged_accelerate_config,
)
from .accelerate_cmd import display_command, launcher_prefix, require_script, trl_cli_launch_args
from .arguments import TRL_GRPO_CLASSES, _fields, classes_of, parse_args, snapshot


def load_trl(argv: list[str], env: Mapping[str, str], source: str) -> Launch:
    """A TRL training launch -> Launch (framework 'trl'); the GRPO settings are read by :func:`to_config`."""
    from ..launchers import _srun_note, is_process_launcher, is_python, process_launch, slurm_tasks, through_srun

    srun: dict[str, str] | None = None
    typed = list(argv)
    env = dict(env)
    while argv and os.path.basename(argv[0]) == 'srun':  # srun(1): its options end at the command it runs
        srun, argv, more = through_srun(argv, env, source)
        env.update(more)
    head = os.path.basename(argv[0]) if argv else ''
    if is_python(head):
        head = 'python'
    info: dict[str, Any] = {'launcher': os.path.basename(argv[0]) if argv else head}
    launch_env: dict[str, str] = {
        k: env[k] for k in ('CUDA_VISIBLE_DEVICES', 'NNODES', 'NODE_RANK', 'MASTER_ADDR') if k in env
    }
    script_args: list[str]
    cli_taken: list[str] = []  # trl grpo: --config keys TRL's CLI hands to accelerate (frontends/trl/cli_config.py)
    if head == 'accelerate' or (head == 'trl' and argv[1:2] == ['grpo']):
        if head == 'accelerate':
            opts, rest = _accelerate_options(argv[2:], source)
            script = rest[0] if rest else None
            script_args = rest[1:]
            require_script(script, source)  # accelerate's usage error: no training script
        else:
            values, flags = accelerate_option_names(source)  # accelerate's own parser's options
            acc_words, script_args = trl_cli_launch_args(argv[2:], values, set(_fields(*TRL_GRPO_CLASSES)), flags)
            from .cli_config import config_launch_words  # --config keys TRL's CLI hands to accelerate

            file_words, file_acc_config, cli_taken = config_launch_words(script_args)
            acc_words = file_words + acc_words  # the config's leftovers come first: the command line's win
            if cli_taken:
                info['script_parse'] = {'cli_taken': cli_taken}  # judged by release: frontends/trl/verdicts.py
            if file_acc_config is not None:  # resolve_accelerate_config_argument takes the first one
                script_args = ['--accelerate_config', file_acc_config] + script_args
            opts, script = _accelerate_options(acc_words, source)[0], 'trl grpo'
            if '--accelerate_config' in script_args:  # trl/cli/accelerate_config.py: a file, or a packaged name
                i = script_args.index('--accelerate_config')
                if i + 1 >= len(script_args):
                    raise GuardError(f'{source}: --accelerate_config needs a config name (zero3, ...) or a file')
                name = script_args[i + 1]
                found = name if Path(name).is_file() else packaged_accelerate_config(name)
                if found is None:
                    raise GuardError(
                        f'{source}: --accelerate_config {name}: neither a file nor a config the '
                        f'installed TRL ships (trl/accelerate_configs: zero1, zero2, zero3, fsdp1, '
                        f'fsdp2, multi_gpu, single_gpu)'
                    )
                opts['config_file'] = str(found)
                script_args = script_args[:i] + script_args[i + 2 :]
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
    elif is_process_launcher(argv):  # their own parsers (frontends/launchers.py)
        lay = process_launch(argv, env, source)
        script, script_args = lay['script'], lay['script_args']
        info.update(script=script, torchrun=lay['opts'])
        launch_env.update(lay['env'])
        if lay['nproc'] is None:  # one per visible GPU (torchrun gpu/auto, deepspeed with no count)
            info.update(nproc_from_devices=True, launcher_cvd=env.get('CUDA_VISIBLE_DEVICES'))
        else:
            launch_env['NPROC_PER_NODE'] = str(lay['nproc'])
        if lay['nnodes'] > 1:
            launch_env['NNODES'] = str(lay['nnodes'])
        if lay.get('cvd') is not None:
            launch_env['CUDA_VISIBLE_DEVICES'] = lay['cvd']
    else:  # python SCRIPT / python -m module
        from ..launchers import python_options

        _, rest = python_options(argv[1:])
        if rest[:1] == ['-m']:
            script, script_args = ' '.join(rest[:2]), rest[2:]
        else:
            script, script_args = (rest[0] if rest else None), rest[1:]
        info.update(script=script)
        nodes, per = slurm_tasks(srun, source) if srun is not None else (1, 1)
        if nodes * per > 1:  # srun runs the script once per task
            launch_env['NPROC_PER_NODE'] = str(per)
            if nodes > 1:
                launch_env['NNODES'] = str(nodes)
    info.update(display=display_command(argv, script), prefix=launcher_prefix(argv))
    info['script_args'] = list(script_args)  # as typed (TRL's own parser reads --config itself)
    if script and script.endswith('.py') and os.path.isfile(script):
        # the script read as Python runs it: the settings it writes, then the words TRL's parser gets
        from .script_launch import read_script

        script_args = read_script(script, script_args, info, env)
    config_file = None
    if '--config' in script_args:  # TrlParser: a YAML whose keys are defaults, command line wins
        i = script_args.index('--config')
        if i + 1 >= len(script_args):
            raise GuardError(f'{source}: --config needs a YAML file')
        config_file = script_args[i + 1]
        data = _read_yaml(Path(config_file), '--config')
        file_args: list[str] = []
        for k, v in data.items():
            if (k == 'env' and isinstance(v, dict)) or k in cli_taken:  # env: TrlParser sets it; taken: accelerate's
                continue
            file_args += [f'--{k}'] + (
                [str(x) for x in v] if isinstance(v, list) else [json.dumps(v) if isinstance(v, dict) else str(v)]
            )
        script_args = file_args + script_args[:i] + script_args[i + 2 :]
        info['trl_config'] = config_file
        # judged by frontends/trl/verdicts.py
        info['trl_config_keys'] = [str(k) for k in data if k != 'env' and k not in cli_taken]
    from .config_keys import parser_classes

    info['parser_classes'] = parser_classes(script)  # 'trl', 'own' or None: whose dataclasses parse the flags
    names = {
        'max_length': 'max_prompt_length',
        'vllm_max_model_len': 'vllm_max_model_length',
        'tuner_type': 'use_peft',
        'lora_rank': 'lora_r',
        'model': 'model_name_or_path',
        'sleep_level': 'vllm_enable_sleep_mode',
        'NPROC_PER_NODE': 'accelerate launch --num_processes',
        'deepspeed': 'accelerate --config_file (deepspeed_config.zero_stage)',
    }
    notes = []
    if script and script.endswith('.py') and not os.path.isfile(script):
        # classify() reads a script it cannot open as a TRL GRPOTrainer script: say so, and what that leaves unread
        notes.append(
            f'{script} is not here to read (run the guard where the launch runs): its arguments are read as TRL '
            f"GRPOConfig's, and what the script sets in code is not seen"
        )
    if srun is not None and head != 'python':
        note = _srun_note(srun, int(launch_env.get('NNODES', '1')), source)
        notes += [note] if note else []
    return Launch(
        argv=script_args,
        env=launch_env,
        config_file=config_file or source,
        framework='trl',
        names=names,
        trl=TrlSpecifics(**info),
        command=typed,
        notes=notes,
    )


# TRL 0.14-0.15 (vLLM inside the trainer): the defaults that differ from the snapshot's TRL, from
# trl v0.15.2 trl/trainer/grpo_config.py (vllm_device "auto", vllm_gpu_memory_utilization 0.9,
# max_prompt_length 512, vllm_max_model_len None: the model's context).
OLD_VLLM_DEFAULTS = {'vllm_device': 'auto', 'vllm_gpu_memory_utilization': 0.9, 'max_prompt_length': 512}


def is_in_trainer_vllm(trl_version: str | None) -> bool:
    """True for the TRL releases that started vLLM inside the trainer on ``vllm_device`` (0.14-0.15)."""
    v = version_tuple(trl_version)
    return v is not None and v < (0, 16)


def to_config(launch: Launch, trl_version: str | None = None) -> tuple[GRPOConfig, list[str]]:
    """TRL's settings in the framework-neutral GRPOConfig (TRL's defaults where the user set nothing), and the
    arguments TRL does not know. ``trl_version``: the TRL the launch runs, when older than the snapshot's (names it
    still had are read). ``read_config`` also gives the launch with the release's notes."""
    cfg, unknown, _ = read_config(launch, trl_version)
    return cfg, unknown


def read_config(launch: Launch, trl_version: str | None = None) -> tuple[GRPOConfig, list[str], Launch]:
    """``to_config``, and the launch with what reading it found (a copy; ``launch`` is left as it is): the older
    release's notes, and TRL 0.14-0.15's ``vllm_device`` in its ``trl``."""
    values, unknown, _ = parse_args(launch.argv, classes_of(launch.trl.script))
    d = {f['name']: f['default'] for f in snapshot()['GRPOConfig']}
    m = {f['name']: f['default'] for f in snapshot()['ModelConfig']}
    d.update({k: v for k, v in values.items() if k in d})
    m.update({k: v for k, v in values.items() if k in m})
    old = values.get('_unknown_values', {})
    from .versions import apply_defaults, apply_semantics  # an older TRL's defaults, names and semantics

    version_notes = apply_defaults(d, m, values, old, trl_version, launch.trl.script)
    if is_in_trainer_vllm(trl_version):
        for k, default in OLD_VLLM_DEFAULTS.items():
            d[k] = values[k] if k in values else old.get(k, default)
        if str(old.get('vllm_max_model_len', '')).isdigit():
            d['vllm_max_model_length'] = int(old['vllm_max_model_len'])
        d['vllm_mode'] = 'colocate'  # replaced by old_vllm_device once the device is known
        launch = replace(
            launch, trl=replace(launch.trl, vllm_device=str(d['vllm_device']) if d.get('use_vllm') else None)
        )
    acc = launch.trl.accelerate or {}
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
    hosts = [host] if isinstance(host, str) else host
    if hosts == ['0.0.0.0']:
        hosts = ['127.0.0.1']  # TRL's client default host is where the server listens
    cfg = GRPOConfig(
        model=m.get('model_name_or_path'),
        rlhf_type='grpo',
        tuner_type='lora' if peft else 'full',
        torch_dtype={'bfloat16': 'bfloat16', 'float16': 'float16', 'float32': 'float32'}.get(str(m.get('dtype')), None),
        quant_method='bnb' if (m.get('load_in_4bit') or m.get('load_in_8bit')) else None,
        quant_bits=4 if m.get('load_in_4bit') else (8 if m.get('load_in_8bit') else None),
        lora_rank=int(m.get('lora_r') or 16),
        lora_alpha=float(m.get('lora_alpha') or 32),
        target_modules=targets,
        beta=float(d.get('beta') or 0.0),
        per_device_train_batch_size=int(d['per_device_train_batch_size']),
        gradient_accumulation_steps=(
            int(d['gradient_accumulation_steps'])  # 0 kept: batch.accumulation refuses it
            if d.get('gradient_accumulation_steps') is not None
            else None
        ),
        steps_per_generation=d.get('steps_per_generation'),
        generation_batch_size=d.get('generation_batch_size'),
        num_generations=int(d['num_generations']),
        num_iterations=int(d.get('num_iterations') or 1),
        max_length=int(d['max_prompt_length']) if d.get('max_prompt_length') is not None else None,
        max_completion_length=int(d['max_completion_length']),
        use_vllm=bool(d.get('use_vllm')),
        vllm_mode=d.get('vllm_mode') if d.get('use_vllm') else None,
        vllm_gpu_memory_utilization=float(d.get('vllm_gpu_memory_utilization') or 0.3),
        vllm_tensor_parallel_size=int(d.get('vllm_tensor_parallel_size') or 1),
        vllm_max_model_len=d.get('vllm_max_model_length'),
        # TRL puts vLLM to sleep at level 2 (weights and KV cache freed): trl/generation/vllm_generation.py
        sleep_level=2 if d.get('vllm_enable_sleep_mode') else 0,
        vllm_server_host=hosts,
        vllm_server_port=[int(d.get('vllm_server_port') or 8000)],
        vllm_server_base_url=[d['vllm_server_base_url']] if d.get('vllm_server_base_url') else None,
        deepspeed=deepspeed,
        fsdp='full_shard' if acc.get('fsdp') else None,
        gradient_checkpointing=bool(d.get('gradient_checkpointing')),
        use_liger_kernel=bool(d.get('use_liger_loss') or d.get('use_liger_kernel')),
        optim=str(values['optim']) if 'optim' in values else None,
        ds3_gather_for_generation=bool(d.get('ds3_gather_for_generation', True)),
        reward_funcs_in_script=True,
        explicit=frozenset(values),
    )
    cfg, semantics = apply_semantics(cfg, trl_version)
    version_notes += semantics
    notes = list(launch.notes)
    notes.extend(n for n in version_notes if n not in notes)
    return cfg, unknown, replace(launch, notes=notes)


def old_vllm_device(cfg: GRPOConfig, launch: Launch, trl_version: str | None) -> tuple[GRPOConfig, Launch, list[str]]:
    """TRL 0.14-0.15: where ``vllm_device`` puts vLLM, as GRPOTrainer resolves it ("auto": cuda:0 when one GPU
    is visible, else cuda:<num_processes>, the GPU after the training ones). A dedicated device is planned like a
    rollout server on that GPU; one shared with training like colocate. Returns the config so planned, the launch
    with the device index (and a dedicated GPU) in its ``trl`` for the rules (a copy: ``launch`` is left as it is),
    and the assumptions made."""
    dev = launch.trl.vllm_device
    if not (cfg.use_vllm and dev and is_in_trainer_vllm(trl_version)):
        return cfg, launch, []
    env = launch.env
    raw = env.get('CUDA_VISIBLE_DEVICES', '')
    vis = visible_devices(raw) if raw.strip().replace(',', '').isdigit() else None  # plain ids only, else unknown
    count = len(vis) if vis is not None else None
    nproc = world_size(env)  # accelerator.num_processes
    if dev == 'auto':
        idx = 0 if count == 1 else nproc
    elif dev.startswith('cuda:') and dev[5:].isdigit():
        idx = int(dev[5:])
    else:
        return cfg, launch, [f'vllm_device {dev!r}: not a cuda:N device; vLLM planned beside rank 0']
    if idx < nproc:
        cfg = replace(cfg, vllm_tensor_parallel_size=1, vllm_mode='colocate')
        return (
            cfg,
            replace(launch, trl=replace(launch.trl, vllm_device_index=idx)),
            [
                f'TRL {trl_version}: vLLM runs in the training process on cuda:{idx} (vllm_device {dev}), beside '
                f'the trainer on that GPU; planned as colocate'
            ],
        )
    cfg = replace(cfg, vllm_tensor_parallel_size=1, vllm_mode='server', vllm_server_host=None, vllm_in_trainer=True)
    physical = vis[idx] if vis is not None and idx < len(vis) else idx
    launch = replace(launch, trl=replace(launch.trl, vllm_device_index=idx, vllm_device_gpu=physical))
    return (
        cfg,
        launch,
        [
            f'TRL {trl_version}: vLLM runs in the training process of rank 0 on its own GPU (vllm_device {dev} = '
            f'cuda:{idx}, physical GPU {physical}) at vllm_gpu_memory_utilization '
            f"{cfg.vllm_gpu_memory_utilization}; that GPU is planned like a rollout server's"
        ],
    )


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
    refused = values.get('_errors', {})  # a known flag whose value argparse refuses ("invalid int value: 'two'")
    for u in unknown:
        if u in refused:
            descr.append(f'{u}: TRL\'s parser stops with "{refused[u]}"')
            continue
        close = difflib.get_close_matches(u.lstrip('-').replace('-', '_'), list(d), n=1, cutoff=0.75)
        descr.append(
            f'{u}: not an argument of trl vllm-serve {snapshot()["trl_version"]}'
            + (f'; did you mean --{close[0]}?' if close else '')
        )
    return Rollout(
        framework='trl',
        argv=args,
        env=dict(env),
        source=source,
        model=d.get('model'),
        tensor_parallel_size=int(d.get('tensor_parallel_size') or 1),
        data_parallel_size=int(d.get('data_parallel_size') or 1),
        max_model_len=d.get('max_model_len'),
        gpu_memory_utilization=float(d.get('gpu_memory_utilization') or 0.9),
        enforce_eager=bool(d.get('enforce_eager')),
        unknown=descr,
        engine_kwargs=json.dumps({'kv_cache_dtype': d['kv_cache_dtype']}) if d.get('kv_cache_dtype') else None,
    )
