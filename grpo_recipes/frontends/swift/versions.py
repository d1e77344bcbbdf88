"""Which ms-swift release a ``swift rlhf`` launch is judged against, and what changed between releases.

A launch is read with the arguments of the ms-swift the user runs: the installed one, or ``--swift-version V``.
Every 3.x and 4.x minor release has its own argument set in ``releases.json`` (written by
scripts/gen_swift_release_snapshots.py from each release's source with ``ast``: the newest patch of each minor, with
the newest transformers it allows); ``swift_args_snapshot.json`` (ms-swift 4.6's own parser, tests/test_snapshot.py)
stays the fast path of 4.6 and of releases newer than the newest one known, which are read as 4.6 with a stated
assumption. A release older than 3.0 is refused. tests/test_swift_releases.py holds the ast extraction to the real
parsers of 4.6 and 3.10.3 (swift_args_snapshot_3.10.json).

What changed where it changes the plan (read in the releases' code; the per-release defaults come from releases.json):

- ``--train_type`` became ``--tuner_type`` in 4.0 (4.0 still accepts ``--train_type`` as a deprecated alias; 4.1
  dropped it);
- ``vllm_mode``: from 3.5 to 3.10 it defaults to ``colocate`` and ``_init_rollout`` sets it from the server address
  (swift/llm/argument/rlhf_args.py: ``server`` when ``vllm_server_host``/``vllm_server_base_url`` is given); before
  3.5 there is no ``--vllm_mode`` (vLLM ran in the trainer: ``in_trainer_vllm``); from 3.11 on it has no default and
  ms-swift stops with "vllm_mode is required when use_vllm is true";
- ``vllm_max_num_seqs``: the release's own default (256 in 3.7-3.10, None from 3.11 on: vLLM's own default);
  256 where the release has no such argument.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace

from ... import swift_args
from ...divisors import largest_divisor_at_most
from ...errors import GuardError
from ...versions import version_tuple

# Names whose replacement depends on the release: (the replacement, why). The release that dropped each is read
# from releases.json (``first_without``).
REMOVED = {
    'train_type': ('tuner_type', 'renamed --tuner_type in ms-swift 4.0'),
    'vllm_device': (
        'vllm_mode',
        'use --vllm_mode colocate, or --vllm_mode server with `swift rollout` on its own GPUs',
    ),
    'num_infer_workers': ('vllm_mode', 'use --vllm_mode colocate or server'),
    'gpu_memory_utilization': ('vllm_gpu_memory_utilization', 'the unprefixed alias'),
    'tensor_parallel_size': ('vllm_tensor_parallel_size', 'the unprefixed alias'),
    'data_parallel_size': ('vllm_data_parallel_size', 'the unprefixed alias'),
    'enforce_eager': ('vllm_enforce_eager', 'the unprefixed alias'),
    'max_num_seqs': ('vllm_max_num_seqs', 'the unprefixed alias'),
}
INTRODUCED = {'tuner_type': ('train_type', 'renamed from --train_type')}
"""Names an older release knows under another name: (the older name, why)."""

VLLM_MAX_NUM_SEQS_3 = 256
"""vllm_max_num_seqs of a release with no such argument (VllmArguments' 256 in swift/trainers/arguments.py)."""

OLDEST = (3, 0)


def _vt(v):
    return version_tuple(v)


def _dotted(vt) -> str:
    return '.'.join(map(str, vt))


def known_releases() -> list[str]:
    """The ms-swift versions releases.json holds (one per minor), oldest first."""
    return list(swift_args.releases())


def release_fields(release: str) -> dict:
    return swift_args.releases()[release]['fields']


def judged_release(version: str | None) -> tuple[str | None, str | None]:
    """(the releases.json entry that judges ``version``, a note when it is not that exact release). None for the
    installed/default release (4.6's parser snapshot). A release older than 3.0 is refused."""
    vt = _vt(version)
    if vt is None:
        return None, None
    vt = vt + (0,) * (2 - len(vt))  # "4" is 4.0
    rels = known_releases()
    if vt[:2] < OLDEST:
        raise GuardError(
            f'ms-swift {version}: older than 3.0, and the guard knows the `swift rlhf` arguments of '
            f'ms-swift {rels[0]} to {rels[-1]} only; check with --swift-version of the 3.x/4.x release '
            f'you will run (pip install -U ms-swift)'
        )
    newest = rels[-1]
    same = [r for r in rels if _vt(r)[:2] == vt[:2]]
    if same:
        r = same[0]
        note = None
        if len(_vt(version)) > 2 and _vt(r)[:3] != vt[:3]:
            note = (
                f"ms-swift {version}: its arguments are checked against ms-swift {r}'s (the guard keeps one "
                f"snapshot per minor release: {_short(r)}'s is {r})"
            )
        return r, note
    if vt > _vt(newest):
        line = _dotted(_vt(newest)[:2])
        return newest, (
            f'ms-swift {version} is newer than the newest release the guard knows ({line}.x); its '
            f"arguments are read as {line}'s"
        )
    older = [r for r in rels if _vt(r) < vt]
    r = older[-1]
    return r, (
        f"ms-swift {version}: not a release the guard knows; its arguments are read as ms-swift {r}'s, the "
        f'newest known release before it'
    )


def snapshot_for(version: str | None) -> tuple[str, str, str | None]:
    """(snapshot name for swift_args, the judged ms-swift version, a note when ``version`` is not that release)."""
    release, note = judged_release(version)
    main_v = swift_args.snapshot()['ms_swift_version']
    if release is None or _vt(release)[:2] == _vt(main_v)[:2]:
        return swift_args.SNAPSHOT_FILE, main_v, note
    return swift_args.RELEASE_PREFIX + release, release, note


def is_3x(version: str | None) -> bool:
    vt = _vt(version)
    return vt is not None and vt < (4,)


def history(name: str) -> tuple[str | None, str | None]:
    """(the first release with ``name``, the first release after it without it; None where not applicable)."""
    rels = known_releases()
    having = [i for i, r in enumerate(rels) if name in release_fields(r)]
    if not having:
        return None, None
    first = rels[having[0]]
    gone = rels[having[-1] + 1] if having[-1] + 1 < len(rels) else None
    return first, gone


def _short(release: str | None) -> str:
    return _dotted(_vt(release)[:2]) if release else ''


def config_from_argv(argv: list[str], version: str | None):
    """(GRPOConfig, remaining, notes): the launch as the given ms-swift release reads it. 4.6 and newer: exactly
    ``GRPOConfig.from_argv``. Another release: split by that release's own parser (its unknowns are the remaining),
    then read into the 4.x-named config (``--train_type`` -> tuner_type where the release has it) with the release's
    vllm_mode and vllm_max_num_seqs semantics."""
    from ...config import GRPOConfig

    name, release, note = snapshot_for(version)
    notes = [note] if note else []
    if name == swift_args.SNAPSHOT_FILE:
        cfg, remaining = GRPOConfig.from_argv(argv)
        return cfg, remaining, notes
    _, remaining = swift_args.parse(argv, name)
    fields = release_fields(release)
    for tok in argv:  # names the judged release still had (e.g. --num_infer_workers before 3.6)
        key = tok[2:].split('=', 1)[0].replace('-', '_') if tok.startswith('--') else None
        if key in REMOVED and key in fields and key != 'train_type':
            _, gone = history(key)
            if key not in ('vllm_device', 'num_infer_workers'):
                how = 'its effect is not modelled here'
            elif _patch_release(version) < IN_TRAINER_UNTIL:
                how = 'vLLM is placed as that release placed it (in_trainer_vllm)'
            else:  # 3.5: RLHFArguments._deprecated_warning, and the trainer no longer reads it
                how = 'deprecated there and ignored ("has been deprecated and will be removed"): vllm_mode decides'
            note = f'--{key}: an argument of ms-swift {version} (removed in {_short(gone)}); {how}'
            if note not in notes:
                notes.append(note)
            continue
            note = f'--{key}: an argument of ms-swift {version} (removed in {_short(gone)}); {how}'
            if note not in notes:
                notes.append(note)
    renamed = []
    for tok in swift_args.expand_abbreviations(argv, name):  # as this release reads an abbreviation
        head, eq, val = tok.partition('=')
        if head in ('--train_type', '--train-type') and 'train_type' in fields:
            tok = '--tuner_type' + eq + val
        renamed.append(tok)
    cfg, _ = GRPOConfig.from_argv(renamed)
    changes: dict = {}
    mode = fields.get('vllm_mode')
    if cfg.use_vllm and (mode is None or mode.get('default') == 'colocate'):  # rlhf_args.py _init_rollout (3.5-3.10)
        changes['vllm_mode'] = 'server' if (cfg.vllm_server_host or cfg.vllm_server_base_url) else 'colocate'
    if cfg.vllm_max_num_seqs is None:
        seqs = fields.get('vllm_max_num_seqs')
        changes['vllm_max_num_seqs'] = seqs.get('default') if seqs is not None else VLLM_MAX_NUM_SEQS_3
    cfg = replace(cfg, **changes)
    return cfg, remaining, notes


@dataclass(frozen=True)
class UnknownArgument:
    """A flag the judged ms-swift release's parser leaves in ``remaining_argv`` (the interface of
    swift_args.UnknownArgument, with the release named)."""

    flag: str
    suggestion: str | None
    reason: str
    version: str
    stops: str | None = None

    def describe(self) -> str:
        if self.stops:
            return f'{self.flag}: ambiguous to ms-swift {self.version}; use {self.suggestion} ({self.reason})'
        if self.suggestion:
            return (
                f'{self.flag}: ms-swift {self.version} has no argument {self.flag}; use {self.suggestion} '
                f'({self.reason})'
            )
        return f'{self.flag}: ms-swift {self.version} has no argument {self.flag} ({self.reason})'


def explain(remaining: list[str], version: str | None) -> list[UnknownArgument]:
    """One entry per unknown flag, with the replacement the judged release has and when the name came or went."""
    name, release, _ = snapshot_for(version)
    if name == swift_args.SNAPSHOT_FILE:
        return swift_args.explain_remaining(remaining)  # 4.6 (and newer, read as 4.6): the existing wording
    shown = version or release
    fields = release_fields(release)
    names = sorted(fields)
    out = []
    for token in remaining:
        if not token.startswith('--'):
            continue
        flag = token.split('=', 1)[0]
        amb = swift_args.ambiguity(token, name)
        if amb is not None:
            suggestion, reason, stops = amb
            out.append(UnknownArgument(flag, suggestion, reason, shown, stops))
            continue
        key = flag[2:].replace('-', '_')
        first, gone = history(key)
        when = (
            f'it came in ms-swift {_short(first)}'
            if first and _vt(first) > _vt(release)
            else f'removed in ms-swift {_short(gone)}'
            if gone and _vt(gone) <= _vt(release)
            else None
        )
        if key in INTRODUCED and INTRODUCED[key][0] in fields:
            old, why = INTRODUCED[key]
            out.append(UnknownArgument(flag, f'--{old}', '; '.join(filter(None, [why, when])), shown))
        elif key in REMOVED:
            new, why = REMOVED[key]
            out.append(
                UnknownArgument(
                    flag, f'--{new}' if new in fields else None, '; '.join(filter(None, [why, when])), shown
                )
            )
        else:
            close = difflib.get_close_matches(key, names, n=1, cutoff=0.8)
            reason = when or ('closest known argument' if close else 'no similar argument')
            out.append(UnknownArgument(flag, f'--{close[0]}' if close and not when else None, reason, shown))
    return out


def checked_packages(version: str, packages: dict) -> dict:
    """The packages a check sees with ``--swift-version V``: the installed ones, with ms-swift at V (a release older
    than 3.0 is refused here, with one line)."""
    if _vt(version) is None:
        raise GuardError(f'--swift-version {version!r}: not a version (e.g. 3.10.3)')
    judged_release(version)
    return {**packages, 'ms-swift': version}


def require_installed(version: str) -> None:
    """``validate`` runs the installed ms-swift's own parser: another release cannot be parsed here."""
    import importlib.metadata as md

    try:
        have = md.version('ms-swift')
    except md.PackageNotFoundError:
        have = None
    if have != version and (have is None or not have.startswith(version.rstrip('.') + '.')):
        raise GuardError(
            f"--swift-version {version}: validate runs the installed ms-swift's own parser, and "
            f'ms-swift {have or "(none)"} is installed; install ms-swift=={version} (e.g. in a venv) and '
            f'run grpo-guard from there, or drop --swift-version (check judges {version} from its '
            f'argument snapshot)'
        )


IN_TRAINER_UNTIL = (3, 5)
"""ms-swift before 3.5 ran vLLM inside the training processes (num_infer_workers, vllm_device; no --vllm_mode). 3.5
added ``--vllm_mode`` (colocate by default) and kept the two names only to warn that they are deprecated (3.5.0
swift/llm/argument/rlhf_args.py ``_deprecated_warning``; its grpo_trainer.py reads neither)."""
LAYOUT_ASSERTED_FROM = (3, 2, 2)
"""``RLHFArguments._check_grpo`` asserts the GPU layout (colocate: visible == num_infer_workers == NPROC_PER_NODE;
async: visible == NPROC_PER_NODE + num_infer_workers) from 3.2.2 (swift/llm/argument/rlhf_args.py, "update grpo
warning" #3598 of 2025-03-24); 3.1.x-3.2.1 check only that vLLM's device exists (grpo_trainer.py)."""
LAST_WORKERS_FROM = (3, 2, 0)
"""``vllm_device auto`` on more than one GPU: 3.1.x took ``get_device(local_world_size)``, the GPU after the
training ones; from 3.2.0 the last ``num_infer_workers`` GPUs (swift/trainers/rlhf_trainer/grpo_trainer.py)."""


def _in_trainer_args(argv: list[str], version: str | None) -> tuple[list[str], int]:
    """(``--vllm_device`` as a list, ``--num_infer_workers``) as the release's own parser reads them (its argument
    snapshot: abbreviations, ``--name=value``, ``nargs``, defaults: ``['auto']``, or ``'auto'`` in 3.1; 1)."""
    values, _ = swift_args.parse(argv, snapshot_for(version)[0])
    device = values.get('vllm_device') or ['auto']
    workers = values.get('num_infer_workers')
    return ([device] if isinstance(device, str) else list(device)), (1 if workers is None else workers)


def _stops(cfg, launch, info: dict, message: str, fix: str, source: str) -> tuple:
    """The release stops at start: the error goes to rule ``device.infer-workers`` with the layout."""
    info['error'] = (message, fix, source)
    return cfg, replace(launch, trl=replace(launch.trl, swift_infer_workers=info)), []


def _patch_release(version: str | None) -> tuple[int, ...] | None:
    """The release whose in-trainer vLLM behaviour applies: the version itself when it names a patch release, else
    the release that judges it (one per minor, e.g. "3.2" -> 3.2.2)."""
    vt = _vt(version)
    if vt is None or len(vt) >= 3:
        return vt
    release, _ = judged_release(version)
    return _vt(release) if release else vt


def _infer_devices(given: list[str], vt, count: int, nproc: int, niw: int) -> tuple[list[int] | None, str | None]:
    """(the visible-GPU indices vLLM's engines run on, None when vllm_device names something else; the start-up
    error of grpo_trainer.py when one does not exist)."""
    if given[0] == 'auto':
        if count == 1:
            return [0], None  # "particular case when training with only 1 GPU: share it"
        if vt < LAST_WORKERS_FROM:
            idx = [nproc]  # 3.1.x: get_device(local_world_size), "take the next GPU idx"
        else:
            idx = list(range(count - niw, count))
    else:
        idx = []
        for d in given:
            kind, _, n = d.partition(':')
            if kind not in ('cuda', 'npu') or not n.isdigit():
                return None, None
            idx.append(int(n))
    for i in idx:
        if i >= count:
            return idx, (
                f'The requested device for vllm (cuda:{i}) is not available. You are likely using vLLM without '
                f'restricting the number of GPUs for training.'
            )
    return idx, None


def in_trainer_vllm(cfg, launch, version: str | None) -> tuple:
    """ms-swift < 3.5 without a rollout server: vLLM inside the trainer, placed as the release placed it
    (swift/trainers/rlhf_trainer/grpo_trainer.py, swift/llm/argument/rlhf_args.py ``_check_grpo`` at 3.1.1-3.4).
    From 3.2.2, visible GPUs == num_infer_workers is colocate mode (every process trains and samples), otherwise
    "async mode" must have NPROC_PER_NODE + num_infer_workers visible GPUs (``LAYOUT_ASSERTED_FROM``). vLLM runs on
    ``--vllm_device`` (``auto``: ``LAST_WORKERS_FROM``). Engines on GPUs of their own are planned like a rollout
    server's at the launch's own vllm_gpu_memory_utilization; an engine on a training GPU is planned as colocated.
    Returns (the config, the launch with the layout in its ``trl``: a copy, ``launch`` is left as it is,
    assumptions)."""
    vt = _patch_release(version)
    if not (
        vt is not None
        and vt < IN_TRAINER_UNTIL
        and cfg.use_vllm
        and not cfg.vllm_server_host
        and not cfg.vllm_server_base_url
    ):
        return cfg, launch, []
    devices, niw = _in_trainer_args(launch.argv, version)
    raw = launch.env.get('CUDA_VISIBLE_DEVICES', '')
    vis = [int(x) for x in raw.split(',')] if raw.replace(',', '').strip().isdigit() else None
    nproc = int(launch.env['NPROC_PER_NODE']) if str(launch.env.get('NPROC_PER_NODE', '')).isdigit() else None
    if vis is None or nproc is None:
        return (
            cfg,
            launch,
            [
                f'ms-swift {version}: vLLM runs inside the trainer (num_infer_workers {niw}); its GPUs '
                f'are not known without CUDA_VISIBLE_DEVICES and NPROC_PER_NODE, so colocate is assumed'
            ],
        )
    colocate = replace(cfg, vllm_mode='colocate')
    info = {'workers': niw, 'visible': vis, 'nproc': nproc, 'version': version}
    if niw < 1:
        return _stops(
            cfg,
            launch,
            info,
            f'--num_infer_workers {niw}: ms-swift {version} stops with a ZeroDivisionError (GRPOTrainer.infer_rank '
            f'takes local_world_size % num_infer_workers)',
            '--num_infer_workers 1',
            'swift/trainers/rlhf_trainer/grpo_trainer.py infer_rank (ms-swift 3.2-3.4)',
        )
    if vt >= LAYOUT_ASSERTED_FROM:
        if len(vis) == niw:
            return (
                colocate,
                launch,
                [
                    f'ms-swift {version}: {niw} visible GPU(s) = num_infer_workers: colocate mode (training and '
                    f'sampling on every GPU)'
                ],
            )
        if len(vis) != nproc + niw:
            read_as = '' if len(_vt(version)) >= 3 else f' (read as {_dotted(vt)}; 3.1-3.2.1 did not check this)'
            return _stops(
                cfg,
                launch,
                info,
                f'ms-swift {version}{read_as} stops with "Async mode requires total GPUs({len(vis)}) = training '
                f'GPUs({nproc}) + inference workers({niw}). Please adjust your GPU allocation."',
                f'ENV: {{NPROC_PER_NODE: {max(1, len(vis) - niw)}}}',
                'swift/llm/argument/rlhf_args.py _check_grpo (ms-swift 3.2.2-3.4)',
            )
    elif nproc % niw:
        return _stops(
            cfg,
            launch,
            info,
            f'ms-swift {version} stops with an AssertionError: local_world_size ({nproc}) % num_infer_workers '
            f'({niw}) == 0 (GRPOTrainer.infer_rank)',
            f'--num_infer_workers {largest_divisor_at_most(nproc, niw)}',
            'swift/trainers/rlhf_trainer/grpo_trainer.py infer_rank (ms-swift 3.2.0-3.2.1)',
        )
    idx, missing = _infer_devices(devices, vt, len(vis), nproc, niw)
    if missing:
        return _stops(
            cfg,
            launch,
            info,
            f'ms-swift {version} stops with "{missing}"',
            f'ENV: {{NPROC_PER_NODE: {max(1, len(vis) - niw)}}}',
            'swift/trainers/rlhf_trainer/grpo_trainer.py (ms-swift 3.1-3.4)',
        )
    launch = replace(launch, trl=replace(launch.trl, swift_infer_workers=info))
    if idx is None:
        return colocate, launch, [f'ms-swift {version}: vllm_device is not a GPU index; colocate mode is assumed']
    shared = [i for i in idx if i < nproc]
    if shared:
        gpus = ','.join(str(vis[i]) for i in shared)
        return (
            colocate,
            launch,
            [
                f'ms-swift {version}: vLLM inside the trainer on GPU(s) {gpus}, which also train (ms-swift warns "The '
                f'requested device ... is also used for training"): planned as colocate mode'
            ],
        )
    gpus = [vis[i] for i in idx]
    written = ' '.join(devices)
    # async mode: TP 1, one engine per GPU
    cfg = replace(
        cfg,
        vllm_mode='server',
        vllm_server_host=['127.0.0.1'],
        vllm_tensor_parallel_size=1,
        vllm_data_parallel_size=len(gpus),
        vllm_in_trainer=True,
    )
    launch = replace(launch, trl=replace(launch.trl, vllm_device_gpu=tuple(gpus)))
    return (
        cfg,
        launch,
        [
            f'ms-swift {version}: "async mode": training on GPU(s) {",".join(map(str, vis[:nproc]))}, vLLM inside the '
            f'trainer on GPU(s) {",".join(map(str, gpus))} (vllm_device {written}) at '
            f"vllm_gpu_memory_utilization {cfg.vllm_gpu_memory_utilization}; planned like a rollout server's GPUs"
        ],
    )
