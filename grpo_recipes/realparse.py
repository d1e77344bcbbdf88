"""Bridge to ms-swift's real parser (``grpo-guard validate``).

The parse runs in a subprocess (:mod:`grpo_recipes.frontends.swift.worker`) so that ms-swift, torch and
their side effects (a gloo process group, logging set-up) never enter the guard's own process.
The worker gets the user's argv untouched, followed by three overrides that only make the parse
possible on any machine, and which are not reported as the user's values:

- ``--model DIR``: a dir with the model's ``config.json`` only (the user's own dir when it exists);
- ``--output_dir TMP``: a parse creates ``<output_dir>/v<N>-<timestamp>/``;
- ``--use_cpu true``: bf16 configs otherwise fail argument construction without a GPU.

GPUs are hidden from the worker (``CUDA_VISIBLE_DEVICES=``): the parse is a single process,
and the device rules belong to the guard, not to this parse.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import swift_args
from .config import GRPOConfig
from .errors import GuardError
from .frontends.swift.worker import RESULT_MARK
from .frontends.trl.arguments import CLASSES, describe_unknown, parse_args
from .launch import Launch
from .models import config_only_dir
from .parse_pool import pooled
from .plan import world_size
from .versions import version_tuple


@dataclass
class RealParseResult:
    ok: bool
    """True when ms-swift's parser accepted the launch."""
    error_type: str | None = None
    message: str | None = None
    """ms-swift's own exception message, verbatim."""
    where: str | None = None
    """The ms-swift source line that raised."""
    unknown: list[dict] = field(default_factory=list)
    """Unknown or renamed arguments, each with a suggestion."""
    resolved: dict = field(default_factory=dict)
    """Values after ms-swift's defaults (model_type, template, beta, ...)."""
    simulated: list[str] = field(default_factory=list)
    overrides: list[str] = field(default_factory=list)
    world_size: int = 1
    parse_s: float | None = None
    total_s: float | None = None
    parser: str = 'ms-swift RLHFArguments'
    """Whose parser ran (ms-swift's RLHFArguments, or TRL's TrlParser and its version)."""

    def to_dict(self) -> dict:
        return asdict(self)


def world_size_of(launch: Launch) -> int:
    try:
        return world_size(launch.env, strict=True)
    except ValueError as e:
        raise GuardError(str(e)) from None


def _request(
    launch: Launch, workdir: Path, index: int, model_config: dict | None = None
) -> tuple[dict, list[str], list[str]]:
    cfg, remaining = GRPOConfig.from_argv(launch.argv)
    model_dir = config_only_dir(cfg.model, workdir / 'models', model_config)
    overrides = ['--model', str(model_dir), '--output_dir', str(workdir / f'output{index}'), '--use_cpu', 'true']
    env_updates = {
        k: v for k, v in launch.file_env.items() if k not in os.environ and k not in ('MASTER_ADDR', 'MASTER_PORT')
    }
    env_updates['CUDA_VISIBLE_DEVICES'] = ''
    request = {
        'argv': launch.argv + overrides,
        'env': env_updates,
        'world_size': world_size_of(launch),
        'skip_server_connect': bool(cfg.vllm_server_host or cfg.vllm_server_base_url),
    }
    return request, remaining, overrides


def _free_port() -> int:
    """A TCP port nothing listens on now (the OS picks it)."""
    import socket

    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def _run_worker(
    module: str,
    requests: list[dict],
    what: str,
    timeout: float,
    python: str | None,
    cwd: str | None = None,
    env_updates: dict | None = None,
) -> list[str]:
    """Run a parser worker on JSON requests in a subprocess; its result lines, one per request."""
    child_env = {**os.environ, **(env_updates or {})}
    child_env.setdefault('PYTHONWARNINGS', 'ignore')
    # transformers' _setup_devices may start a CPU process group for a simulated world: on a port of its own, never
    # the launch's (or torch's default 29500), which a training job on this machine may hold (EADDRINUSE)
    child_env.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(_free_port()))
    stdin = json.dumps(requests)
    try:
        # a warm pool (parse_pool.py) where one is named and can stand for a fresh worker; else a fresh worker
        ran = pooled(module, stdin, child_env, cwd, python, timeout)
        if ran is None:
            proc = subprocess.run(
                [python or sys.executable, '-m', module],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=timeout,
                cwd=cwd,
                env=child_env,
            )
            ran = proc.returncode, proc.stdout, proc.stderr
    except (subprocess.TimeoutExpired, TimeoutError):
        raise GuardError(f'{what} did not finish in {timeout:.0f}s') from None
    _, stdout, stderr = ran
    lines = [ln for ln in stdout.splitlines() if ln.startswith(RESULT_MARK)]
    if len(lines) != len(requests):
        tail = (stderr or stdout).strip().splitlines()[-5:]
        raise GuardError(f'{what} crashed before giving a result: ' + ' | '.join(tail))
    return lines


