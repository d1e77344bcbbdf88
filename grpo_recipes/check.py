"""Assemble a check: read what the rules need at the edge (model config, installed packages, the
first row of local datasets), then run the pure rules over it. Imports neither torch nor ms-swift."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from .config import GRPOConfig
from .errors import GuardError
from .findings import ERROR, INFO, SEVERITY_ORDER, WARNING, Finding, declare
from .frontends.launcher_count import default_process_count
from .hardware import Hardware
from .launch import Launch, Rollout
from .memory.estimate import estimate
from .memory.verdicts import memory_inputs, plan_memory
from .models import load_model_config
from .plan import Plan, build_plan
from .rules import Context, run_rules
from .rules.rollout import rollout_findings

PACKAGES = (
    'ms-swift',
    'trl',
    'math-verify',
    'msgspec',
    'deepspeed',
    'vllm',
    'flashinfer-python',
    'torch',
    'transformers',
)


def installed_packages() -> dict[str, str | None]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def dataset_columns(datasets: list[str], base: Path | None = None) -> dict[str, list[str] | None]:
    """Columns of the first row of each local .jsonl/.json dataset (hub ids and other formats: skipped)."""
    out: dict[str, list[str] | None] = {}
    for spec in datasets:
        path = Path(spec.split('#', 1)[0])
        if base is not None and not path.is_absolute() and not path.exists():
            path = base / path
        if path.suffix not in ('.jsonl', '.json') or not path.is_file():
            continue
        try:
            with open(path, encoding='utf-8-sig') as f:
                if path.suffix == '.jsonl':
                    line = next((ln for ln in f if ln.strip()), '')
                    row = json.loads(line) if line else None
                else:
                    data = json.load(f)
                    row = data[0] if isinstance(data, list) and data else None
        except (OSError, ValueError, UnicodeDecodeError):
            out[spec] = None
            continue
        out[spec] = sorted(row) if isinstance(row, dict) else None
    return out


@dataclass
class CheckReport:
    launch: Launch
    cfg: GRPOConfig
    plan: Plan
    hardware: Hardware
    findings: list[Finding] = field(default_factory=list)
    memory: list = field(default_factory=list)
    """Per-GPU memory breakdown (memory.GPUMemory); empty when the card or the model is unknown."""
    fixes: list = field(default_factory=list)
    """Proposed config changes that fit (fixes.Fix), smallest first."""
    fix_verified: dict | None = None
    """ms-swift's real parser on the first fix (``--verify``)."""
    packages: dict = field(default_factory=dict)
    """Installed versions the rules saw (name -> version or None); vLLM's and FlashInfer's pick the sampler."""
    assumptions: list = field(default_factory=list)
    """What the verdict took as given (prompt lengths planned, rollout settings guessed, ...), one line each."""
    memory_unchecked: str | None = None
    """Why per-GPU memory was not predicted (no config.json, unknown card), None when it was."""
    stop: str | None = None
    """Why the launch as written stops before training on this machine, although it was read and planned: a
    ``--model`` path that is not here (model_source.MissingLocalPath). The report is printed, then this line; exit 2."""
    speed: object = None
    """Predicted seconds per optimizer step by phase (speed.model.SpeedEstimate); None when not predicted."""
    speed_unchecked: str | None = None
    speed_ranking: object = None
    """``--fastest``: the configurations that fit, fastest first (speed.fastest.Ranking)."""

    @property
    def fits(self) -> bool | None:
        return all(m.fits for m in self.memory) if self.memory else None

    @property
    def ok(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)

    @property
    def unchecked(self) -> str | None:
        """Why the verdict is UNCHECKED rather than OK: a training command the guard did not read, else memory not
        predicted; None when everything was checked."""
        if self.launch.unread_trainer:
            return self.launch.unread_trainer
        return f'memory not checked: {self.memory_unchecked}' if self.memory_unchecked else None

    def exit_code(self, allow_unchecked: bool = False) -> int:
        """0 accepted; 1 errors, or something not checked (unless ``allow_unchecked``); 2 a launch that cannot start
        here (``stop``)."""
        if self.stop:
            return 2
        if not self.ok:
            return 1
        return 1 if self.unchecked and not allow_unchecked else 0

    def take_memory(self, verdict) -> None:
        """The memory model's verdict (memory.verdicts.MemoryVerdict) into this report: its per-GPU memory, findings,
        fixes and assumptions, and why it gave none."""
        self.memory, self.fixes = verdict.memory, verdict.fixes
        self.findings = verdict.findings_after(self.findings)
        self.assumptions = self.assumptions + verdict.assumptions
        self.memory_unchecked = verdict.unchecked

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in (ERROR, WARNING, INFO)}

    def to_dict(self) -> dict:
        return {
            'ok': self.ok,
            'memory_unchecked': self.memory_unchecked,
            'unchecked': self.unchecked,
            'stop': self.stop,
            'assumptions': self.assumptions,
            'counts': self.counts(),
            'findings': [f.to_dict() for f in self.findings],
            'plan': self.plan.to_dict(),
            'fits': self.fits,
            'memory': [m.to_dict() for m in self.memory],
            'fixes': [f.to_dict() for f in self.fixes],
            'fix_verified': self.fix_verified,
            'hardware': self.hardware.to_dict(),
            'launch': self.launch.to_dict(),
            'config': self.cfg.to_dict(),
            **speed_json(self),
        }


