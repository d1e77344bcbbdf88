"""The port a rollout server listens on, and the trainer that connects to another one.

Both servers listen on port 8000 unless told otherwise: ms-swift 4.6 ``swift/arguments/deploy_args.py``
(``DeployArguments.port: int = 8000``, which ``RolloutArguments`` inherits) and TRL 0.29
``trl/scripts/vllm_serve.py`` (``ScriptArguments.port``, default 8000). Both trainers connect to port 8000 unless
told otherwise: ms-swift ``swift/rlhf_trainers/args_mixin.py`` (``vllm_server_port: List[int] = [8000]``) and TRL
``trl/trainer/grpo_config.py`` (``vllm_server_port``, default 8000); a ``vllm_server_base_url`` replaces host and
port in both. A trainer that connects to a port no server listens on waits for its server and then stops
(``VLLMClient.check_server`` in both frameworks); pure, no network.
"""

from __future__ import annotations

from urllib.parse import urlparse

from ..findings import ERROR, WARNING, Finding, declare

DEFAULT_PORT = 8000
"""``swift rollout`` and ``trl vllm-serve`` both default to it (see the module docstring)."""


def server_port(rollout) -> int | None:
    """The port the server's command sets (its last ``--port``), else the default; None when unreadable."""
    port: str | None = None
    args = list(rollout.argv)
    for i, tok in enumerate(args):
        if tok == '--port' and i + 1 < len(args):
            port = args[i + 1]
        elif tok.startswith('--port='):
            port = tok.split('=', 1)[1]
    if port is None:
        return DEFAULT_PORT
    try:
        return int(port)
    except ValueError:
        return None


def trainer_ports(cfg) -> tuple[list[int], str]:
    """(the ports the trainer connects to, the argument that sets them)."""
    urls = cfg.vllm_server_base_url or []
    if urls:
        out = []
        for u in urls:
            parsed = urlparse(u if '//' in u else f'//{u}')
            try:
                port = parsed.port
            except ValueError:
                port = None
            if port is None:  # no port in the URL: the scheme's own
                port = 443 if parsed.scheme == 'https' else 80
            out.append(port)
        return out, 'vllm_server_base_url'
    return [int(p) for p in (cfg.vllm_server_port or [DEFAULT_PORT])], 'vllm_server_port'


def port_findings(cfg, rollout) -> list[Finding]:
    """Server mode with the server's command known: the trainer must connect to the port the server listens on."""
    if rollout is None or not (cfg.rollout_mode == 'server'):
        return []
    port = server_port(rollout)
    if port is None:
        return []
    ports, arg = trainer_ports(cfg)
    if port in ports:
        return []
    srv = rollout.fw.server
    said = (
        'its --port'
        if any(t == '--port' or t.startswith('--port=') for t in rollout.argv)
        else 'its default, --port not given'
    )
    fix = (
        f'{arg}: {port}' if arg == 'vllm_server_port' else f'vllm_server_base_url with port {port}'
    ) + f', or start the server with --port {ports[0]}'
    src = rollout.fw.server_port_source
    # a server quoted in a comment (ms-swift's examples document their servers that way) is documentation the user
    # may not follow to the letter: the mismatch is said, as a warning (as its rejected arguments are)
    commented = rollout.commented
    return [
        Finding(
            WARNING if commented else ERROR,
            'rollout.port',
            [arg],
            f'the trainer connects to port {",".join(map(str, ports))} ({arg}), but {srv} ({rollout.source}) '
            f'listens on port {port} ({said}): the trainer waits for a server that is not there and stops'
            + (' (the server is quoted in a comment: started as written there)' if commented else ''),
            fix,
            src,
        )
    ]


declare(f'{__name__}.port_findings', ('rollout.port',))