def validate_many(
    launches: list[Launch], timeout: float = 900.0, python: str | None = None, model_config: dict | None = None
) -> list[RealParseResult]:
    """Parse several launches with one ms-swift import (one subprocess, one parse per launch). ``model_config``: the
    config.json (``--model-config``) to parse against where the model is not local, cached or bundled."""
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix='grpo-guard-') as tmp:
        prepared = [_request(launch, Path(tmp), i, model_config) for i, launch in enumerate(launches)]
        lines = _run_worker(
            'grpo_recipes.frontends.swift.worker', [p[0] for p in prepared], 'ms-swift parser', timeout, python, cwd=tmp
        )
    results = []
    for (request, remaining, overrides), line in zip(prepared, lines):
        raw = json.loads(line[len(RESULT_MARK) :])
        if raw.get('crashed'):
            raise GuardError(
                f'cannot run ms-swift here ({raw["error_type"]}: {raw["message"]}); '
                f'install it with `pip install grpo-recipes` (ms-swift 4.6.x)'
            )
        unknown = swift_args.explain_remaining(raw.get('remaining') or remaining)
        results.append(
            RealParseResult(
                ok=bool(raw['ok']),
                error_type=raw.get('error_type'),
                message=raw.get('message'),
                where=raw.get('where'),
                unknown=[asdict(u) | {'describe': u.describe()} for u in unknown],
                resolved=raw.get('resolved', {}),
                simulated=raw.get('simulated', []),
                overrides=overrides[::2],
                world_size=request['world_size'],
                parse_s=raw.get('parse_s'),
                total_s=round(time.time() - t0, 3),
            )
        )
    return results


def validate(
    launch: Launch,
    timeout: float = 900.0,
    python: str | None = None,
    trl_version: str | None = None,
    model_config: dict | None = None,
) -> RealParseResult:
    """The framework's own parser on the launch: ms-swift's for ``swift rlhf``, the installed TRL's for a TRL
    launch (``trl_version``, when given, must be the installed one: a parse cannot run another release).
    ``model_config``: ``--model-config``'s config.json, for ms-swift's parse (TRL's parse reads no model)."""
    return launch.fw.call('validator', launch, timeout, python, trl_version, model_config)


def swift_parse(
    launch: Launch, timeout: float, python: str | None, trl_version: str | None, model_config: dict | None
) -> RealParseResult:
    """ms-swift's own parser on one launch (the validator of ms-swift's front end)."""
    return validate_many([launch], timeout=timeout, python=python, model_config=model_config)[0]


def trl_parse(
    launch: Launch, timeout: float, python: str | None, trl_version: str | None, model_config: dict | None
) -> RealParseResult:
    """The installed TRL's own parser on one launch (the validator of TRL's front end; it reads no model)."""
    return validate_trl(launch, timeout=timeout, python=python, trl_version=trl_version)


def installed_trl() -> str | None:
    import importlib.metadata as md

    try:
        return md.version('trl')
    except md.PackageNotFoundError:
        return None


def validate_trl(
    launch: Launch, timeout: float = 900.0, python: str | None = None, trl_version: str | None = None
) -> RealParseResult:
    return validate_trl_many([launch], timeout=timeout, python=python, trl_version=trl_version)[0]


