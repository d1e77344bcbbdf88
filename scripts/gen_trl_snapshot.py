"""Write grpo_recipes/trl_args_snapshot.json from the installed TRL: every field of GRPOConfig, ModelConfig
and ScriptArguments (what a TRL script's TrlParser reads), of `trl grpo`'s GRPOScriptArguments and
DatasetMixtureConfig (trl/scripts/grpo.py make_parser) and of trl vllm-serve's ScriptArguments, with its default
and type. tests/test_trl.py regenerates it and fails on drift."""

import dataclasses
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / 'grpo_recipes' / 'trl_args_snapshot.json'


def jsonable(v):
    if v is dataclasses.MISSING:
        return None
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return str(getattr(v, 'value', v))


def fields_of(cls):
    out = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        out.append({'name': f.name, 'default': jsonable(default), 'type': str(f.type)})
    return out


def build():
    import trl
    from trl import GRPOConfig, ModelConfig, ScriptArguments
    from trl.scripts.grpo import DatasetMixtureConfig, GRPOScriptArguments
    from trl.scripts.vllm_serve import ScriptArguments as VllmServeArguments

    return {
        'generated_by': 'scripts/gen_trl_snapshot.py',
        'trl_version': trl.__version__,
        'GRPOConfig': fields_of(GRPOConfig),
        'ModelConfig': fields_of(ModelConfig),
        'ScriptArguments': fields_of(ScriptArguments),
        'VllmServeArguments': fields_of(VllmServeArguments),
        'GRPOScriptArguments': fields_of(GRPOScriptArguments),
        'DatasetMixtureConfig': fields_of(DatasetMixtureConfig),
    }


if __name__ == '__main__':
    snap = build()
    if '--print' in sys.argv:
        json.dump(snap, sys.stdout, indent=1)
    else:
        OUT.write_text(json.dumps(snap, indent=1) + '\n')
        print(f'wrote {OUT}')
