"""Datasets named the way ``swift rlhf --dataset`` names them, read by ms-swift's own loader.

A plain local path (a file or a saved dataset dir, with no ``#N``/``:subset``/``hf::`` syntax) takes the fast
path in formats.py: no ms-swift import, kept rows written back byte for byte. Anything else (a hub id, ``id:subset``,
``path#N``, several datasets) goes through ``swift.dataset.load_dataset`` exactly as ``swift rlhf`` calls it for
GRPO (``remove_unused_columns=False``, seed 42, ``DatasetSyntax`` for ``#N`` sampling and subsets, ``USE_HF`` or
``--use-hf`` for the Hugging Face hub instead of ModelScope). The rows it yields are written to a JSON-lines file
(atomically; streamed row by row with ``--streaming``), which the fast path then measures and filters with its
usual accounting. Importing ms-swift costs about 6 s on the 2-core CI machine (measured: 6.3 s for a 50-row
sample), which is why plain files never pay it.

Without network, a hub dataset is read from the cache or refused in one line naming the cache and the fix;
the hub is probed first (3 s) so that an offline machine never waits on the hub's own retries (ModelScope's
downloader gave up only after about 50 s here).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from .formats import Atomic, InputError


class DataSourceError(InputError):
    """The dataset cannot be reached (offline, not cached): a usage-level problem, exit 2."""

    exit_code = 2


HUB_HOSTS = {'hf': ('huggingface.co', 443), 'ms': ('www.modelscope.cn', 443)}


def is_plain_path(spec: str) -> bool:
    """A local file or dir given as it is: the fast path."""
    return os.path.exists(spec)


DATA_SUFFIXES = ('.jsonl', '.json', '.csv', '.parquet', '.txt', '.arrow')


def looks_local(spec: str) -> bool:
    """A path that does not exist (a typo), as opposed to a hub id: refused as a missing file, not looked up."""
    body = spec.split('::', 1)[1] if '::' in spec else spec
    base = body.rsplit('#', 1)[0]
    if _local_syntax_target(spec) is not None:
        return False
    return base.startswith(('/', './', '../', '~')) or base.split(':', 1)[0].endswith(DATA_SUFFIXES)


def _use_hf(spec: str, use_hf: bool | None) -> bool:
    head = spec.split('::', 1)[0].lower() if '::' in spec else None
    if head in ('hf', 'ms'):
        return head == 'hf'
    if use_hf is not None:
        return use_hf
    return os.environ.get('USE_HF', '0').lower() in ('1', 'true')  # ms-swift's own switch


def _reachable(host: str, port: int, timeout: float = 3.0) -> bool:
    try:
        socket.create_connection((host, port), timeout=timeout).close()
        return True
    except OSError:
        return False


def _caches(hf: bool) -> str:
    if hf:
        home = os.environ.get('HF_DATASETS_CACHE') or os.path.join(
            os.environ.get('HF_HOME') or os.path.expanduser('~/.cache/huggingface'), 'datasets'
        )
        return f'the Hugging Face datasets cache {home}'
    ms = os.environ.get('MODELSCOPE_CACHE') or os.path.expanduser('~/.cache/modelscope')
    return f'the ModelScope cache {ms}'


def _local_syntax_target(spec: str) -> str | None:
    """The local path inside ``path#N`` / ``path:subset`` (as DatasetSyntax splits it), if it exists."""
    body = spec.split('::', 1)[1] if '::' in spec else spec
    base = body.rsplit('#', 1)[0]
    if os.path.exists(base):
        return base
    base = base.split(':', 1)[0]
    return base if os.path.exists(base) else None


class _quiet_stderr:
    """Send file descriptor 2 to a scratch file for the duration (ms-swift, datasets and the hub clients log there
    from several threads and processes, which a Python-level redirect would miss)."""

    def __enter__(self):
        import sys
        import tempfile

        sys.stderr.flush()
        self.saved = os.dup(2)
        self.sink = tempfile.TemporaryFile()
        os.dup2(self.sink.fileno(), 2)
        return self

    def __exit__(self, *exc):
        import sys

        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)
        self.sink.close()
        return False


def materialise(
    specs: list[str],
    dst: Path,
    use_hf: bool | None = None,
    num_proc: int = 1,
    streaming: bool = False,
    columns: dict | None = None,
) -> dict:
    """Load ``specs`` with ms-swift's ``load_dataset`` and write its rows to ``dst`` (JSON lines). Returns what was
    read (rows, sources). Raises DataSourceError (exit 2) when a hub dataset is neither reachable nor cached."""
    offline_hubs = set()
    for spec in specs:
        if _local_syntax_target(spec) is not None:
            continue
        hf = _use_hf(spec, use_hf)
        key = 'hf' if hf else 'ms'
        forced_off = hf and os.environ.get('HF_HUB_OFFLINE', '0').lower() in ('1', 'true')
        if forced_off or not _reachable(*HUB_HOSTS[key]):
            offline_hubs.add(key)
            if not hf:  # ModelScope's loader has no offline mode: it would retry the hub for about a minute
                raise DataSourceError(
                    f'{spec}: offline (cannot reach {HUB_HOSTS[key][0]}) and ModelScope datasets are not read from '
                    f'{_caches(False)} without it; pass a local file as DATASET (grpo-data stats /path/train.jsonl; '
                    f'a launcher: DATASET=/path/train.jsonl), or the Hugging Face id with --use-hf if its cache '
                    f'holds it'
                )
    env_saved = {k: os.environ.get(k) for k in ('HF_HUB_OFFLINE', 'HF_DATASETS_OFFLINE')}
    if 'hf' in offline_hubs:
        os.environ['HF_HUB_OFFLINE'] = os.environ['HF_DATASETS_OFFLINE'] = '1'  # use the cache, never wait
    try:
        try:
            with _quiet_stderr():  # its import logs the dataset registry
                from swift.dataset import load_dataset
        except ImportError as e:
            raise InputError(
                f'ms-swift is needed to read {specs[0]!r} (a hub id or dataset syntax): {e}; pip install grpo-recipes'
            ) from None
        try:
            with _quiet_stderr():  # the hub clients' retries and progress bars; our own line says what failed
                train, _ = load_dataset(
                    specs,
                    num_proc=num_proc,
                    streaming=streaming,
                    use_hf=use_hf,
                    seed=42,
                    remove_unused_columns=False,
                    columns=columns,
                )
        except Exception as e:  # noqa: BLE001 - the hub clients raise their own types (modelscope_hub's deadline)
            where = ' and '.join(_caches(h == 'hf') for h in sorted(offline_hubs)) or 'the hub'
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if offline_hubs:
                raise DataSourceError(
                    f'{", ".join(specs)}: offline, and not in {where} ({first}); pass a local '
                    f'file as DATASET (grpo-data stats /path/train.jsonl; a launcher: '
                    f'DATASET=/path/train.jsonl)'
                ) from None
            raise DataSourceError(f'{", ".join(specs)}: ms-swift could not load it ({first})') from None
    finally:
        for k, v in env_saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out = Atomic(dst)
    rows = 0
    try:
        with open(out.tmp, 'w', encoding='utf-8') as f:
            for row in train:
                row = dict(row)
                row.pop('dataset', None)  # ms-swift's routing tag (it replaces any column of that name)
                f.write(json.dumps(row, ensure_ascii=False, default=str) + '\n')
                rows += 1
        out.commit()
    except BaseException:
        out.discard()
        raise
    return {
        'rows': rows,
        'datasets': specs,
        'loader': 'swift.dataset.load_dataset',
        'streaming': streaming,
        'use_hf': use_hf,
    }
