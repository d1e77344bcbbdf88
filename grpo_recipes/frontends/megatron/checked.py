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
    stop: str | None = None
    """A ``--model`` path missing on this machine (CheckReport.stop): planned without memory, then this line; exit 2."""

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
        if self.stop:
            return 2
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

    @property
    def model_name(self) -> str | None:
        """The model the launch trains (what a recipe header's ``planned from`` line names)."""
        return self.launch.args.get('model')

    def recipe_facts(self) -> dict:
        """What ``grpo-recipes ls`` shows of a recipe run by ``megatron rlhf``: model, mode, tuner, nodes."""
        from .plan import tuner

        a = self.launch.args
        par = self.plan.get('parallel', {})
        layout = ' '.join(f'{k.upper()}{v}' for k, v in par.items() if k in ('tp', 'pp', 'ep') and v and v > 1)
        return {
            'model': a.get('model'),
            'mode': (a.get('vllm_mode') or 'vllm') if a.get('use_vllm') else 'hf-generate',
            'tuner': f'{tuner(a)} {layout}'.strip(),
            'nodes': self.launch.nnodes,
        }

    def lengths(self) -> dict:
        """max_length, max_completion_length, vllm_max_model_len and truncation_strategy as the launch sets them."""
        a = self.launch.args
        keys = ('max_length', 'max_completion_length', 'vllm_max_model_len', 'truncation_strategy')
        return {k: a.get(k) for k in keys}

    def _eval_text(self) -> str:
        """The eval batch as Megatron-SWIFT forms it: with a val_dataset, every eval_steps (default save_steps) it
        runs eval_iters iterations of global_batch_size completions in groups of num_generations_eval
        (swift/megatron/arguments/megatron_args.py: eval_iters = val rows x num_generations / global_batch_size);
        empty without a val_dataset."""
        a = self.launch.args
        if not a.get('val_dataset'):
            return ''
        g = a.get('global_batch_size') or 0
        ng = a.get('num_generations_eval') or a.get('num_generations') or 1
        every = a.get('eval_steps') or a.get('save_steps')
        return f'; eval every {every} steps: {g} completions = {g / ng:g} prompts x {ng} per eval iteration'

    def plan_lines(self) -> list[str]:
        """A recipe header's plan lines (recipes.plan_block; each starts as recipe_header.GENERATED says): the
        hardware and layout, the batch, the lengths, the peak per GPU and the colocated engine's KV cache."""
        a, p, hw = self.launch.args, self.plan, self.hardware
        par = p.get('parallel', {})
        layout = ', '.join(f'{k.upper()} {v}' for k, v in par.items() if v is not None)
        nodes = f'{self.launch.nnodes} nodes x ' if self.launch.nnodes > 1 else ''
        lines = [
            f'# hardware: {nodes}{hw.gpus}x {hw.gpu_type}; world {p.get("world_size")}; Megatron {layout}; vLLM '
            f'{a.get("vllm_mode")} TP {a.get("vllm_tensor_parallel_size") or 1}, util '
            f'{a.get("vllm_gpu_memory_utilization")}, sleep {a.get("sleep_level") or 0}',
            f'# batch: micro {p.get("micro_batch")} x {p.get("num_microbatches")} micro-batches x DP {par.get("dp")} = '
            f'{p.get("global_batch")} completions = {p.get("prompts_per_optimizer_step")} prompts x '
            f'{p.get("num_generations")} per step; rollout {p.get("generation_batch")} completions '
            f'(steps_per_generation {p.get("steps_per_generation")})' + self._eval_text(),
            f'# lengths: prompt <= {a.get("max_length")} (grpo-data stats, GSM8K p99.9 = 216), completion <= '
            f'{a.get("max_completion_length")}, vllm_max_model_len {a.get("vllm_max_model_len")}',
        ]
        if self.phases:
            m = self.phases
            terms = sorted(m['terms'][m['peak_phase']].items(), key=lambda kv: -kv[1])[:4]
            frac = m['peak_gib'] / m['capacity_gib']
            lines.append(
                f'# GPU all {p.get("world_size")} (train+vllm): peak {m["peak_gib"]:.1f} of {m["capacity_gib"]:.1f} '
                f'GiB ({frac:.0%}, headroom {100 * (1 - frac):.0f}%) in {m["peak_phase"]}: '
                + ', '.join(f'{k} {v:.1f}' for k, v in terms)
            )
            v = m.get('vllm') or {}
            if v.get('kv_tokens'):
                lines.append(
                    f'#   vLLM KV {v.get("kv_cache", 0):.1f} GiB = {v["kv_tokens"]:,} tokens; a rollout needs '
                    f'{v.get("rollout_tokens", 0):,}'
                )
        from ...speed.report import header_line  # the predicted step time, as the other recipes' headers give it

        speed = header_line(self)
        if speed:
            lines.append(speed)
        return lines

    def to_dict(self) -> dict:
        return {
            'framework': 'megatron',
            'ok': self.ok,
            'memory_unchecked': self.memory_unchecked,
            'unchecked': self.unchecked,
            'stop': self.stop,
            'assumptions': self.assumptions,
            'counts': self.counts(),
            'findings': [f.to_dict() for f in self.findings],
            'config': dict(self.launch.args),
            'plan': self.plan,
            'fits': self.fits,
            'memory': [m.to_dict() for m in self.memory],
            'memory_phases': self.phases,
            'fixes': [f.to_dict() for f in self.fixes],
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
    fixes = []
    if mem is not None:
        from . import _model_config
        from .search import search, with_fixes

        cfg = _model_config(launch, model_config)[0]
        fixes = search(launch, hw, cfg, packages.get('vllm'), prompt_len) if cfg is not None else []
        findings = with_fixes(findings, fixes, launch)
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
    memory = [as_gpu_memory(mem)] if mem else []
    if any(f.rule == 'megatron.oom-if-long-prompts' for f in findings):
        for m in memory:
            m.verdict = 'OOM if long'  # the table's word for an OOM only long prompts reach (memory.inputs)
    rep = MegatronReport(
        launch=launch,
        hardware=hw,
        findings=findings,
        plan=plan,
        phases=mem,
        memory=memory,
        assumptions=assumptions,
        memory_unchecked=why,
        packages=packages,
        fixes=fixes,
    )
    if model_config is None:  # a --model path missing here: planned without memory, then the one line (exit 2)
        from ...model_source import MissingLocalPath
        from ...models import require_here

        try:
            require_here(str(launch.args.get('model') or ''))
        except MissingLocalPath as e:
            rep.stop = str(e)
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


def snapshot_parse(launch, timeout, python, trl_version, model_config):
    """The validator of Megatron-SWIFT's front end: the launch read against its release's ``MegatronRLHFArguments``
    snapshot (reader.py: HfArgumentParser's flag semantics; unknown and renamed names). The real class imports
    megatron-core, which needs GPUs and CUDA builds, so it is not run here (tests/test_megatron_snapshot.py holds
    the snapshot to the real class's fields)."""
    from ...realparse import RealParseResult

    problems = [f'unknown argument {u!r}' for u in launch.unknown] + [
        f'{r["old"]} was renamed {r["new"]}' for r in launch.renamed
    ]
    return RealParseResult(
        ok=not problems,
        error_type='ValueError' if problems else None,
        message='; '.join(problems) or None,
        world_size=launch.world_size,
        parser=f'ms-swift {launch.snapshot} MegatronRLHFArguments (snapshot)',
    )
