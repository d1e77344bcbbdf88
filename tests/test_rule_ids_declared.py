"""Every rule id the code writes into a finding (``Finding(severity, 'id', ...)``) or a memory/vLLM problem
(``{'check': 'id', ...}``) is declared (``@rule(...)`` or ``findings.declare``), so tests/test_rule_ids.py, which
requires every declared id to be exercised, sees them all. Read from the source: an id built at run time (an
f-string) is not seen here and must be declared by hand."""

import pathlib
import re

import grpo_recipes.check  # noqa: F401  (registers every rule)
import grpo_recipes.frontends.megatron  # noqa: F401  (the Megatron front end registers its own rules)
import grpo_recipes.frontends.trl.script_cli  # noqa: F401  (declares what it emits after the rules run)
from grpo_recipes.findings import RULE_IDS

PACKAGE = pathlib.Path(grpo_recipes.check.__file__).parent
# the first dotted lower-case string after `Finding(` (its severity may be an expression), or a problem's 'check'
LITERAL_IDS = (
    re.compile(r"Finding\((?:(?!Finding\().){0,160}?'([a-z]+\.[a-z0-9-]+)'", re.S),
    re.compile(r"'check':\s*'([a-z]+\.[a-z0-9-]+)'"),
)


def test_every_literal_rule_id_is_declared():
    written = {i for p in PACKAGE.rglob('*.py') for rx in LITERAL_IDS for i in rx.findall(p.read_text('utf-8'))}
    assert len(written) > 60  # the scan reads the package, not an empty tree
    assert not sorted(written - set(RULE_IDS)), 'ids emitted but not declared'
