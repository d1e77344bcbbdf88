"""PyTorch's allocator settings: the ``PYTORCH_ALLOC_CONF`` / ``PYTORCH_CUDA_ALLOC_CONF`` string, parsed as torch parses it.

c10/core/AllocatorConfig.cpp (``AllocatorConfig::lexArgs``, ``parseArgs``; torch 2.13's c10/core/AllocatorConfig.h
says ``PYTORCH_ALLOC_CONF`` is the primary name and ``PYTORCH_CUDA_ALLOC_CONF`` is kept with lower priority).
Read and used by the simulator (``allocator.py``): ``expandable_segments``, ``max_split_size_mb`` (>= 20),
``max_non_split_rounding_mb`` (>= 20). Read, checked and listed as not modelled: ``garbage_collection_threshold``
(it only acts under a per-process memory fraction), ``roundup_power2_divisions``, ``backend:cudaMallocAsync`` (a
different allocator), the pinned-memory and locking options. Anything else torch refuses
("Unrecognized CachingAllocator option"), and so does this parser, in one line with the fix.
"""
from __future__ import annotations

from dataclasses import dataclass, field

MiB = 2 ** 20
K_LARGE_BUFFER = 20 * MiB  # kLargeBuffer: the smallest max_split_size_mb / max_non_split_rounding_mb allowed

# Options parseArgs accepts that this model does not act on (c10/core/AllocatorConfig.cpp, CUDAAllocatorConfig.h keys)
UNMODELLED_KEYS = set('''garbage_collection_threshold roundup_power2_divisions backend large_segment_size_mb
release_lock_on_cudamalloc release_lock_on_hipmalloc pinned_use_cuda_host_register pinned_use_hip_host_register
pinned_num_register_threads pinned_use_background_threads pinned_reserve_segment_size_mb pinned_free_catch_all
pinned_max_round_threshold pinned_max_cached_size graph_capture_record_stream_reuse per_process_memory_fraction
throw_on_cudamalloc_oom'''.split())
ENV_NAMES = ('PYTORCH_ALLOC_CONF', 'PYTORCH_CUDA_ALLOC_CONF')


class AllocConfError(ValueError):
    """A PYTORCH_(CUDA_)ALLOC_CONF string torch would refuse; the message is one line with the fix."""


@dataclass
class AllocConf:
    expandable_segments: bool = False
    """``expandable_segments:True``: one growing segment per stream and pool (see the module docstring)."""
    max_split_size: int | None = None
    """``max_split_size_mb`` in bytes; None is torch's default (SIZE_MAX: every block may be split)."""
    max_non_split_rounding: int = K_LARGE_BUFFER
    """``max_non_split_rounding_mb`` in bytes: how much larger than an oversize request a reused block may be."""
    unmodelled: list = field(default_factory=list)
    """Options that were read but that the simulator does not act on, as ``key:value``."""
    text: str = ''
    """The configuration string as given ('' for torch's defaults)."""


def _lex(text: str) -> list[str]:
    """AllocatorConfig::lexArgs: ``,`` ``:`` ``[`` ``]`` are tokens of their own; spaces are dropped."""
    out, buf = [], ''
    for ch in text:
        if ch in ',:[]':
            if buf:
                out.append(buf)
                buf = ''
            out.append(ch)
        elif ch != ' ':
            buf += ch
    if buf:
        out.append(buf)
    return out


def parse_alloc_conf(text: str | None, source: str = 'PYTORCH_CUDA_ALLOC_CONF') -> AllocConf:
    """The allocator settings a configuration string selects; AllocConfError (one line) where torch would refuse."""
    conf = AllocConf(text=text or '')
    tokens = _lex(text or '')

    def bad(why: str, fix: str) -> AllocConfError:
        return AllocConfError(f'{source}={text!r}: {why}; {fix}')

    i = 0
    while i < len(tokens):
        key = tokens[i]
        if key in ',:[]':
            raise bad(f'unexpected {key!r}', 'write key:value pairs separated by commas, e.g. expandable_segments:True')
        if i + 2 >= len(tokens) or tokens[i + 1] != ':':
            raise bad(f'expected ":" and a value after {key}', f'write {key}:VALUE')
        if tokens[i + 2] == '[':  # roundup_power2_divisions:[64:8,>:1]
            j = tokens.index(']', i + 2) if ']' in tokens[i + 2:] else -1
            if j < 0:
                raise bad(f'{key}: "[" without "]"', 'close the list')
            value = ''.join(tokens[i + 2:j + 1])
            i = j + 1
        else:
            value = tokens[i + 2]
            i += 3
        if key == 'expandable_segments':
            if value not in ('True', 'False'):  # torch 2.13 refuses 'true' too (ConfigTokenizer)
                raise bad('Expected a single True/False argument for expandable_segments',
                          'use expandable_segments:True or expandable_segments:False')
            conf.expandable_segments = value == 'True'
        elif key in ('max_split_size_mb', 'max_non_split_rounding_mb'):
            if not value.isdigit():
                raise bad(f'{key} takes a whole number of MiB, got {value!r}', f'e.g. {key}:128')
            if int(value) < K_LARGE_BUFFER // MiB:
                raise bad(f'CachingAllocator option {key} too small, must be >= {K_LARGE_BUFFER // MiB}',
                          f'use {key}:{K_LARGE_BUFFER // MiB} or more')
            if key == 'max_split_size_mb':
                conf.max_split_size = int(value) * MiB
            else:
                conf.max_non_split_rounding = int(value) * MiB
        elif key == 'garbage_collection_threshold':
            try:
                ok = 0.0 < float(value) < 1.0
            except ValueError:
                ok = False
            if not ok:
                raise bad('garbage_collect_threshold is invalid, set it in (0.0, 1.0)',
                          'e.g. garbage_collection_threshold:0.8')
            conf.unmodelled.append(f'{key}:{value}')
        elif key == 'backend':
            if value not in ('native', 'cudaMallocAsync'):
                raise bad('Unknown allocator backend, options are native and cudaMallocAsync', 'use backend:native')
            if value != 'native':
                conf.unmodelled.append(f'{key}:{value}')
        elif key in UNMODELLED_KEYS:
            conf.unmodelled.append(f'{key}:{value}')
        else:
            raise bad(f'Unrecognized CachingAllocator option: {key}',
                      'check the spelling (expandable_segments, max_split_size_mb, garbage_collection_threshold, ...)')
        if i < len(tokens):
            if tokens[i] != ',':
                raise bad(f'expected "," after {key}:{value}', 'separate options with commas')
            i += 1
    return conf


def conf_from_env(env: dict) -> tuple[AllocConf, str]:
    """(settings, which variable set them) from an environment: PYTORCH_ALLOC_CONF first, else the CUDA name."""
    for name in ENV_NAMES:
        if env.get(name) not in (None, ''):
            return parse_alloc_conf(env[name], name), name
    return AllocConf(), ''
