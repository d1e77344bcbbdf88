"""A Megatron-SWIFT launch's check as the report the CLI prints and ``--json`` writes (the same verdict, exit status
and keys as :class:`grpo_recipes.check.CheckReport`; the plan and memory are Megatron's own, from plan.py and
memory.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...findings import ERROR, INFO, WARNING, Finding


@dataclass
class MegatronReport:
    launch: object
    """The MegatronLaunch (reader.py)."""
    hardware: object
    findings: list[Finding] = field(default_factory=list)
    plan: dict = field(default_factory=dict)
    """plan.py's dict: world, parallel sizes, batches as ms-swift derives them."""
    phases: dict | None = None
    """memory.py's per-phase figures for one GPU, None when not predicted."""
    memory: list = field(default_factory=list)
    """The peak phase as memory.inputs.GPUMemory (one row: every GPU of a Megatron launch holds the same shard)."""
    assumptions: list = field(default_factory=list)
    memory_unchecked: str | None = None
    fixes: list = field(default_factory=list)
    fix_verified: dict | None = None
    packages: dict = field(default_factory=dict)
    speed: object = None
    """speed.py's SpeedEstimate (docs/throughput.md), None with speed_unchecked saying why."""
    speed_unchecked: str | None = None

    @property
    def ok(self) -> bool:
        return not any(f.severity == ERROR for f in self.findings)

    @property
    def fits(self) -> bool | None:
        return all(m.fits for m in self.memory) if self.memory else None

    @property
    def unchecked(self) -> str | None:
        return f'memory not checked: {self.memory_unchecked}' if self.memory_unchecked else None

    def exit_code(self, allow_unchecked: bool = False) -> int:
        if not self.ok:
            return 1
        return 1 if self.unchecked and not allow_unchecked else 0

    def counts(self) -> dict[str, int]:
        return {s: sum(f.severity == s for f in self.findings) for s in (ERROR, WARNING, INFO)}

    def summary_lines(self) -> list[str]:
        """The plan and the memory by phase, one line each (the console's tables for ms-swift/TRL launches)."""
        p, par = self.plan, self.plan.get('parallel', {})
        out = [
            f'Megatron-SWIFT GRPO (ms-swift arguments of {self.launch.snapshot})',
            f'processes       {self.launch.nnodes} node(s) x {self.launch.nproc_per_node} = world '
            f'{p.get("world_size")}',
            'parallel        ' + ', '.join(f'{k.upper()} {v}' for k, v in par.items() if v is not None),
            f'batch           micro {p.get("micro_batch")} completions per DP rank, global '
            f'{p.get("global_batch")} per optimizer step ({p.get("num_microbatches")} micro-batches)',
            f'rollout         generation batch {p.get("generation_batch")} completions = '
            f'{p.get("prompts_per_rollout")} prompts (steps_per_generation {p.get("steps_per_generation")}); '
            f'{p.get("prompts_per_optimizer_step")} prompts per optimizer step',
        ]
        if self.phases:
            m = self.phases
            out.append(
                'memory per GPU  '
                + ', '.join(f'{k} {v:.1f}' for k, v in m['phases'].items())
                + f' GiB of {m["capacity_gib"]:.1f} (peak {m["peak_phase"]}, '
                f'{m["peak_gib"] / m["capacity_gib"]:.0%})'
            )
            terms = m['terms'][m['peak_phase']]
            out.append(
                '  peak terms    '
                + ', '.join(f'{k} {v:.1f}' for k, v in sorted(terms.items(), key=lambda kv: -kv[1]) if v)
            )
        from ...speed.report import speed_lines

        return out + speed_lines(self)

    def to_dict(self) -> dict:
        return {
            'framework': 'megatron',
            'ok': self.ok,
            'memory_unchecked': self.memory_unchecked,
            'unchecked': self.unchecked,
            'assumptions': self.assumptions,
            'counts': self.counts(),
            'findings': [f.to_dict() for f in self.findings],
            'plan': self.plan,
            'fits': self.fits,
            'memory': [m.to_dict() for m in self.memory],
            'memory_phases': self.phases,
            'fixes': [],
            'fix_verified': self.fix_verified,
            'hardware': self.hardware.to_dict(),
            'launch': {
                'source': self.launch.source,
                'config_file': self.launch.config_file,
                'argv': self.launch.argv,
                'ms_swift_snapshot': self.launch.snapshot,
                'nproc_per_node': self.launch.nproc_per_node,
                'nnodes': self.launch.nnodes,
            },
            **_speed_json(self),
        }


def check_report(
    launch,
    hw,
    packages: dict | None = None,
    model_config: dict | None = None,
    data_stats: dict | None = None,
    completion_mean: int | None = None,
    **_ignored,
) -> MegatronReport:
    """check() of one launch, as a report (``data_stats``' longest prompt bounds the prompts planned)."""
    from . import as_gpu_memory, check

    packages = packages or {}
    prompt_len = None
    if data_stats:
        prompt_len = data_stats.get('max_prompt_tokens') or data_stats.get('prompt_max')
    findings, plan, mem = check(launch, hw, model_config, packages.get('vllm'), prompt_len)
    assumptions = [launch.snapshot_note] if launch.snapshot_note else []
    if mem is None:
        cap = hw.capacity()[1] if hw is not None else None
        why = (
            'GPU model unknown: pass --gpu-type or --gpu-mem'
            if not cap
            else 'no config.json for the model, or a layout error above'
        )
    else:
        why = None
        if prompt_len is None:
            assumptions.append(
                'prompts planned at their bound (max_length - max_completion_length, or the model '
                "context); --data-stats gives the data's longest"
            )
    rep = MegatronReport(
        launch=launch,
        hardware=hw,
        findings=findings,
        plan=plan,
        phases=mem,
        memory=[as_gpu_memory(mem)] if mem else [],
        assumptions=assumptions,
        memory_unchecked=why,
        packages=packages,
    )
    if getattr(launch, 'rollout', None) is not None:
        _with_rollout_server(rep, hw, packages)
    if launch.args.get('rlhf_type') == 'grpo':
        from .speed import predict

        rep.speed, rep.speed_unchecked = predict(launch, hw, model_config, plan, mem, data_stats, completion_mean)
    return rep


def _speed_json(rep) -> dict:
    from ...speed.report import speed_json

    return speed_json(rep)


def _with_rollout_server(rep: MegatronReport, hw, packages: dict) -> None:
    """Server mode: the ``swift rollout`` server beside the trainer checked as a rollout server on its own is
    (its arguments, GPUs and vLLM start-up), its findings and GPUs added to the trainer's."""
    from ...check import check_rollout
    from ...findings import SEVERITY_ORDER
    from ...launch import Launch

    roll = rep.launch.rollout
    server = Launch(argv=[], env=dict(roll.env or {}), config_file=roll.source, framework=roll.framework)
    server.kind, server.rollout = 'rollout', roll
    got = check_rollout(server, hw, packages=packages)
    rep.findings = sorted(rep.findings + got.findings, key=lambda f: SEVERITY_ORDER[f.severity])
    rep.memory += got.memory
    rep.assumptions += [f'rollout server ({roll.source}): {a}' for a in got.assumptions]
    if got.memory_unchecked and not rep.memory_unchecked:
        rep.memory_unchecked = f'rollout server: {got.memory_unchecked}'
