"""The CUDA caching allocator's settings as a launch sets them, and what each phase of a GRPO step runs with.

PyTorch reads the allocator's settings once, from the environment of the training process. Which name wins when
both are set depends on the torch build: the source at pytorch/pytorch@0ac7166 (``c10/core/AllocatorConfig.cpp``,
``AcceleratorAllocatorConfig::instance()``) reads ``PYTORCH_ALLOC_CONF`` first and the older
``PYTORCH_CUDA_ALLOC_CONF`` only when it is unset, but torch 2.13.0 (the installed build, git cf30153) parses
``PYTORCH_CUDA_ALLOC_CONF`` and never looks at ``PYTORCH_ALLOC_CONF`` when both are set (measured with
``torch._C._accelerator_getAllocatorSettings()``, tests/test_allocconf.py), the order its
``CUDAAllocatorConfig::instance()`` uses for the CUDA-only keys (``c10/cuda/CUDAAllocatorConfig.h``: "keep the
parsing order and logic stable"). The guard plans with torch 2.13's order and says so when both are set; torch
before 2.9 knows only ``PYTORCH_CUDA_ALLOC_CONF``. The text is ``key:value`` pairs separated by commas, lists in
``[...]``, spaces ignored (``ConfigTokenizer``); a key neither parser knows stops torch at its first CUDA
allocation ("Unrecognized key '...' in CUDA allocator config", ``c10/cuda/CUDAAllocatorConfig.cpp``
@01f9ef3).

ms-swift 4.6 changes the setting around its colocated vLLM engine (``swift/rlhf_trainers/utils.py``):
``_EXPANDABLE_SEGMENTS_SET = 'expandable_segments' in os.environ.get('PYTORCH_CUDA_ALLOC_CONF', '')`` is read once,
and ``set_expandable_segments(enable)`` does nothing unless it is true; otherwise it calls
``torch.cuda.memory._set_allocator_settings('expandable_segments:{enable}')``. ``rollout_mixin.py`` calls it with
False before creating the engine and True after (``_prepare_vllm_engine``), False before waking a sleeping engine,
and ``sleep_vllm_engine`` (utils.py) restores True after putting it back to sleep. So when the user wrote
``expandable_segments`` into ``PYTORCH_CUDA_ALLOC_CONF`` (True *or* False), the trainer runs with expandable segments
on and vLLM's memory is made with them off; when they came from ``PYTORCH_ALLOC_CONF`` ms-swift leaves everything
as set. vLLM's sleep-mode pool (``CuMemAllocator``, ``vllm/device_allocator/cumem.py``) maps its own memory and
never uses expandable segments; its constructor asserts that ``PYTORCH_CUDA_ALLOC_CONF`` does not contain
``expandable_segments:True`` ("Expandable segments are not compatible with memory pool", pytorch#147851).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Mapping

from .errors import GuardError
from .framework import Framework, as_framework

NEW_VAR = 'PYTORCH_ALLOC_CONF'
OLD_VAR = 'PYTORCH_CUDA_ALLOC_CONF'
ALLOC_VARS = (NEW_VAR, OLD_VAR)
# The variable the fix sets: the one ms-swift's set_expandable_segments looks at, so ms-swift switches it off around
# its colocated vLLM engine (and vLLM's CuMemAllocator assert sees that it is off at that moment).
FIX_VAR = OLD_VAR
FIX_VALUE = 'expandable_segments:True'

# Keys torch 2.13.0 accepts. Common keys: AcceleratorAllocatorConfig (c10/core/AllocatorConfig.h, its parse*
# functions); CUDA keys: CUDAAllocatorConfig::getKeys() (c10/cuda/CUDAAllocatorConfig.h).
COMMON_KEYS = (
    'max_split_size_mb',
    'max_non_split_rounding_mb',
    'garbage_collection_threshold',
    'roundup_power2_divisions',
    'expandable_segments',
    'large_segment_size_mb',
    'pinned_use_background_threads',
    'pinned_max_round_threshold_mb',
    'pinned_max_cached_size_mb',
)
CUDA_KEYS = (
    'backend',
    'release_lock_on_cudamalloc',
    'pinned_use_cuda_host_register',
    'release_lock_on_hipmalloc',
    'pinned_use_hip_host_register',
    'graph_capture_record_stream_reuse',
    'pinned_reserve_segment_size_mb',
    'pinned_num_register_threads',
    'per_process_memory_fraction',
    'pinned_free_catch_all',
    'throw_on_cudamalloc_oom',
)
# kLargeBuffer / kMB (c10/core/AllocatorConfig.h: kLargeBuffer 20 MiB): parseMaxSplitSize's lower bound
MIN_SPLIT_MB = 20
_BOOL_KEYS = (
    'expandable_segments',
    'pinned_use_background_threads',
    'release_lock_on_cudamalloc',
    'pinned_use_cuda_host_register',
    'release_lock_on_hipmalloc',
    'pinned_use_hip_host_register',
    'graph_capture_record_stream_reuse',
)


@dataclass(frozen=True)
class AllocConf:
    """One allocator setting, as torch parses it (only what changes how much memory is reserved)."""

    expandable_segments: bool = False
    """One growing segment per stream, mapped in 2 MiB (small pool) or 20 MiB pages, instead of a segment per
    cudaMalloc (``CUDACachingAllocator.cpp``, ``ExpandableSegment``). Default off."""
    max_split_size_mb: int | None = None
    """Blocks larger than this are never split (None: unlimited, torch's default)."""
    max_non_split_rounding_mb: int | None = None
    """A cached oversize block serves a request at most this much smaller (None: kLargeBuffer, 20 MiB)."""
    garbage_collection_threshold: float | None = None
    """Fraction of the memory limit above which cached blocks are freed before a cudaMalloc (None: off)."""
    roundup_power2_divisions: str | None = None
    """Rounding of request sizes to power-of-2 divisions, as written (None: off, only 512 B / 2 MiB rounding)."""
    backend: str = 'native'
    """``native`` (the caching allocator) or ``cudaMallocAsync`` (CUDA's pool; the keys above are then ignored)."""
    text: str = ''
    """The setting as written ('' for torch's defaults)."""
    variable: str | None = None
    """Which variable it came from (None: neither is set)."""

    @property
    def max_split_size(self) -> int | None:
        """``max_split_size_mb`` in bytes (None: unlimited), as the allocator simulator reads it."""
        return self.max_split_size_mb * 2**20 if self.max_split_size_mb else None

    @property
    def max_non_split_rounding(self) -> int:
        """``max_non_split_rounding_mb`` in bytes (CUDAAllocatorConfig: default kLargeBuffer, 20 MiB)."""
        return (self.max_non_split_rounding_mb or MIN_SPLIT_MB) * 2**20

    @property
    def unmodelled(self) -> list[str]:
        """The options set here that the allocator simulator (memory/allocator.py) does not model."""
        return [
            k
            for k, v in (
                ('garbage_collection_threshold', self.garbage_collection_threshold),
                ('roundup_power2_divisions', self.roundup_power2_divisions),
            )
            if v is not None
        ] + ([f'backend:{self.backend}'] if self.backend != 'native' else [])

    @property
    def label(self) -> str:
        if self.backend != 'native':
            return f'backend:{self.backend}'
        return 'expandable segments' if self.expandable_segments else 'default (a segment per cudaMalloc)'


DEFAULT = AllocConf()


def _bad(where: str, variable: str, text: str, problem: str, fix: str) -> GuardError:
    return GuardError(f'{where}: {variable}={text!r}: {problem}; torch stops at the first CUDA allocation. Fix: {fix}')


def _tokens(text: str) -> list[str]:
    """``ConfigTokenizer``: split at ``, : [ ]`` (kept as tokens), whitespace dropped."""
    out, buf = [], ''
    for ch in text:
        if ch in ',:[]':
            if buf:
                out.append(buf)
                buf = ''
            out.append(ch)
        elif not ch.isspace():
            buf += ch
    if buf:
        out.append(buf)
    return out


def _pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def parse(text: str, variable: str = OLD_VAR, where: str = 'environment') -> AllocConf:
    """The setting text -> AllocConf, with torch 2.13's checks; a bad value raises one line naming the variable,
    where it was set and the fix."""
    toks = _tokens(text)
    vals: dict[str, str] = {}
    i = 0
    while i < len(toks):
        key = toks[i]
        if key in ',:[]':
            raise _bad(
                where,
                variable,
                text,
                f'expected a key at {key!r}',
                'write key:value pairs separated by commas, e.g. expandable_segments:True',
            )
        if key not in COMMON_KEYS + CUDA_KEYS:
            near = difflib.get_close_matches(key, COMMON_KEYS + CUDA_KEYS, n=1)
            raise _bad(
                where,
                variable,
                text,
                f"Unrecognized key '{key}' in CUDA allocator config",
                f'use {near[0]}' if near else f'remove it (known keys: {", ".join(COMMON_KEYS[:5])}, backend)',
            )
        if i + 2 >= len(toks) or toks[i + 1] != ':' or toks[i + 2] in (',', ':', ']'):
            raise _bad(where, variable, text, f'{key} has no value', f'write {key}:VALUE')
        j = i + 2
        if toks[j] == '[':
            end = j
            while end < len(toks) and toks[end] != ']':
                end += 1
            if end == len(toks):
                raise _bad(where, variable, text, f'{key}: no closing ]', f'close the list: {key}:[...]')
            value = ''.join(toks[j : end + 1])
            j = end
        else:
            value = toks[j]
        vals[key] = value
        i = j + 1
        if i < len(toks):
            if toks[i] != ',':
                raise _bad(where, variable, text, f'expected "," after {key}:{value}', 'separate pairs with commas')
            i += 1
    for key in _BOOL_KEYS:
        if key in vals and vals[key] not in ('True', 'False'):
            raise _bad(
                where,
                variable,
                text,
                f"{key} must be True or False (torch's ConfigTokenizer::toBool is case-sensitive), got {vals[key]!r}",
                f'{key}:True',
            )
    split = vals.get('max_split_size_mb')
    if split is not None and (not split.isdigit() or int(split) < MIN_SPLIT_MB):
        raise _bad(
            where,
            variable,
            text,
            f'max_split_size_mb must be a whole number of MiB >= {MIN_SPLIT_MB}, got {split!r}',
            f'max_split_size_mb:{MIN_SPLIT_MB * 25}, or leave it out',
        )
    rounding = vals.get('max_non_split_rounding_mb')  # CUDAAllocatorConfig: the same >= kLargeBuffer check
    if rounding is not None and rounding.isdigit() and int(rounding) < MIN_SPLIT_MB:
        raise _bad(
            where,
            variable,
            text,
            f'max_non_split_rounding_mb must be a whole number of MiB >= {MIN_SPLIT_MB}, got {rounding!r}',
            f'max_non_split_rounding_mb:{MIN_SPLIT_MB}, or leave it out',
        )
    for key in ('max_non_split_rounding_mb', 'large_segment_size_mb'):
        if key in vals and not vals[key].isdigit():
            raise _bad(where, variable, text, f'{key} must be a whole number of MiB, got {vals[key]!r}', f'{key}:20')
    gc = vals.get('garbage_collection_threshold')
    if gc is not None:
        try:
            g = float(gc)
        except ValueError:
            g = -1.0
        if not 0 < g < 1:
            raise _bad(
                where,
                variable,
                text,
                f'garbage_collection_threshold must be in (0.0, 1.0), got {gc!r}',
                'garbage_collection_threshold:0.8',
            )
    rp = vals.get('roundup_power2_divisions')
    if rp is not None:
        _check_roundup(rp, where, variable, text)
    backend = vals.get('backend', 'native')
    if backend not in ('native', 'cudaMallocAsync'):
        raise _bad(
            where,
            variable,
            text,
            f'Unknown allocator backend {backend!r}, options are native and cudaMallocAsync',
            'backend:native, or leave it out',
        )
    return AllocConf(
        expandable_segments=vals.get('expandable_segments') == 'True',
        max_split_size_mb=int(split) if split else None,
        max_non_split_rounding_mb=int(vals['max_non_split_rounding_mb'])
        if 'max_non_split_rounding_mb' in vals
        else None,
        garbage_collection_threshold=float(gc) if gc else None,
        roundup_power2_divisions=rp,
        backend=backend,
        text=text,
        variable=variable,
    )


def conf_of(text: str | None, variable: str = OLD_VAR) -> AllocConf:
    """The setting a PYTORCH_(CUDA_)ALLOC_CONF string selects (torch's defaults for None or '')."""
    return parse(text, variable) if text else DEFAULT


def _check_roundup(rp: str, where: str, variable: str, text: str) -> None:
    fix = 'roundup_power2_divisions:4, or a list such as [256:1,512:2,1024:4,>:8]'
    if not rp.startswith('['):
        if not rp.isdigit() or not _pow2(int(rp)):
            raise _bad(where, variable, text, f'roundup_power2_divisions must be a power of 2, got {rp!r}', fix)
        return
    for item in rp[1:-1].split(','):
        size, _, div = item.partition(':')
        ok = (
            div.isdigit()
            and (int(div) == 0 or _pow2(int(div)))
            and (size == '>' or (size.isdigit() and _pow2(int(size))))
        )
        if not ok:
            raise _bad(
                where,
                variable,
                text,
                f'roundup_power2_divisions entry {item!r}: sizes (MiB) and divisions '
                f'must be powers of 2 (a division may be 0)',
                fix,
            )


@dataclass
class AllocSetting:
    """The allocator variables a launch's training process starts with, and where each was set."""

    values: dict[str, str] = field(default_factory=dict)
    """``PYTORCH_ALLOC_CONF`` / ``PYTORCH_CUDA_ALLOC_CONF`` -> the text the process gets."""
    sources: dict[str, str] = field(default_factory=dict)
    """The same variables -> where they were set (``run.sh:4 (export)``, ``command line (prefix)``,
    ``cfg.yaml (ENV)``, ``environment``)."""
    script_line: str | None = None
    """``run.sh:12`` when the launch is a launcher script's training command (a fix is then an ``export`` line
    above it); None for a command line or a config file."""

    @property
    def conf(self) -> AllocConf:
        """What torch 2.13 parses at start-up: ``PYTORCH_CUDA_ALLOC_CONF`` if set, else ``PYTORCH_ALLOC_CONF``
        (see the module docstring for builds that read the new name first)."""
        var = OLD_VAR if OLD_VAR in self.values else NEW_VAR if NEW_VAR in self.values else None
        if var is None:
            return DEFAULT
        return parse(self.values[var], var, self.sources.get(var, 'environment'))

    @property
    def notes(self) -> list[str]:
        """What the plan could not settle from the launch alone."""
        out = []
        if NEW_VAR in self.values and OLD_VAR in self.values and self.values[NEW_VAR] != self.values[OLD_VAR]:
            out.append(
                f'both {OLD_VAR} ({self.sources[OLD_VAR]}) and {NEW_VAR} ({self.sources[NEW_VAR]}) are set and '
                f'differ: planned with {OLD_VAR}, which torch 2.13 reads first; torch builds that read '
                f'{NEW_VAR} first (pytorch@0ac7166) use the other; set only one'
            )
        elif NEW_VAR in self.values and OLD_VAR not in self.values:
            out.append(f'{NEW_VAR} is read by torch 2.9 and later only; earlier torch uses its defaults')
        return out

    @property
    def swift_toggles(self) -> bool:
        """ms-swift's ``_EXPANDABLE_SEGMENTS_SET``: 'expandable_segments' appears in PYTORCH_CUDA_ALLOC_CONF."""
        return 'expandable_segments' in self.values.get(OLD_VAR, '')

    @property
    def source(self) -> str | None:
        """Where the setting torch uses was written (None: not set)."""
        var = self.conf.variable
        return self.sources.get(var) if var else None

    def with_value(self, variable: str, text: str, source: str) -> 'AllocSetting':
        return AllocSetting({**self.values, variable: text}, {**self.sources, variable: source}, self.script_line)

    def to_dict(self) -> dict:
        c = self.conf
        return {
            'values': self.values,
            'sources': self.sources,
            'allocator': c.label,
            'variable': c.variable,
            'swift_toggles': self.swift_toggles,
        }


@dataclass(frozen=True)
class Phases:
    """The allocator each phase of a launch runs with."""

    trainer: AllocConf
    """The training step's allocations (forward, backward, optimizer)."""
    vllm: AllocConf | None
    """The colocated vLLM engine's torch-allocated memory (weights, KV cache without sleep mode); None: no vLLM in
    the training process."""
    vllm_pool: bool = False
    """vLLM's memory lives in its sleep-mode CuMemAllocator pool, which never uses expandable segments."""
    notes: tuple[str, ...] = ()


def phases(
    setting: AllocSetting | None, framework: Framework | str, use_vllm: bool, vllm_mode: str | None, sleep_level: int
) -> Phases:
    """Effective allocator for the trainer phase and for the colocated vLLM phase (see the module docstring).
    ``framework``: whether it toggles expandable segments around vLLM itself (``Framework.expandable_toggle_from``)."""
    toggles = as_framework(framework).expandable_toggle_from is not None
    setting = setting or AllocSetting()
    conf = setting.conf
    colocate = use_vllm and vllm_mode == 'colocate'
    if not colocate:
        return Phases(conf, None, notes=tuple(setting.notes))
    pool = sleep_level > 0
    notes: list[str] = list(setting.notes)
    if toggles and setting.swift_toggles:
        trainer = replace(conf, expandable_segments=True)
        if not conf.expandable_segments:
            notes.append(
                f'{OLD_VAR} names expandable_segments, so ms-swift turns them on for training after creating '
                f'the vLLM engine (set_expandable_segments(True), swift/rlhf_trainers/rollout_mixin.py), '
                f'even though the value written is False'
            )
        notes.append(
            'ms-swift turns expandable segments off while it creates and wakes the vLLM engine '
            '(set_expandable_segments, swift/rlhf_trainers/utils.py)'
        )
        return Phases(trainer, replace(conf, expandable_segments=False), pool, tuple(notes))
    if conf.expandable_segments:
        if toggles:
            notes.append(
                f'expandable segments come from {conf.variable}, which ms-swift does not look at: they stay '
                f'on while vLLM is created'
                + (f' beside its sleep-mode memory pool (pytorch#147851); set {OLD_VAR} instead' if pool else '')
            )
        elif pool:
            notes.append(
                "nothing turns expandable segments off around vLLM's sleep-mode memory pool: vLLM's "
                'CuMemAllocator refuses them (vllm/device_allocator/cumem.py)'
            )
    return Phases(conf, conf, pool, tuple(notes))


def read_setting(
    environ: Mapping[str, str],
    command_env: Mapping[str, str] | None = None,
    command_sources: Mapping[str, str] | None = None,
    file_env: Mapping[str, str] | None = None,
    file_source: str | None = None,
    script_line: str | None = None,
) -> AllocSetting | None:
    """The allocator variables the training process gets: the command's own (``VAR=v cmd``, ``env VAR=v cmd``, a
    script's ``export``) over the caller's environment, and a YAML ``ENV:`` block only where neither sets the
    variable (ms-swift's ``parse_yaml_args``: the environment wins). ``accelerate launch`` hands its children a
    copy of its own environment (accelerate/utils/launch.py, ``os.environ.copy()``); its config file has no
    environment section (accelerate/commands/config/config_args.py ``ClusterConfig``), so for TRL launches the
    same rule applies. Every value is parsed here, so a bad one stops the check with one line. None: unset, and
    not a launcher script."""
    setting = AllocSetting(script_line=script_line)
    command_env = command_env or {}
    command_sources = command_sources or {}
    for var in ALLOC_VARS:
        if var in command_env:
            setting = setting.with_value(var, command_env[var], command_sources.get(var, 'command line (prefix)'))
        elif var in environ:
            setting = setting.with_value(var, environ[var], 'environment')
        elif file_env and var in file_env:
            setting = setting.with_value(var, file_env[var], f'{file_source or "config"} (ENV)')
    if not setting.values:
        return setting if script_line else None
    for var, text in setting.values.items():
        parse(text, var, setting.sources[var])
    setting.conf  # noqa: B018  (parses the pair as torch combines them)
    return setting


def case_setting(case: Mapping) -> AllocSetting | None:
    """The allocator variables a calibration case states in its ``environ`` (``null``: stated as unset); for
    ``calibrate`` to plan a case with the allocator it ran with (``phases`` on the case's config)."""
    env = {k: v for k, v in (case.get('environ') or {}).items() if k in ALLOC_VARS and v is not None}
    return read_setting({}, env, {k: f'case {case.get("id")} environ' for k in env}) if env else None
