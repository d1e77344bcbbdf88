"""``peft_config=get_peft_config(model_args)`` in a TRL training script: LoRA only when the command line says so.

TRL's helper ``get_peft_config`` (trl/trainer/utils.py, the same body from v0.14.0 to v0.29.1) starts with
``if model_args.use_peft is False: return None``, and ``ModelConfig.use_peft`` defaults to False
(trl/trainer/model_config.py). open-r1's ``src/open_r1/grpo.py`` and most scripts derived from TRL's
``examples/scripts/grpo.py`` pass it straight to ``GRPOTrainer``: such a script trains the full model (with
its optimizer states) unless ``--use_peft`` is on the command line or in the ``--config`` file. The trainer
call is therefore not a LoRA setting by itself; the flags decide, and they are read as TRL's parser reads them.
"""

from __future__ import annotations

import ast

HELPERS = ('get_peft_config',)
"""Functions that return a PeftConfig only when ``ModelConfig.use_peft`` is true."""


def _callee(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def peft_from_command_line(value: ast.expr, tree: ast.Module) -> bool:
    """True when the trainer's ``peft_config`` is ``get_peft_config(...)``, directly or through a name bound to
    it anywhere in the script (open-r1 binds it inside ``main``)."""
    if _callee(value) in HELPERS:
        return True
    if isinstance(value, ast.Name):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == value.id for t in node.targets)
                and _callee(node.value) in HELPERS
            ):
                return True
    return False
