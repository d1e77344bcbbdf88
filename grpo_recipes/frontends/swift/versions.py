"""Which ms-swift release a ``swift rlhf`` launch is judged against, and what changed between 3.10 and 4.x.

A launch is read with the argument snapshot of the ms-swift the user runs: the installed one, or
``--swift-version V``. Two snapshots ship, both written by ``scripts/gen_swift_snapshot.py`` from ms-swift's own
``HfArgumentParser([RLHFArguments])``: 4.6 (``swift_args_snapshot.json``, checked against the installed ms-swift
by tests/test_snapshot.py) and 3.10 (``swift_args_snapshot_3.10.json``, generated under ms-swift 3.10.3,
transformers 4.57.1, trl 0.24.0; tests/test_swift_versions.py regenerates it where ms-swift 3.10 is installed).
Every 4.x release is read with the 4.6 snapshot and every 3.x (and older) release with the 3.10 one; the verdict
says so when the release is not the snapshot's own line.

What changed between 3.10 and 4.x where it changes the plan (read in both releases' code):

- ``--train_type`` became ``--tuner_type`` (4.0, no alias);
- ``vllm_mode``: 3.10 defaults it to ``colocate`` and then sets it from the server address
  (swift/llm/argument/rlhf_args.py ``_init_rollout``: ``server`` when ``vllm_server_host``/``vllm_server_base_url``
  is given, else ``colocate``); 4.6 has no default and stops with "vllm_mode is required when use_vllm is true"
  (swift/arguments/rlhf_args.py);
- ``vllm_max_num_seqs``: 256 in 3.10 (swift/trainers/arguments.py ``VllmArguments``), None in 4.6 (vLLM's own
  default then applies).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from ... import swift_args
from ...errors import GuardError
from ...versions import version_tuple

SNAPSHOTS = {(4,): swift_args.SNAPSHOT_FILE, (3,): 'swift_args_snapshot_3.10.json'}
"""Snapshot file by major version; older majors use the oldest snapshot."""

# Names whose validity depends on the release: (first release without it, the replacement, why).
# Sources: ms-swift's release notes for 3.6 (vllm_device and num_infer_workers replaced by vllm_mode), 3.8 (the
# unprefixed vLLM aliases removed) and 4.0 (train_type renamed tuner_type); the two snapshots agree with them.
REMOVED = {
    'train_type': ((4, 0), 'tuner_type', 'renamed in ms-swift 4.0; there is no alias'),
    'vllm_device': ((3, 6), 'vllm_mode', 'removed in ms-swift 3.6: use --vllm_mode colocate, or --vllm_mode server '
                                         'with `swift rollout` on its own GPUs'),
    'num_infer_workers': ((3, 6), 'vllm_mode', 'removed in ms-swift 3.6: use --vllm_mode colocate or server'),
    'gpu_memory_utilization': ((3, 8), 'vllm_gpu_memory_utilization', 'the unprefixed alias was removed in 3.8'),
    'tensor_parallel_size': ((3, 8), 'vllm_tensor_parallel_size', 'the unprefixed alias was removed in 3.8'),
    'data_parallel_size': ((3, 8), 'vllm_data_parallel_size', 'the unprefixed alias was removed in 3.8'),
    'enforce_eager': ((3, 8), 'vllm_enforce_eager', 'the unprefixed alias was removed in 3.8'),
    'max_num_seqs': ((3, 8), 'vllm_max_num_seqs', 'the unprefixed alias was removed in 3.8'),
}
INTRODUCED = {'tuner_type': ((4, 0), 'train_type', 'introduced in ms-swift 4.0 (renamed from --train_type)')}
"""4.x names a 3.x release does not know: (first release with it, the 3.x name, why)."""

VLLM_MAX_NUM_SEQS_3 = 256
"""ms-swift 3.10's default vllm_max_num_seqs (swift/trainers/arguments.py VllmArguments)."""


def _vt(v):
    return version_tuple(v)


def snapshot_for(version: str | None) -> tuple[str, str, str | None]:
    """(snapshot file, the snapshot's ms-swift version, a note when ``version`` is not that release's line)."""
    vt = _vt(version)
    major = (vt[0],) if vt else (4,)
    name = SNAPSHOTS.get(major) or SNAPSHOTS[min(SNAPSHOTS)]
    snap_v = swift_args.snapshot(name)['ms_swift_version']
    note = None
    if vt is not None and vt[:2] != _vt(snap_v)[:2]:
        note = (f'ms-swift {version}: its arguments are checked against ms-swift {snap_v}\'s (the snapshot of the '
                f'nearest release this package ships); names that changed in between are judged by release')
    return name, snap_v, note


