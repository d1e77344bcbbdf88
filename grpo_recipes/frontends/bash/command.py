"""One simple command as bash would run it (what :func:`..evaluate_script` returns)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Command:
    """One simple command: its own environment assignments and its argv."""

    env: dict[str, str] = field(default_factory=dict)
    """Assignments written before the command (``A=1 cmd``, ``env A=1 cmd``), and the variables the script exported
    (or assigned when the caller's environment already exported them)."""
    argv: list[str] = field(default_factory=list)
    line: int = 0
    """1-based line of a script where the command starts (0 for a command line)."""
    commented: bool = False
    """The command was written in a comment (ms-swift's examples show ``swift rollout`` that way)."""
    above: str = ''
    """The comment lines directly above the command (no blank line between), e.g. ``# run in another node``."""
    env_lines: dict[str, int] = field(default_factory=dict)
    """Script line where each ``env`` variable was set (its ``export`` line, or the command's own line)."""
    unresolved: list[str] = field(default_factory=list)
    """What the reader could not resolve in this command's argv or env, by name: ``$RANK``, ``${NNODES}``,
    ``$(nvidia-smi --list-gpus | wc -l)``. Each stays in the word as written."""
    placeholders: list[str] = field(default_factory=list)
    """``<DATA_PATH>``-style placeholders of an example, left to fill in (kept as words of argv)."""
    assumed: list[str] = field(default_factory=list)
    """Decisions the reader could not take from known values, e.g. ``assumed branch at line 7``."""
    loops: list[str] = field(default_factory=list)
    """The ``for`` iterations this command runs in, e.g. ``for LR in ... (line 3): LR=1e-6`` (a sweep)."""
    background: bool = False
    """Run with ``&`` (itself, or a list, group or subshell it is in): the script goes on without waiting for it."""
    captured: bool = False
    """Run inside a command substitution (``eval $(python3 read_config.py ...)``): its output is a value, so it is
    not a launch an undecided branch leads to."""
    role: str = ''
    """The command is the script's other role (an undecided branch beside the launch's: ``case "$1" in rollout)
    swift rollout ...``, ``if [ "$NODE_RANK" -eq 0 ]; then swift rollout ...; else swift rlhf ...``): the test that
    picks that role. It runs in another run of the script, so it does not hold up the launch. Empty otherwise."""
    role_node: bool = False
    """That test reads the node's rank or name: the role runs on another node than the launch."""
    cwd: str | None = None
    """The directory the command runs in (``cd`` followed lexically), for readers resolving relative paths."""
    defaults: list[str] = field(default_factory=list)
    """Variables set nowhere here whose empty default (``${DATASETS:-}``) the script took before this command: values
    the user's environment gives, empty here."""
    files: dict[str, str] = field(default_factory=dict)
    """Files the script wrote from its own here-documents before this command (``cat > cfg.yaml <<EOF``): absolute
    path -> text (frontends/written.py)."""