def validate_trl_many(
    launches: list[Launch], timeout: float = 900.0, python: str | None = None, trl_version: str | None = None
) -> list[RealParseResult]:
    """TRL's ``TrlParser`` on TRL launches' script arguments (or on ``trl vllm-serve``'s), in one subprocess
    (:mod:`grpo_recipes.frontends.trl.worker`, one TRL import); world size from accelerate's/torchrun's process
    count."""
    have = installed_trl() if python is None else None
    if python is None and have is None:
        raise GuardError(
            'TRL is not installed here: `pip install trl` (this package was tested with the version in '
            'constraints.txt), then validate again'
        )
    if trl_version and have and trl_version != have:
        raise GuardError(
            f"--trl-version {trl_version}: validate runs the installed TRL's own parser, and TRL {have} "
            f'is installed; install trl=={trl_version} (e.g. in a venv) and run grpo-guard from there, '
            f'or drop --trl-version'
        )
    t0 = time.time()
    requests = []
    own: list[dict] = []
    for launch in launches:
        if launch.kind == 'rollout' and launch.rollout is not None:
            requests.append({'what': 'rollout', 'argv': list(launch.rollout.argv), 'world_size': 1})
            own.append({})
        else:
            # the script's own GRPOConfig(...) literals (frontends/trl/script.py) go through TRL's checks too
            args = launch.trl.script_args
            argv = list(launch.trl.script_flags or []) + list(launch.argv if args is None else args)
            request = {
                'what': 'train',
                'argv': argv,
                'world_size': world_size_of(launch),
                'own_classes': launch.trl.parser_classes == 'own',
            }  # frontends/trl/config_keys.py
            parse = launch.trl.script_parse or {}
            loaded = parse.get('self_loaded')
            trl_classes = launch.trl.parser_classes not in (None, 'own')  # TRL's dataclasses parse the flags
            if trl_classes and parse.get('own_classes') and not parse.get('own_unread'):
                request['classes'] = list(parse['own_classes'])  # e.g. TrlParser((ScriptArguments, GRPOConfig))
            if launch.trl.script == 'trl grpo' and launch.command:  # TRL's CLI, then accelerate's parser
                request.update(what='trl-cli', cli_argv=list(launch.command[1:]))
            elif loaded and loaded.get('fields') is not None and loaded.get('file'):
                from .frontends.trl.arguments import snapshot

                base = {f['name'] for f in snapshot()['GRPOConfig']}
                request.update(
                    what='dataclass',
                    cls=loaded['cls'],
                    config=loaded['file'],
                    extra=[f for f in loaded['fields'] if f not in base],
                )
            requests.append(request)
            own.append(parse)
    # the script's own argparse (frontends/trl/script_parsers.py: Python's argparse on its literal add_argument
    # calls) stops before TRL's parser runs
    stopped = {i: p['argparse'] for i, p in enumerate(own) if (p.get('argparse') or {}).get('error')}
    todo = [r for i, r in enumerate(requests) if i not in stopped]
    # run where the user is (cwd None): a relative --config path is theirs
    ran = iter(
        _run_worker(
            'grpo_recipes.frontends.trl.worker',
            todo,
            'TRL parser',
            timeout,
            python,
            env_updates={'CUDA_VISIBLE_DEVICES': ''},
        )
        if todo
        else []
    )
    lines = []
    for i, launch in enumerate(launches):
        if i in stopped:
            lines.append(
                RESULT_MARK
                + json.dumps(
                    {
                        'ok': False,
                        'error_type': 'SystemExit',
                        'message': stopped[i]['error'],
                        'simulated': [
                            f"{launch.trl.script}'s argparse, rebuilt from its add_argument calls (the script is not "
                            'run)'
                        ],
                        'where': f'{launch.trl.script}:{stopped[i]["line"]}',
                        'trl_version': installed_trl(),
                    }
                )
            )
        else:
            lines.append(next(ran))
    results = []
    for request, line, parse, launch in zip(requests, lines, own, launches):
        raw = json.loads(line[len(RESULT_MARK) :])
        if raw.get('crashed'):
            raise GuardError(f"cannot run TRL's parser here ({raw['error_type']}: {raw['message']})")
        _own_leftovers(raw, parse, launch)
        unknown = []
        if not raw['ok'] and 'not used by the HfArgumentParser' in (raw.get('message') or ''):
            classes = CLASSES if request['what'] != 'rollout' else ('VllmServeArguments',)
            _, flags, _ = parse_args(request['argv'], classes)
            for flag in flags:
                msg, _ = describe_unknown(flag, classes, raw.get('trl_version'))
                unknown.append({'flag': flag, 'describe': msg or flag})
        results.append(
            RealParseResult(
                ok=bool(raw['ok']),
                error_type=raw.get('error_type'),
                message=raw.get('message'),
                where=raw.get('where'),
                unknown=unknown,
                resolved=raw.get('resolved', {}),
                simulated=raw.get('simulated', []),
                overrides=[],
                world_size=request['world_size'],
                parse_s=raw.get('parse_s'),
                total_s=round(time.time() - t0, 3),
                parser=f'TRL {raw.get("trl_version")} TrlParser',
            )
        )
    return results


def _own_leftovers(raw: dict, parse: dict, launch: Launch) -> None:
    """The words TRL's classes left to a script's own dataclasses, judged by those classes' fields (read from the
    script's files by frontends/trl/script_parsers.py, not imported): what none defines stops the script's parser
    as TRL's would (HfArgumentParser.parse_args_into_dataclasses for the command line, then TrlParser's
    "Unknown arguments from config file", TRL >= 0.19)."""
    left = raw.get('left_to_script') or []
    fields = parse.get('own_fields')
    if not (raw.get('ok') and left and fields is not None) or parse.get('own_unread') or parse.get('remaining_ok'):
        return
    from .frontends.trl.arguments import release_training_fields

    known = set(fields) | release_training_fields(raw.get('trl_version'))[1]
    bad = [f for f in left if f.lstrip('-').split('=', 1)[0].replace('-', '_') not in known]
    if not bad:
        return
    keys = set(launch.trl.trl_config_keys or ())
    typed = {
        a.lstrip('-').split('=', 1)[0].replace('-', '_') for a in (launch.trl.script_args or []) if a.startswith('--')
    }
    line = [f for f in bad if f.lstrip('-').replace('-', '_') in typed or f.lstrip('-').replace('-', '_') not in keys]
    version = version_tuple(raw.get('trl_version'))
    if line:
        raw.update(
            ok=False,
            error_type='ValueError',
            where='transformers/hf_argparser.py (parse_args_into_dataclasses)',
            message=f'Some specified arguments are not used by the HfArgumentParser: {line}',
        )
    elif version is not None and version >= (0, 19):
        raw.update(
            ok=False,
            error_type='ValueError',
            where='trl/scripts/utils.py (TrlParser.parse_args_and_config)',
            message=f'Unknown arguments from config file: {bad}. Please remove them, add them to the '
            f'dataclass, or set `fail_with_unknown_args=False`.',
        )
    else:
        return
    raw.setdefault('simulated', []).append(
        "the script's dataclasses' fields as read from its files (" + ', '.join(parse.get('own_classes') or ()) + ')'
    )