def speed_json(report) -> dict:
    """The ``speed`` (and ``--fastest``'s ``speed_ranking``) keys of ``--json`` (speed/report.py)."""
    from .speed.report import speed_json as build

    return build(report)


def load_data_stats(path: str | os.PathLike) -> dict:
    """A ``grpo-data stats --json`` file, checked enough to plan with."""
    p = Path(path)
    try:
        st = json.loads(p.read_text(encoding='utf-8'))
    except FileNotFoundError:
        raise GuardError(f'--data-stats {p}: no such file; write it with `grpo-data stats DATA --json > {p}`') from None
    except (OSError, ValueError) as e:
        raise GuardError(f'--data-stats {p}: not a grpo-data stats JSON file ({e})') from None
    if not isinstance(st, dict) or not isinstance(st.get('max'), int) or 'percentiles' not in st:
        raise GuardError(f'--data-stats {p}: not `grpo-data stats --json` output (needs max, percentiles, histogram)')
    return st


def with_rollout(cfg: GRPOConfig, launch: Launch) -> tuple[GRPOConfig, list[str]]:
    """Server mode: the trainer ignores its own vLLM engine arguments and the rollout server's decide the
    rollout GPUs (ms-swift logs that vllm_max_model_len etc. are ignored in server mode). Returns the config with
    the server's settings, and the assumptions made when the server's command is not known."""
    if not (cfg.rollout_mode == 'server'):
        return cfg, []
    r = launch.rollout
    if r is None:
        # the trainer's own utilisation is ignored in server mode; both servers default to 0.9
        # (swift rollout's VllmArguments, trl vllm-serve's ScriptArguments)
        cfg = replace(cfg, vllm_gpu_memory_utilization=Rollout.gpu_memory_utilization)
        return cfg, [
            f'rollout server not given (--rollout "CMD"): its TP, DP, max_model_len and utilisation are taken '
            f'as TP {cfg.vllm_tensor_parallel_size}, DP {cfg.vllm_data_parallel_size}, '
            f"{cfg.vllm_max_model_len or 'the model context'}, {cfg.vllm_gpu_memory_utilization} (the servers' "
            f'default), so what it would refuse at start-up is a warning, not a refusal'
        ]
    return replace(
        cfg,
        vllm_tensor_parallel_size=r.tensor_parallel_size,
        vllm_data_parallel_size=r.data_parallel_size,
        vllm_max_model_len=r.max_model_len,
        vllm_gpu_memory_utilization=r.gpu_memory_utilization,
        vllm_max_num_seqs=r.max_num_seqs,
        vllm_enforce_eager=r.enforce_eager,
        vllm_engine_kwargs=r.engine_kwargs,
        vllm_quantization=r.quantization,
    ), []


