"""``config.json`` of a hub model, fetched from the hub the framework would download it from; nothing else.

Which hub: ms-swift 4.6 downloads ``--model`` from ModelScope unless ``USE_HF`` is true (``swift/utils/env.py::
use_hf_hub``; ``--use_hf`` sets it, ``swift/arguments/base_args``), through ``swift/utils/hub_utils.py::
safe_snapshot_download`` with ``--model_revision`` and ``--hub_token``. TRL loads with transformers'
``from_pretrained``: always the Hugging Face hub (``--model_revision``, ``HF_TOKEN``).

The fetch runs in a child process (``python -m grpo_recipes.model_fetch``) so that (1) huggingface_hub and modelscope
read their settings (``HF_ENDPOINT``, ``HF_HUB_ETAG_TIMEOUT``, ``HF_HUB_DOWNLOAD_TIMEOUT``, ``HF_TOKEN``,
``MODELSCOPE_DOMAIN``) from the environment given, at their import, and (2) a hub that stalls or retries is cut
off at ``FETCH_DEADLINE`` instead of hanging the check. Only ``config.json`` is requested
(``huggingface_hub.hf_hub_download`` / ``modelscope.hub.file_download.model_file_download``); it lands in that
hub's own cache, where ms-swift and transformers look for it too.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping
from urllib.parse import urlparse

from .errors import GuardError
from .framework import Framework, as_framework

# Seconds for one request of the hub's client (huggingface_hub's HF_HUB_ETAG_TIMEOUT and HF_HUB_DOWNLOAD_TIMEOUT,
# modelscope's MODELSCOPE_API_HTTP_CLIENT_(CONNECT_)TIMEOUT; their defaults are 10 s and 10 s, 10 s and 90 s:
# huggingface_hub/constants.py, modelscope/hub/constants.py): a config.json is a few kB, and a check should
# not wait on a dead hub. A user's own setting of these variables wins.
REQUEST_TIMEOUT = 5
# The whole fetch, child process included (its import of the hub client takes about a second): past this the
# child is killed and the hub counted as unreachable.
FETCH_DEADLINE = 20
# The TCP probe before the fetch (as model_reach / grpo-data probe the hub): an offline machine answers at once.
PROBE_TIMEOUT = 3.0

HF_DEFAULT = 'https://huggingface.co'
MS_DEFAULT = 'https://www.modelscope.cn'


class FetchError(GuardError):
    """The config could not be fetched: one line saying why and how to supply it."""


def _truthy(v: str | None) -> bool:
    return (v or '').strip().lower() in ('1', 'true', 'yes', 'on', 'y', 't')


@dataclass(frozen=True)
class Hub:
    """Where (and as whom) a launch's framework downloads its model."""

    name: str
    """``hf`` or ``ms``."""
    revision: str | None = None
    token: str | None = None
    why: str = ''
    """Why this hub (``USE_HF`` set, TRL, ...), for the messages."""

    @property
    def label(self) -> str:
        return 'the Hugging Face hub' if self.name == 'hf' else 'ModelScope'


def _argv_value(argv: list[str], name: str) -> str | None:
    """The last value given to ``--name`` (``--name v`` or ``--name=v``) in an argv."""
    out = None
    for i, a in enumerate(argv):
        if a == f'--{name}' and i + 1 < len(argv):
            out = argv[i + 1]
        elif a.startswith(f'--{name}='):
            out = a.split('=', 1)[1]
    return out


