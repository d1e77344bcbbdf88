"""Write grpo_recipes/trl_transformers_fields.json: for each TRL minor release the guard accepts (--trl-version), the
transformers release its packaging required (``transformers>=X`` in setup.cfg up to v0.17, pyproject.toml from v0.18,
read at each tag of github.com/huggingface/trl), and the fields of that release's ``TrainingArguments`` (the
``init=True`` fields HfArgumentParser turns into flags: transformers/hf_argparser.py ``_add_dataclass_arguments``),
read with ``ast`` from transformers' own ``training_args.py`` in each release's wheel (nothing imported).

    python scripts/gen_trl_transformers_fields.py transformers-4.46.0-py3-none-any.whl ...

(wheels from ``pip download --no-deps transformers==X``). GRPOConfig subclasses TrainingArguments, so these are
names an older TRL's parser knew although the installed transformers may have removed them (``warmup_ratio``,
removed in transformers 5)."""

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / 'grpo_recipes' / 'trl_transformers_fields.json'
# TRL minor -> transformers>= of its packaging (huggingface/trl tags v0.14.0 ... v0.29.0)
TRL_REQUIRES = {
    '0.14': '4.46.0',
    '0.15': '4.46.0',
    '0.16': '4.46.0',
    '0.17': '4.46.0',
    '0.18': '4.50.0',
    '0.19': '4.51.0',
    '0.20': '4.53.2',
    '0.21': '4.55.0',
    '0.22': '4.55.0',
    '0.23': '4.56.1',
    '0.24': '4.56.1',
    '0.25': '4.56.1',
    '0.26': '4.56.1',
    '0.27': '4.56.2',
    '0.28': '4.56.2',
    '0.29': '4.56.2',
}


def training_arguments_fields(source: str) -> list[str]:
    """The init fields of ``class TrainingArguments`` in transformers' training_args.py, in order."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == 'TrainingArguments')
    out = []
    for node in cls.body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        v = node.value
        if isinstance(v, ast.Call) and any(
            k.arg == 'init' and isinstance(k.value, ast.Constant) and k.value.value is False for k in v.keywords
        ):
            continue
        out.append(node.target.id)
    return out


def from_wheel(path: str) -> tuple[str, list[str]]:
    version = re.search(r'transformers-([\d.]+)-', Path(path).name).group(1)
    with zipfile.ZipFile(path) as z:
        return version, training_arguments_fields(z.read('transformers/training_args.py').decode('utf-8'))


if __name__ == '__main__':
    releases = dict(from_wheel(p) for p in sys.argv[1:])
    missing = sorted(set(TRL_REQUIRES.values()) - set(releases))
    if missing:
        sys.exit(f'wheels needed for transformers {", ".join(missing)}')
    data = {
        'generated_by': 'scripts/gen_trl_transformers_fields.py',
        'trl_requires': TRL_REQUIRES,
        'training_arguments': {v: releases[v] for v in sorted(set(TRL_REQUIRES.values()))},
    }
    OUT.write_text(json.dumps(data, indent=1) + '\n')
    print(f'wrote {OUT}')
