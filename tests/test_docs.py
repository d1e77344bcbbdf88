"""The documentation site (docs/, built by `make test` with mkdocs build --strict) against the code: every flag of
every command's --help is in the CLI reference under that command, the GPU cards page lists exactly the catalogue,
the README stays an overview that links into the site, and no page points outside the repository or at this
project's issue tracker."""

import argparse
import re
import sys

import pytest
import yaml
from conftest import ROOT

sys.path.insert(0, str(ROOT / 'scripts'))
import gen_docs  # noqa: E402

DOCS = ROOT / 'docs'
REFERENCE = (DOCS / 'reference.md').read_text(encoding='utf-8')


def _sections(text: str) -> dict[str, str]:
    """'grpo-guard check' -> the text under its heading (down to the next heading of any level)."""
    parts = re.split(r'^#{2,3} (.+)$', text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def _help_flags(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings --help prints (the help flag itself aside)."""
    return {
        o
        for a in parser._actions
        if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)
        for o in a.option_strings
    }


COMMANDS = [
    (prog, name, sp)
    for prog, parser in gen_docs.parsers()
    for name, sp in [(None, parser), *gen_docs.subcommands(parser).items()]
]


@pytest.mark.parametrize('prog,name,parser', COMMANDS, ids=[f'{p} {n or ""}'.strip() for p, n, _ in COMMANDS])
def test_every_flag_of_every_command_is_in_the_reference(prog, name, parser):
    section = _sections(REFERENCE).get(f'{prog} {name}' if name else prog)
    assert section is not None, f'docs/reference.md has no section for {prog} {name or ""} (python scripts/gen_docs.py)'
    help_text = parser.format_help()
    for flag in _help_flags(parser):
        assert flag in help_text  # what --help prints ...
        assert f'`{flag}`' in section, (
            f'{prog} {name or ""}: {flag} is not in docs/reference.md (python scripts/gen_docs.py)'
        )


def test_the_reference_has_no_command_the_code_lacks():
    known = {f'{p} {n}' if n else p for p, n, _ in COMMANDS}
    assert set(_sections(REFERENCE)) == known


def test_the_card_list_is_the_catalogue():
    from grpo_recipes.gpus import CATALOGUE

    rows = re.findall(r'^\| (\S+) \| ([\d.]+) \| (\d+) \|', (DOCS / 'gpus.md').read_text(encoding='utf-8'), re.M)
    assert [(card, float(cap)) for card, cap, _ in rows] == [(k, round(v[0], 2)) for k, v in CATALOGUE.items()]
    assert {'H200', 'A6000'} <= {card for card, _, _ in rows}


def test_generated_pages_match_the_generator():
    assert gen_docs.main(['--check']) == 0


def test_every_page_is_in_the_navigation_and_every_entry_exists():
    nav = yaml.safe_load((ROOT / 'mkdocs.yml').read_text(encoding='utf-8'))['nav']
    pages = {next(iter(entry.values())) for entry in nav}
    assert pages == {p.name for p in DOCS.glob('*.md')}
    assert 'throughput.md' in pages


PAGES = sorted(DOCS.glob('*.md')) + [ROOT / 'README.md', ROOT / 'DEVELOPERS.md']


@pytest.mark.parametrize('page', PAGES, ids=lambda p: p.name)
def test_no_page_points_outside_the_repository_or_at_the_issue_tracker(page):
    text = page.read_text(encoding='utf-8')
    assert '../shared' not in text
    assert not re.search(r'\bissues? \d+\b', text, re.I), re.search(r'.{40}\bissues? \d+\b.{20}', text, re.I | re.S)
    assert 'no figure in this README is a GPU measurement' not in text
    assert 'until that term lands' not in text


def test_readme_is_an_overview_that_links_into_the_site():
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    assert len(readme.splitlines()) <= 200
    for cmd in ('make demo', 'make test'):
        assert cmd in readme
    links = re.findall(r'\]\((docs/[^)#]+)', readme)
    assert len(set(links)) >= 10
    for link in links:
        assert (ROOT / link).is_file(), link
    # the recipe table is one block between the markers the site includes (docs/launchers.md)
    table = readme.split('[start:recipe-table]')[1].split('[end:recipe-table]')[0]
    names = {f'{p.parent.name}/{p.stem}' for p in (ROOT / 'recipes').glob('*/*.yaml') if p.parent.name != 'examples'}
    assert names and {n for n in names if f'| {n} |' in table} == names
    assert '--8<-- "README.md:recipe-table"' in (DOCS / 'launchers.md').read_text(encoding='utf-8')


def test_the_example_config_does_not_claim_to_be_the_demo_input():
    make = (ROOT / 'Makefile').read_text(encoding='utf-8')
    demo = make.split('\ndemo:')[1].split('\n\n')[0]
    example = (ROOT / 'recipes' / 'examples' / 'qwen2.5-7b-lora-colocate.yaml').read_text(encoding='utf-8')
    if 'qwen2.5-7b-lora-colocate' not in demo:
        assert 'make demo' not in example


def test_make_test_builds_the_site_strictly_before_the_suite():
    make = (ROOT / 'Makefile').read_text(encoding='utf-8')
    target = make.split('\ntest:')[1].split('\n\n')[0]
    assert 'mkdocs build --strict' in target and target.index('mkdocs') < target.index('pytest')
    assert '--durations=15' in target
    assert 'site/' in (ROOT / '.gitignore').read_text(encoding='utf-8').splitlines()
