"""What the README and the Makefile tell a new user matches the code: which commands take --json, how the
commands get on PATH, and that the `gpu` extra and constraints.txt agree (a resolver that sees both could not
install it otherwise: `pip install --dry-run -c constraints.txt -e '.[gpu]'` was run to check the transitive
pins, which need the index; this test checks the direct ones offline)."""

import argparse
import re

import tomllib
from conftest import ROOT
from packaging.requirements import Requirement

README = (ROOT / 'README.md').read_text(encoding='utf-8')


def _subcommands_with_json(parser: argparse.ArgumentParser) -> dict[str, bool]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: any('--json' in a.option_strings for a in p._actions) for name, p in sub.choices.items()}


def test_readme_json_claim_matches_every_command():
    from data_tools.cli import build_parser as data_parser
    from grpo_recipes.cli.guard import build_parser as guard_parser
    from grpo_recipes.cli.recipes import build_parser as recipes_parser

    actual = {}
    for prog, parser in (
        ('grpo-guard', guard_parser()),
        ('grpo-recipes', recipes_parser()),
        ('grpo-data', data_parser()),
    ):
        actual.update({(prog, k): v for k, v in _subcommands_with_json(parser).items()})
    para = re.search(r'`--json` \(one JSON object.*?print plain text only', README, re.S).group(0)
    taken, plain = para.split('; ', 1)

    def listed(text):
        out, prog = set(), None
        for tok in re.findall(r'`([^`]+)`', text):
            if tok.startswith('--'):
                continue
            if ' ' in tok:
                prog, tok = tok.split(' ', 1)
            out.add((prog, tok))
        return out

    assert listed(taken) == {k for k, v in actual.items() if v}
    assert listed(plain) == {k for k, v in actual.items() if not v}
    assert 'Every command takes `--json`' not in README


def test_readme_and_makefile_say_how_the_commands_get_on_path():
    make = (ROOT / 'Makefile').read_text(encoding='utf-8')
    assert 'source $(VENV)/bin/activate' in make
    assert 'source .venv/bin/activate' in README
    assert '--index-url https://download.pytorch.org/whl/cpu' in README


def test_gpu_extra_agrees_with_constraints():
    pins = {}
    for line in (ROOT / 'constraints.txt').read_text(encoding='utf-8').splitlines():
        if '==' in line and not line.startswith('#'):
            name, ver = line.split('==', 1)
            pins[name.strip().lower().replace('_', '-')] = ver.strip()
    extras = tomllib.loads((ROOT / 'pyproject.toml').read_text(encoding='utf-8'))['project']['optional-dependencies']
    for extra in ('gpu', 'test'):
        for spec in extras[extra]:
            req = Requirement(spec)
            pinned = pins.get(req.name.lower().replace('_', '-'))
            if pinned is not None:
                assert req.specifier.contains(pinned), f'[{extra}] {spec} excludes constraints.txt {req.name}=={pinned}'
