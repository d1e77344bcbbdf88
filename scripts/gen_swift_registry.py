#!/usr/bin/env python3
"""Regenerate grpo_recipes/swift_registry_snapshot.json from the installed ms-swift.

The snapshot holds what ``swift rlhf`` accepts for ``--model_type`` and ``--template``: every key of ms-swift's
``MODEL_MAPPING`` (swift/model/model_meta.py) with its architectures and templates, every key of
``TEMPLATE_MAPPING`` (swift/template/register.py), and each registered model id's (model_type, template), so the
guard can name the right type for a model without importing ms-swift.

    python scripts/gen_swift_registry.py            # rewrite the snapshot
    python scripts/gen_swift_registry.py --check    # exit 1 if it drifted

tests/test_swift_registry.py runs the --check path against the installed ms-swift.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT = ROOT / 'grpo_recipes' / 'swift_registry_snapshot.json'


def build_snapshot() -> dict:
    import importlib.metadata as md

    from swift.model import MODEL_MAPPING
    from swift.template import TEMPLATE_MAPPING

    model_types, models = {}, {}
    for name in sorted(MODEL_MAPPING):
        meta = MODEL_MAPPING[name]
        templates = sorted({t for t in [meta.template, *(g.template for g in meta.model_groups)] if t})
        model_types[name] = {'architectures': sorted(meta.architectures or []), 'templates': templates}
        for group in meta.model_groups:
            for m in group.models:
                for mid in (m.ms_model_id, m.hf_model_id):
                    if mid:
                        models.setdefault(mid.lower(), [name, group.template or meta.template])
    return {
        'generated_by': 'scripts/gen_swift_registry.py',
        'ms_swift_version': md.version('ms-swift'),
        'model_types': model_types,
        'templates': sorted(TEMPLATE_MAPPING),
        'models': dict(sorted(models.items())),
    }


def render(snapshot: dict) -> str:
    return json.dumps(snapshot, indent=0, sort_keys=False) + '\n'


def main(argv=None) -> int:
    from snapshot_cli import run  # scripts/snapshot_cli.py, beside this file

    return run(
        __doc__.splitlines()[0],
        build_snapshot,
        render,
        SNAPSHOT,
        'registry snapshot',
        'scripts/gen_swift_registry.py',
        argv,
    )


if __name__ == '__main__':
    sys.exit(main())
