"""The Megatron argument snapshots: the installed ms-swift's is what ast reads from its source today, and (slow)
holds every field of the real ``MegatronRLHFArguments`` that ``dataclasses.fields`` lists when the class is
imported (megatron-core replaced by stand-in modules: tests/standins/megatron_fields.py)."""

import importlib.metadata
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

from grpo_recipes.frontends.megatron import snapshot as snap
from grpo_recipes.frontends.megatron.argfields import dataclass_fields

HERE = pathlib.Path(__file__).parent
INSTALLED = importlib.metadata.version('ms-swift')
SWIFT = pathlib.Path(importlib.util.find_spec('swift').origin).parent


def test_installed_release_snapshot_is_current():
    assert INSTALLED in snap.available(), f'run scripts/gen_megatron_snapshot.py for ms-swift {INSTALLED}'
    fields = dataclass_fields(SWIFT, SWIFT / 'megatron' / 'arguments' / 'rlhf_args.py', 'MegatronRLHFArguments')
    stored = snap.load(INSTALLED)['fields']
    assert set(fields) == set(stored)
    assert {k: f['default'] for k, f in fields.items()} == {k: f['default'] for k, f in stored.items()}


def test_snapshot_holds_the_grpo_defaults_ms_swift_documents():
    f = snap.load('4.6.0')['fields']
    # Megatron-SWIFT GRPO: steps_per_generation unset (1 after resolve_generation_batch_size), no vllm_mode default
    assert f['steps_per_generation']['default'] is None and f['vllm_mode']['default'] is None
    assert f['vllm_mode']['choices'] == ['server', 'colocate'] and f['sleep_level']['choices'] == [0, 1, 2]
    assert f['micro_batch_size']['default'] == 1 and f['global_batch_size']['default'] == 16
    assert f['rlhf_type']['default'] == 'dpo'  # MegatronRLHFArguments overrides the mixin's None
    assert f['model']['defined_in'].endswith('MegatronArguments')  # the first base wins over BaseArguments
    assert 'max_epochs' not in f and 'tuner_type' in f
    old = snap.load('3.12.6')['fields']
    assert 'max_epochs' in old and 'train_type' in old and 'tuner_type' not in old
    # every 3.x rename target exists in 4.x, every source in 3.12
    for src, (dst, how) in snap.RENAMED_4.items():
        assert src in old, src
        assert dst is None or dst in f, dst


@pytest.mark.slow
def test_snapshot_matches_the_real_dataclass_fields():
    out = subprocess.run(
        [sys.executable, str(HERE / 'standins' / 'megatron_fields.py')],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=HERE.parent,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    real = json.loads(out.stdout.strip().splitlines()[-1])
    stored = snap.load(INSTALLED)['fields']
    assert len(real) > 300
    assert set(real) == set(stored), (sorted(set(real) - set(stored)), sorted(set(stored) - set(real)))
    differ = {k: (real[k], stored[k]['default']) for k in real if real[k] != stored[k]['default']}
    assert not differ, differ  # every default, as the class holds it