def model_config_for(model: str | None, given: dict | None, hub=None) -> tuple[dict | None, str | None]:
    """(config.json, None), or (None, why memory cannot be checked): the one lookup a trainer check and a
    rollout-server check share. ``hub`` (model_fetch.hub_of): where the launch downloads its model, asked for
    config.json alone when no copy is here. A ``--model`` path missing here raises model_source.MissingLocalPath
    (``planned_without_model`` turns it into the report's ``stop``)."""
    if given is not None:
        return given, None
    from .model_fetch import FetchError
    from .model_source import MissingLocalPath

    try:
        return load_model_config(model, hub), None
    except MissingLocalPath:
        raise
    except FetchError as e:
        return None, str(e)
    except GuardError:
        from .frontends.shell_expand import unresolved

        if model and unresolved(model):  # $MODEL_DIR set nowhere the guard could see
            return None, (
                f'--model {model}: {", ".join(unresolved(model))} could not be resolved, so the model is '
                f'not known here; export it before running the guard, or pass --model-config DIR'
            )
        if not model:
            return (
                None,
                'the launch names no model, so there is no config.json to plan from: name the model, or pass '
                '--model-config DIR',
            )
        return None, f'no config.json for {model}: pass --model-config DIR or a local model dir'


def planned_without_model(
    model: str | None, given: dict | None, hub=None
) -> tuple[dict | None, str | None, str | None]:
    """``model_config_for`` for a check that goes on without the model: (config.json, why memory is not checked,
    why the launch stops here). A ``--model`` path missing on this machine is never matched to a bundled config by
    its name; the launch is still read and planned (processes, GPUs, batches), its memory is not, and the check
    ends with that one line (exit 2)."""
    from .model_source import MissingLocalPath

    try:
        return (*model_config_for(model, given, hub), None)
    except MissingLocalPath as e:
        return None, f'--model {model} is not on this machine, so neither is its config.json', str(e)


def with_rollout_gpus(hw: Hardware, rollout) -> Hardware:
    """The rollout server's CUDA_VISIBLE_DEVICES as its GPUs, unless --rollout-gpus said otherwise, or a job launcher
    (``srun --gres=gpu:1 ... trl vllm-serve``) places the server: its ids are then the job step's own, numbered from 0
    on whatever GPUs the scheduler gives it, not the trainer's."""
    if hw.rollout_gpus is None and rollout is not None and rollout.gpus is not None and not rollout.launcher:
        return replace(hw, rollout_gpus=tuple(rollout.gpus))
    return hw


# Addresses of the machine the trainer runs on; any other vllm_server_host is taken as another machine.
LOCAL_HOSTS = ('127.0.0.1', 'localhost', '0.0.0.0', '::1', '')


def first_gpus_of_the_node(hw: Hardware, rollout, remote: str | None) -> tuple[Hardware, str | None]:
    """A rollout server started on this node with no CUDA_VISIBLE_DEVICES (``trl vllm-serve --tensor_parallel_size 4
    &``): vLLM takes the first TP x DP GPUs it sees, the node's 0 to TP x DP - 1 (TRL's vllm_serve and ms-swift's
    rollout give DP rank r the TP GPUs after r x TP). Not for a server another machine, a job launcher (``srun``) or
    a comment places."""
    if hw.rollout_gpus is not None or rollout is None or rollout.gpus is not None or not hw.gpus:
        return hw, None
    if remote or rollout.commented or rollout.launcher or 'CUDA_VISIBLE_DEVICES' in rollout.env:
        return hw, None
    n = rollout.gpus_needed
    if n > hw.gpus:
        return hw, None
    ids = tuple(range(n))
    return replace(hw, rollout_gpus=ids), (
        f'the rollout server ({rollout.source}) sets no CUDA_VISIBLE_DEVICES: vLLM takes the first {n} GPU(s) of '
        f'the node (TP {rollout.tensor_parallel_size} x DP {rollout.data_parallel_size}): {",".join(map(str, ids))}'
    )


def rollout_remote(cfg: GRPOConfig, launch: Launch) -> str | None:
    """Server mode: why the rollout server runs on another machine than this trainer, else None. The trainer's
    own vllm_server_host / vllm_server_base_url decides where a non-local address is given; else the script's
    comment above the rollout command (Rollout.remote)."""
    if not (cfg.rollout_mode == 'server') or cfg.vllm_in_trainer:  # in a training process: here
        return None
    from urllib.parse import urlparse

    hosts = list(cfg.vllm_server_host or [])
    hosts += [urlparse(u if '//' in u else f'//{u}').hostname or '' for u in (cfg.vllm_server_base_url or [])]
    far = [h for h in hosts if h.strip().lower() not in LOCAL_HOSTS]
    if far:
        name = 'vllm_server_base_url' if not cfg.vllm_server_host else 'vllm_server_host'
        return f'{name} {far[0]} is not this machine'
    return launch.rollout.remote if launch.rollout is not None else None


