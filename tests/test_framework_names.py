"""No module outside ``grpo_recipes/frontends/`` compares a framework's name: what differs between ms-swift,
TRL and Megatron-SWIFT is a typed fact of the launch's front end (``launch.fw``, a
:class:`grpo_recipes.framework.Framework` each front end's package defines and ``frontends.FRAMEWORKS``
registers). Read from the source with ast: a comparison (``==``, ``!=``, ``in``, ``not in``) with a framework's
name as a string (or a tuple of them), or with anything called ``framework``."""

import ast
import pathlib

import grpo_recipes

PACKAGE = pathlib.Path(grpo_recipes.__file__).parent
NAMES = {'swift', 'trl', 'megatron'}


def _is_name(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value in NAMES:
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):  # ('swift', 'trl'), not the words ['swift', 'rlhf']
        return bool(node.elts) and all(isinstance(e, ast.Constant) and e.value in NAMES for e in node.elts)
    return (isinstance(node, ast.Attribute) and node.attr == 'framework') or (
        isinstance(node, ast.Name) and node.id == 'framework'
    )


def comparisons(root: pathlib.Path = PACKAGE) -> list[str]:
    """``path:line`` of every framework-name comparison outside frontends/."""
    out = []
    for path in sorted(root.rglob('*.py')):
        rel = path.relative_to(root)
        if rel.parts[0] == 'frontends':
            continue
        for node in ast.walk(ast.parse(path.read_text('utf-8'))):
            if isinstance(node, ast.Compare) and any(_is_name(n) for n in [node.left, *node.comparators]):
                out.append(f'{rel}:{node.lineno}')
    return out


def test_the_scan_sees_a_comparison(tmp_path):
    (tmp_path / 'rule.py').write_text("def f(launch):\n    return launch.framework == 'trl' or x in ('swift',)\n")
    (tmp_path / 'frontends').mkdir()
    (tmp_path / 'frontends' / 'own.py').write_text("ok = name == 'trl'\n")
    assert comparisons(tmp_path) == ['rule.py:2', 'rule.py:2']


def test_no_framework_name_is_compared_outside_the_front_ends():
    assert comparisons() == []