def is_3x(version: str | None) -> bool:
    vt = _vt(version)
    return vt is not None and vt < (4,)


def config_from_argv(argv: list[str], version: str | None):
    """(GRPOConfig, remaining, notes): the launch as the given ms-swift release reads it. 4.x: exactly
    ``GRPOConfig.from_argv``. 3.x: split by the 3.10 parser (its unknowns are the remaining), then read into the
    4.x-named config (``--train_type`` -> tuner_type) with 3.10's vllm_mode and vllm_max_num_seqs semantics."""
    from ...config import GRPOConfig
    name, _, note = snapshot_for(version)
    notes = [note] if note else []
    if name == swift_args.SNAPSHOT_FILE:
        cfg, remaining = GRPOConfig.from_argv(argv)
        return cfg, remaining, notes
    _, remaining = swift_args.parse(argv, name)
    vt = _vt(version)
    keep = []
    for tok in remaining:  # names the judged release still had (e.g. --num_infer_workers before 3.6)
        key = tok[2:].split('=', 1)[0].replace('-', '_') if tok.startswith('--') else None
        if key in REMOVED and vt is not None and vt < REMOVED[key][0]:
            how = ('vLLM is placed as that release placed it (in_trainer_vllm)' if key in ('vllm_device', 'num_infer_workers')
                   else 'its effect is not modelled here')
            notes.append(f'--{key}: an argument of ms-swift {version} (removed in '
                         f'{".".join(map(str, REMOVED[key][0]))}); {how}')
            continue
        keep.append(tok)
    renamed = []
    for tok in argv:
        head, eq, val = tok.partition('=')
        if head in ('--train_type', '--train-type'):
            tok = '--tuner_type' + eq + val
        renamed.append(tok)
    cfg, _ = GRPOConfig.from_argv(renamed)
    changes: dict = {}
    if cfg.use_vllm:  # swift/llm/argument/rlhf_args.py _init_rollout (3.10)
        changes['vllm_mode'] = 'server' if (cfg.vllm_server_host or cfg.vllm_server_base_url) else 'colocate'
    if cfg.vllm_max_num_seqs is None:
        changes['vllm_max_num_seqs'] = VLLM_MAX_NUM_SEQS_3
    cfg = replace(cfg, **changes)
    return cfg, keep, notes


@dataclass(frozen=True)
class UnknownArgument:
    """A flag the judged ms-swift release's parser leaves in ``remaining_argv`` (the interface of
    swift_args.UnknownArgument, with the release named)."""
    flag: str
    suggestion: str | None
    reason: str
    version: str

    def describe(self) -> str:
        if self.suggestion:
            return f'{self.flag}: unknown to ms-swift {self.version}; use {self.suggestion} ({self.reason})'
        return f'{self.flag}: unknown to ms-swift {self.version} ({self.reason})'


def explain(remaining: list[str], version: str | None) -> list[UnknownArgument]:
    """One entry per unknown flag, with the replacement the judged release has."""
    name, snap_v, _ = snapshot_for(version)
    if name == swift_args.SNAPSHOT_FILE:
        return swift_args.explain_remaining(remaining)  # 4.x: the existing wording, unchanged
    shown = version or snap_v
    names = sorted({f[2:].replace('-', '_') for a in swift_args.snapshot(name)['arguments'] for f in a['flags']})
    out = []
    for token in remaining:
        if not token.startswith('--'):
            continue
        flag = token.split('=', 1)[0]
        key = flag[2:].replace('-', '_')
        if key in INTRODUCED:
            _, old, why = INTRODUCED[key]
            out.append(UnknownArgument(flag, f'--{old}', why, shown))
        elif key in REMOVED:
            _, new, why = REMOVED[key]
            out.append(UnknownArgument(flag, f'--{new}' if new in names else None, why, shown))
        else:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
            out.append(UnknownArgument(flag, f'--{close[0]}' if close else None,
                                       'closest known argument' if close else 'no similar argument', shown))
    return out


def checked_packages(version: str, packages: dict) -> dict:
    """The packages a check sees with ``--swift-version V``: the installed ones, with ms-swift at V."""
    if _vt(version) is None:
        raise GuardError(f'--swift-version {version!r}: not a version (e.g. 3.10.3)')
    return {**packages, 'ms-swift': version}