def hub_of(
    fw: Framework | str,
    argv: list[str],
    file_env: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Hub:
    """The hub a launch downloads ``--model`` from. ms-swift: ``--use_hf``, else ``USE_HF`` (the environment wins
    over a config file's ENV block, as ms-swift applies it), else ModelScope. A framework that always loads from
    the Hugging Face hub (TRL: ``Framework.model_hub``) does so."""
    env = os.environ if environ is None else environ
    rev = _argv_value(argv, 'model_revision')
    always = as_framework(fw).model_hub
    if always:
        return Hub('hf', rev, env.get('HF_TOKEN'), always)
    flag = _argv_value(argv, 'use_hf')
    raw = flag if flag is not None else env.get('USE_HF', (file_env or {}).get('USE_HF'))
    token = _argv_value(argv, 'hub_token')
    if _truthy(raw):
        src = '--use_hf' if flag is not None else 'USE_HF'
        return Hub(
            'hf', rev, token or env.get('HF_TOKEN'), f'{src} is set: ms-swift downloads from the Hugging Face hub'
        )
    return Hub(
        'ms',
        rev,
        token or env.get('MODELSCOPE_API_TOKEN'),
        'USE_HF is not set: ms-swift downloads from ModelScope (swift/utils/env.py use_hf_hub)',
    )


def _endpoint(hub: Hub, env: Mapping[str, str]) -> str:
    if hub.name == 'hf':
        return (env.get('HF_ENDPOINT') or HF_DEFAULT).rstrip('/')
    dom = env.get('MODELSCOPE_DOMAIN')
    return (dom if dom and '//' in dom else f'https://{dom}' if dom else MS_DEFAULT).rstrip('/')


def _reachable(url: str, timeout: float = PROBE_TIMEOUT) -> bool:
    u = urlparse(url)
    try:
        socket.create_connection((u.hostname, u.port or (443 if u.scheme == 'https' else 80)), timeout=timeout).close()
        return True
    except (OSError, ValueError):
        return False


_FETCHED: dict[tuple, tuple[Path, str]] = {}
_FAILED: dict[tuple, str] = {}
"""This process's fetches (path, the hub and address it came from) and failures, so that the one check asks
the hub once."""


def fetched_from(path: Path) -> str | None:
    """The hub (and address) a config.json this process fetched came from; None for any other file."""
    return next((src for p, src in _FETCHED.values() if p == path), None)


def supply_hint(model: str, hub: Hub) -> str:
    how = (
        f'`hf download {model} config.json --local-dir DIR` where the hub is reachable'
        if hub.name == 'hf'
        else f'its config.json from https://modelscope.cn/models/{model} saved in DIR'
    )
    return f'pass --model-config DIR ({how}), or a local model dir'


def fetch_config(model: str, hub: Hub, environ: Mapping[str, str] | None = None) -> Path:
    """The path of ``model``'s config.json fetched from ``hub`` (only that file); FetchError: one line."""
    env = dict(os.environ if environ is None else environ)
    key = (hub.name, model, hub.revision, _endpoint(hub, env))
    if key in _FETCHED and _FETCHED[key][0].is_file():
        return _FETCHED[key][0]
    if key in _FAILED:
        raise FetchError(_FAILED[key])
    try:
        path = _fetch(model, hub, env)
    except FetchError as e:
        _FAILED[key] = str(e)
        raise
    _FETCHED[key] = (path, f'{hub.label} ({_endpoint(hub, env)}{", revision " + hub.revision if hub.revision else ""})')
    return path


def _fetch(model: str, hub: Hub, env: dict) -> Path:
    what = f'no config.json for {model} here (no local dir, no cached or bundled copy)'
    if hub.name == 'hf' and _truthy(env.get('HF_HUB_OFFLINE')):
        raise FetchError(
            f'{what}, and HF_HUB_OFFLINE is set, so it was not fetched from {hub.label}; {supply_hint(model, hub)}'
        )
    url = _endpoint(hub, env)
    if not _reachable(url):
        raise FetchError(
            f'{what}, and {urlparse(url).hostname} cannot be reached (offline?), so it was not fetched '
            f'from {hub.label}; {supply_hint(model, hub)}'
        )
    child_env = {k: v for k, v in env.items()}
    for k in (
        'HF_HUB_ETAG_TIMEOUT',
        'HF_HUB_DOWNLOAD_TIMEOUT',
        'MODELSCOPE_API_HTTP_CLIENT_TIMEOUT',
        'MODELSCOPE_API_HTTP_CLIENT_CONNECT_TIMEOUT',
    ):
        child_env.setdefault(k, str(REQUEST_TIMEOUT))
    child_env.setdefault('HF_HUB_DISABLE_TELEMETRY', '1')
    if hub.token:
        child_env['HF_TOKEN' if hub.name == 'hf' else 'MODELSCOPE_API_TOKEN'] = hub.token
    root = str(Path(__file__).resolve().parent.parent)
    child_env['PYTHONPATH'] = os.pathsep.join(
        [root] + ([child_env['PYTHONPATH']] if child_env.get('PYTHONPATH') else [])
    )
    cmd = [sys.executable, '-m', 'grpo_recipes.model_fetch', hub.name, model, hub.revision or '']
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, env=child_env, timeout=FETCH_DEADLINE, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise FetchError(
            f'{what}, and fetching it from {hub.label} ({url}) took over {FETCH_DEADLINE} s; {supply_hint(model, hub)}'
        ) from None
    lines = [ln for ln in done.stdout.splitlines() if ln.strip()]
    if done.returncode == 0 and lines and Path(lines[-1]).is_file():
        return Path(lines[-1])
    why = lines[-1] if lines else (done.stderr.strip().splitlines() or ['the hub client failed'])[-1]
    raise FetchError(f'{what}, and {hub.label} ({url}) did not give it: {why}; {supply_hint(model, hub)}')


def _child(hub: str, model: str, revision: str | None) -> int:
    """In the child: download config.json only, print its path (or one line why not)."""
    try:
        if hub == 'hf':
            from huggingface_hub import hf_hub_download
            from huggingface_hub.errors import (
                EntryNotFoundError,
                GatedRepoError,
                RepositoryNotFoundError,
                RevisionNotFoundError,
            )

            try:
                path = hf_hub_download(
                    model,
                    'config.json',
                    revision=revision or None,
                    endpoint=os.environ.get('HF_ENDPOINT') or None,
                    etag_timeout=float(os.environ.get('HF_HUB_ETAG_TIMEOUT', REQUEST_TIMEOUT)),
                )
            except GatedRepoError:
                print('the repo is gated: accept its licence on the hub and set HF_TOKEN')
                return 1
            except RevisionNotFoundError:
                print(f'no revision {revision!r}')
                return 1
            except EntryNotFoundError:
                print('the repo has no config.json')
                return 1
            except RepositoryNotFoundError:
                print('no such repo (or a private one: set HF_TOKEN)')
                return 1
        else:
            from modelscope.hub.file_download import model_file_download

            path = model_file_download(model, 'config.json', revision=revision or None)
    except Exception as e:  # any failure of the client: one line, never its traceback
        print(f'{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ""}'.rstrip(': ')[:300])
        return 1
    print(path)
    return 0


if __name__ == '__main__':
    sys.exit(_child(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None))
