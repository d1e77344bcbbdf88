"""accelerate's options and config file, read as ``accelerate launch`` applies them (accelerate/commands/launch.py:
command-line options win over the config file; ``--gpu_ids`` becomes the processes' CUDA_VISIBLE_DEVICES)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from ...errors import GuardError
from ..launchers import accelerate_options as _accelerate_options  # noqa: F401 - the TRL reader's name


def accelerate_option_names(source: str = 'trl grpo') -> tuple[set[str], set[str]]:
    """(options that take a value, flags) of ``accelerate launch``, as names with underscores, from accelerate's own
    ``launch_command_parser`` (``trl grpo`` hands the words its own parser does not know to it:
    trl/cli/accelerate_launcher.py), rebuilt from its snapshot (launcher_args.py)."""
    from ..launchers import _rebuilt

    parser = _rebuilt('accelerate launch', 'accelerate launch', source)
    values: set[str] = set()
    flags: set[str] = set()
    for action in parser._actions:
        names = {o.lstrip('-').replace('-', '_') for o in action.option_strings if o.startswith('--')}
        (flags if action.nargs == 0 else values).update(names)
    return values - {'help'}, flags - {'help'}


def _read_yaml(path: Path, what: str) -> dict:
    import yaml

    from ...bounded_load import safe_load_yaml
    from ..written import text_of

    try:
        text = text_of(path)  # an accelerate config the launch script writes itself (`cat > acc.yaml <<EOF`)
        data = safe_load_yaml(path.read_text(encoding='utf-8') if text is None else text) or {}  # bounded
    except FileNotFoundError:
        from ..shell_expand import unresolved

        refs = unresolved(str(path))
        if re.search(r'\$\{?[1-9@*]', str(path)):  # `--config $1`: the script's own argument
            raise GuardError(
                f"{what} {path}: no such file; it is the script's own argument: check the script as you run it "
                f'(grpo-guard check -- bash SCRIPT ARGS)'
            ) from None
        if refs:  # `${BASE_WORK}/config/x.yaml` with BASE_WORK set nowhere the reader could see
            names = ' '.join(f'--env {r.strip("${}")}=DIR' for r in dict.fromkeys(refs) if not r.startswith('$('))
            raise GuardError(
                f'{what} {path}: no such file; {", ".join(refs)} is not resolved here'
                + (f': give its value ({names}), or run the guard where the launch runs' if names else '')
            ) from None
        raise GuardError(f'{what} {path}: no such file (run the guard in the directory the launch runs from)') from None
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
    name = path.stem[len('deepspeed_') :] if path.stem.startswith('deepspeed_') else path.stem
    packaged = packaged_accelerate_config(name)
    if packaged is None:
        return path, str(cfg_path)
    return packaged, f"{cfg_path} (not found here; read as the installed TRL's trl/accelerate_configs/{name}.yaml)"


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
    if source is not None:  # a config file without num_processes (or distributed_type): accelerate_cmd.py
        from .accelerate_cmd import config_num_processes

        out['num_processes'] = config_num_processes(conf, source, opts.get('num_processes'))
    for key in (
        'num_processes',
        'num_machines',
        'machine_rank',
        'main_process_ip',
        'gpu_ids',
        'mixed_precision',
        'zero_stage',
        'offload_optimizer_device',
        'offload_param_device',
    ):
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