def require_installed(version: str) -> None:
    """``validate`` runs the installed ms-swift's own parser: another release cannot be parsed here."""
    import importlib.metadata as md
    try:
        have = md.version('ms-swift')
    except md.PackageNotFoundError:
        have = None
    if have != version and (have is None or not have.startswith(version.rstrip('.') + '.')):
        raise GuardError(f'--swift-version {version}: validate runs the installed ms-swift\'s own parser, and '
                         f'ms-swift {have or "(none)"} is installed; install ms-swift=={version} (e.g. in a venv) and '
                         f'run grpo-guard from there, or drop --swift-version (check judges {version} from its '
                         f'argument snapshot)')


IN_TRAINER_UNTIL = (3, 6)
"""ms-swift before 3.6 ran vLLM inside the training processes (num_infer_workers, vllm_device; no --vllm_mode)."""


def _num_infer_workers(argv: list[str]) -> int:
    for i, tok in enumerate(argv):
        head, eq, val = tok.partition('=')
        if head in ('--num_infer_workers', '--num-infer-workers'):
            v = val if eq else (argv[i + 1] if i + 1 < len(argv) else '')
            return int(v) if v.isdigit() else 1
    return 1  # swift/trainers/arguments.py (3.4.1): num_infer_workers: int = 1


def in_trainer_vllm(cfg, launch, version: str | None) -> tuple:
    """ms-swift < 3.6 without a rollout server, as 3.4.1 places vLLM (swift/llm/argument/rlhf_args.py
    ``_check_grpo``; swift/trainers/rlhf_trainer/grpo_trainer.py): visible GPUs == num_infer_workers is colocate
    mode (every process trains and samples); otherwise "async mode", where the visible GPUs must be NPROC_PER_NODE +
    num_infer_workers and vLLM (``vllm_device auto``) takes the last num_infer_workers of them. Those GPUs are then
    planned like a rollout server's at the launch's own vllm_gpu_memory_utilization. Returns (the config, the launch with
    the layout in its ``trl``: a copy, ``launch`` is left as it is, assumptions)."""
    vt = _vt(version)
    if not (vt is not None and vt < IN_TRAINER_UNTIL and cfg.use_vllm and not cfg.vllm_server_host
            and not cfg.vllm_server_base_url):
        return cfg, launch, []
    niw = _num_infer_workers(launch.argv)
    raw = launch.env.get('CUDA_VISIBLE_DEVICES', '')
    vis = [int(x) for x in raw.split(',')] if raw.replace(',', '').strip().isdigit() else None
    nproc = int(launch.env['NPROC_PER_NODE']) if str(launch.env.get('NPROC_PER_NODE', '')).isdigit() else None
    if vis is None or nproc is None:
        return cfg, launch, [f'ms-swift {version}: vLLM runs inside the trainer (num_infer_workers {niw}); its GPUs are not known '
                f'without CUDA_VISIBLE_DEVICES and NPROC_PER_NODE, so colocate is assumed']
    if len(vis) == niw:
        return replace(cfg, vllm_mode='colocate'), launch, [f'ms-swift {version}: {niw} visible GPU(s) = num_infer_workers: colocate mode (training and sampling '
                f'on every GPU)']
    launch = replace(launch, trl=replace(launch.trl, swift_infer_workers={'workers': niw, 'visible': vis,
                                                                           'nproc': nproc, 'version': version}))
    if len(vis) != nproc + niw:
        return cfg, launch, []  # rule in_trainer_vllm_layout reports ms-swift's own assertion
    gpus = vis[-niw:]
    # async mode: TP 1, one engine per GPU
    cfg = replace(cfg, vllm_mode='server', vllm_server_host=['127.0.0.1'], vllm_tensor_parallel_size=1,
                  vllm_data_parallel_size=niw, vllm_in_trainer=True)
    launch = replace(launch, trl=replace(launch.trl, vllm_device_gpu=tuple(gpus)))
    return cfg, launch, [f'ms-swift {version}: "async mode": training on GPU(s) {",".join(map(str, vis[:nproc]))}, vLLM inside the '
            f'trainer on GPU(s) {",".join(map(str, gpus))} (vllm_device auto: the last num_infer_workers={niw}) at '
            f'vllm_gpu_memory_utilization {cfg.vllm_gpu_memory_utilization}; planned like a rollout server\'s GPUs']