# what check_launch adds after the rules: a local dataset path that is not there (model_source.py)
declare(f'{__name__}.check_launch', ('data.missing-local',))


def check_launch(launch: Launch, hw: Hardware, **kwargs) -> CheckReport:
    """The check of one launch (``_check_launch``), in the directory the launch runs in where its script changes to
    one (``Launch.workdir``): its relative model, data and config paths are that directory's."""
    from .launch import in_dir

    with in_dir(getattr(launch, 'workdir', None)):
        return _check_launch(launch, hw, **kwargs)


def _check_launch(
    launch: Launch,
    hw: Hardware,
    packages: dict | None = None,
    model_config: dict | None = None,
    memory: bool = True,
    fixes: bool = True,
    data_stats: dict | None = None,
    completion_mean: int | None = None,
    fastest: bool = False,
    pass_rate: float | None = None,
    replay: bool = False,
) -> CheckReport:
    """The check of one launch, orchestrated: the launch's front end reads its typed config and lays out what its
    framework does after reading (``launch.fw``: frontends/<framework>/framework.py); the rollout server, the
    processes and the model config are resolved here; the rules run; the memory model gives its verdict
    (memory.verdicts.MemoryVerdict); the front end words the report and its fixes in the launch's own terms. A
    rollout server on its own, and a front end with its own checker (OWN_CHECKS), go their own way."""
    if launch.kind == 'rollout':
        return check_rollout(launch, hw, packages=packages, model_config=model_config)
    packages = installed_packages() if packages is None else packages
    from .frontends import own_check

    own = own_check(launch)  # a front end with its own plan and memory model (Megatron-SWIFT)
    if own is not None:
        report = own(
            launch,
            hw,
            packages=packages,
            model_config=model_config,
            data_stats=data_stats,
            completion_mean=completion_mean,
        )
        if replay:
            report.assumptions.append('--replay: this launch has its own memory model; no step is replayed')
        return report
    fw = launch.fw  # the front end reads the typed config, then lays out what its framework does after reading
    cfg, remaining, launch = fw.call('read_config', launch, packages)
    cfg, assumptions = with_rollout(cfg, launch)
    # accelerate with no --num_processes and no config file, deepspeed/torchrun running ms-swift's entry: one
    # process per GPU of the node (launcher_count.py)
    nproc_note = default_process_count(launch, hw.gpus)
    assumptions += [nproc_note] if nproc_note else []
    cfg, launch, more = fw.call('post_read', cfg, launch, packages)
    assumptions += more
    hw = with_rollout_gpus(hw, launch.rollout)
    remote = rollout_remote(cfg, launch)
    if remote:
        hw = replace(hw, rollout_remote=remote)
        assumptions.append(
            f"the rollout server runs on another machine ({remote}): its GPUs are that machine's, "
            f'not checked against the training GPUs, and planned on the same card type'
        )
    hw, placed = first_gpus_of_the_node(hw, launch.rollout, remote)
    assumptions += [placed] if placed else []
    if launch.trl.vllm_device_gpu is not None and hw.rollout_gpus is None:
        g = launch.trl.vllm_device_gpu  # TRL 0.14-0.15's / ms-swift < 3.6's in-trainer vLLM GPU(s)
        hw = replace(hw, rollout_gpus=tuple(g) if isinstance(g, (list, tuple)) else (g,))
    plan = build_plan(cfg, launch.env, hw)
    from .model_fetch import hub_of
    from .model_source import dataset_message, missing_datasets
    from .models import config_source

    given_config = model_config is not None
    hub = hub_of(launch.fw, launch.argv, launch.file_env)
    model_config, unchecked, stop = planned_without_model(cfg.model, model_config, hub)
    assumptions += [config_source(cfg.model, given_config, hub)] if model_config is not None else []
    base = Path(launch.config_file).parent if launch.config_file and os.path.isfile(launch.config_file) else None
    ctx = Context(
        cfg=cfg,
        launch=launch,
        plan=plan,
        hw=hw,
        model=model_config,
        remaining=remaining,
        packages=packages,
        dataset_columns=dataset_columns(cfg.dataset, base),
        environ={k: os.environ[k] for k in ('PYTORCH_CUDA_ALLOC_CONF',) if k in os.environ},
        data_stats=data_stats,
        pass_rate=pass_rate,
    )
    findings = run_rules(ctx)
    findings += [
        Finding(
            WARNING if d.startswith(('/', '~')) else INFO,
            'data.missing-local',
            ['dataset'],
            dataset_message(d),
            'the path of a file or dir that exists (or a hub id)',
            'swift/dataset/loader.py::_load_repo_dataset',
        )
        for d in missing_datasets(cfg.dataset, base)
    ]  # model_source.py: absolute: a warning
    report = CheckReport(
        launch=launch,
        cfg=cfg,
        plan=plan,
        hardware=hw,
        findings=findings,
        packages=packages,
        assumptions=assumptions,
        memory_unchecked=unchecked,
        stop=stop,
    )
    if memory and unchecked is None:  # the memory model gives a value; the report takes it
        report.take_memory(
            plan_memory(
                report,
                model_config,
                want_fixes=fixes,
                data_stats=data_stats,
                completion_mean=completion_mean,
                replay=replay,
            )
        )
    elif not memory:
        report.memory_unchecked = 'memory planning was turned off'
    from .speed.attach import attach_speed  # seconds per step by phase; --fastest ranks the configs that fit

    attach_speed(report, model_config, data_stats, completion_mean, fastest)
    if fw.reword is not None:
        fw.call('reword', report)  # the framework's own names
    from .fix_syntax import render_fixes

    render_fixes(report)  # flags for a command line, YAML keys for a config file
    return report


