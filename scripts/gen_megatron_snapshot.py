"""Write grpo_recipes/frontends/megatron/snapshots/megatron_args_<version>.json: the fields of ms-swift's
``MegatronRLHFArguments`` (what ``megatron rlhf`` parses: swift/megatron/pipelines/train/rlhf.py in 4.x,
swift/megatron/train/rlhf.py in 3.x), read with ast from each release's source (the real class imports
megatron-core and needs CUDA to run its __post_init__).

    python scripts/gen_megatron_snapshot.py                    # the installed ms-swift + the cached wheels
    python scripts/gen_megatron_snapshot.py --versions 3.11.0 4.5.3

Other releases come from ``pip download ms-swift==X --no-deps`` into a cache outside the repo
(MSSWIFT_WHEEL_CACHE, default /tmp/msswift-cache); the wheel is unpacked there, never into the repository.
tests/test_megatron_snapshot.py holds the installed release's snapshot to ``dataclasses.fields`` of the real class.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grpo_recipes.frontends.megatron.argfields import dataclass_fields  # noqa: E402

OUT = ROOT / 'grpo_recipes' / 'frontends' / 'megatron' / 'snapshots'
CACHE = Path(os.environ.get('MSSWIFT_WHEEL_CACHE', '/tmp/msswift-cache'))
DEFAULT_VERSIONS = ('3.11.0', '3.12.6', '4.0.4', '4.3.2', '4.5.3')


def class_file(swift_root: Path) -> Path:
    for sub in ('megatron/arguments/rlhf_args.py', 'megatron/argument/rlhf_args.py'):
        if (swift_root / sub).is_file():
            return swift_root / sub
    raise SystemExit(f'{swift_root}: no megatron rlhf_args.py (a release without Megatron RLHF)')


# GRPO checks whose presence differs between releases: the release's own message, found in its megatron_args.py
CHECKS = {
    'vllm_mode_required_at_parse': 'vllm_mode is required for Megatron GRPO',
    'generation_batch_exclusive': "'generation_batch_size' and 'steps_per_generation' cannot be both configured",
    'dataset_shuffle_false_unsupported': 'dataset_shuffle false is not supported for Megatron GRPO',
    'multi_turn_unsupported': 'multi_turn_scheduler is not supported for Megatron GRPO right now',
}


def snapshot(swift_root: Path, version: str) -> dict:
    f = class_file(swift_root)
    fields = dataclass_fields(swift_root, f, 'MegatronRLHFArguments')
    src = (f.parent / 'megatron_args.py').read_text(encoding='utf-8')
    return {
        'ms_swift': version,
        'class': f'{f.relative_to(swift_root.parent).as_posix()}::MegatronRLHFArguments',
        'generated_by': 'scripts/gen_megatron_snapshot.py (ast; no import of ms-swift)',
        'checks': {k: (msg if msg in src else None) for k, msg in CHECKS.items()},
        'fields': {
            k: {kk: vv for kk, vv in v.items() if kk != 'default_known' or not vv} for k, v in sorted(fields.items())
        },
    }


def unpacked(version: str) -> Path:
    dest = CACHE / f'ms-swift-{version}'
    if not (dest / 'swift').is_dir():
        wheel = next(iter(sorted(CACHE.glob(f'ms_swift-{version}-*.whl'))), None)
        if wheel is None:
            subprocess.run(
                [sys.executable, '-m', 'pip', 'download', f'ms-swift=={version}', '--no-deps', '-d', str(CACHE), '-q'],
                check=True,
            )
            wheel = next(iter(sorted(CACHE.glob(f'ms_swift-{version}-*.whl'))))
        with zipfile.ZipFile(wheel) as z:
            z.extractall(dest, [n for n in z.namelist() if n.startswith('swift/') and n.endswith('.py')])
    return dest / 'swift'


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument('--versions', nargs='*', default=list(DEFAULT_VERSIONS))
    ap.add_argument('--no-installed', action='store_true')
    a = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    todo = []
    if not a.no_installed:
        import importlib.metadata
        import importlib.util

        spec = importlib.util.find_spec('swift')
        todo.append((importlib.metadata.version('ms-swift'), Path(spec.origin).parent))
    todo += [(v, None) for v in a.versions]
    for version, root in todo:
        root = root or unpacked(version)
        snap = snapshot(root, version)
        path = OUT / f'megatron_args_{version}.json'
        path.write_text(json.dumps(snap, indent=1, sort_keys=True) + '\n', encoding='utf-8')
        print(f'{path.relative_to(ROOT)}: {len(snap["fields"])} fields from {snap["class"]}')


if __name__ == '__main__':
    main()