def rollout_config(launch: Launch) -> GRPOConfig:
    r = launch.rollout
    return GRPOConfig(
        model=r.model,
        rlhf_type='grpo',
        use_vllm=True,
        vllm_mode='server',
        vllm_tensor_parallel_size=r.tensor_parallel_size,
        vllm_data_parallel_size=r.data_parallel_size,
        vllm_max_model_len=r.max_model_len,
        vllm_gpu_memory_utilization=r.gpu_memory_utilization,
        vllm_max_num_seqs=r.max_num_seqs,
        vllm_enforce_eager=r.enforce_eager,
        vllm_engine_kwargs=r.engine_kwargs,
        vllm_quantization=r.quantization,
        vllm_server_host=['127.0.0.1'],
        num_generations=2,
        reward_funcs=['accuracy'],
    )


def check_rollout(
    launch: Launch, hw: Hardware, packages: dict | None = None, model_config: dict | None = None
) -> CheckReport:
    """A rollout server on its own (``grpo-guard check -- swift rollout ...`` or ``-- trl vllm-serve ...``): its
    arguments, its GPUs and vLLM's start-up on each of them."""
    r = launch.rollout
    cfg = rollout_config(launch)
    hw = with_rollout_gpus(hw, r)
    plan = build_plan(cfg, {}, hw)
    plan.visible_gpus, plan.visible_count, plan.processes = [], 0, []
    from .model_fetch import hub_of
    from .models import config_source

    given_config = model_config is not None
    hub = hub_of(launch.fw, launch.argv, launch.file_env)
    model_config, unchecked, stop = planned_without_model(r.model, model_config, hub)
    report = CheckReport(
        launch=launch,
        cfg=cfg,
        plan=plan,
        hardware=hw,
        findings=rollout_findings(r, hw, model_config, as_error=True),
        packages=installed_packages() if packages is None else packages,
        memory_unchecked=unchecked,
        stop=stop,
    )
    report.assumptions += [config_source(r.model, given_config, hub)] if model_config is not None else []
    if unchecked is None:
        inp, report.memory_unchecked = memory_inputs(report, model_config)
        if inp is not None:
            inp = replace(inp, prompt_len=0)  # a rollout server on its own: no prompt is planned
            report.memory = [m for m in estimate(cfg, plan, inp) if m.role == 'rollout']
            for m in report.memory[:1]:
                for p in m.problems:
                    if p.get('severity', 'error') == 'error':
                        knob = r.flag('gpu_memory_utilization').lstrip('-')
                        report.findings.append(
                            Finding(ERROR, p['check'], [knob], f'GPU {m.gpu} (rollout): {p["message"]}', None)
                        )
    report.findings.sort(key=lambda f: SEVERITY_ORDER[f.severity])
    return report
