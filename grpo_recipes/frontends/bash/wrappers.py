"""The commands that run another command (``nohup``, ``setsid``, ``timeout 1h``, ``nice -n 5``, ``bash -c '...'``):
where their own words end and the command they run begins. Pure; used by the evaluator and the launch readers."""

from __future__ import annotations

# Commands that run the rest of their words as a command of their own, with the options each takes a value for.
# nohup/exec/time/command: coreutils and bash builtins; setsid (util-linux): -c -f -w, no values; timeout
# (coreutils): DURATION before the command, -s/-k take a value; nice: -n takes a value; stdbuf: -i/-o/-e values.
WRAPPERS: dict[str, set[str]] = {
    'nohup': set(),
    'exec': set(),
    'time': set(),
    'command': set(),
    'setsid': set(),
    'timeout': {'-s', '--signal', '-k', '--kill-after'},
    'nice': {'-n', '--adjustment'},
    'stdbuf': {'-i', '-o', '-e', '--input', '--output', '--error'},
}
# Wrappers whose first positional word is theirs, not the command's (timeout's DURATION).
_POSITIONAL = {'timeout': 1}
# Environment managers whose `run` subcommand runs the rest as a command in their environment, with the options
# each takes a value for (flags take none). uv: `uv run [OPTIONS] [COMMAND]`, every uv option before the command
# (https://docs.astral.sh/uv/reference/cli/#uv-run, uv-cli RunArgs); `uv run -m M` and `uv run F.py` run python.
# conda/mamba/micromamba: `conda run [-n ENV | -p PREFIX] [--cwd DIR] EXECUTABLE ...`
# (https://docs.conda.io/projects/conda/en/stable/commands/run.html). poetry: `poetry run [-C DIR] [-P DIR] CMD`
# (https://python-poetry.org/docs/cli/#run). pipenv: `pipenv run CMD`.
_UV_VALUES = {
    '--extra', '--no-extra', '--group', '--no-group', '--only-group', '--env-file', '--with', '--with-editable',
    '--with-requirements', '--package', '--python', '-p', '--python-platform', '--max-recursion-depth', '--index',
    '--default-index', '--index-url', '-i', '--extra-index-url', '--find-links', '-f', '--upgrade-package', '-P',
    '--reinstall-package', '--index-strategy', '--keyring-provider', '--resolution', '--prerelease', '--exclude-newer',
    '--exclude-newer-package', '--link-mode', '--config-setting', '-C', '--no-build-package', '--no-binary-package',
    '--refresh-package', '--directory', '--project', '--config-file', '--cache-dir', '--color',
    '--allow-insecure-host',
}  # fmt: skip
_CONDA_VALUES = {'-n', '--name', '-p', '--prefix', '--cwd'}
RUNNERS: dict[str, set[str]] = {
    'uv': _UV_VALUES,
    'conda': _CONDA_VALUES,
    'mamba': _CONDA_VALUES,
    'micromamba': _CONDA_VALUES,
    'poetry': {'-C', '--directory', '-P', '--project'},
    'pipenv': set(),
}
SHELLS = ('bash', 'sh', 'dash', 'zsh')


def strip_wrapper(words: list[str]) -> list[str] | None:
    """``nohup cmd ...`` / ``timeout -s INT 2h cmd ...`` / ``nice -n 5 cmd`` -> ``cmd ...``; None if ``words``
    does not start with a wrapper (or the wrapper has no command after it)."""
    head = words[0] if words else ''
    if head.rsplit('/', 1)[-1] in RUNNERS and words[1:2] == ['run']:
        return _strip_runner(head.rsplit('/', 1)[-1], words[2:])
    if head not in WRAPPERS:
        return None
    takes = WRAPPERS[head]
    i, positional = 1, _POSITIONAL.get(head, 0)
    while i < len(words):
        w = words[i]
        if w == '--':
            i += 1
            break
        if w.startswith('-') and len(w) > 1:
            i += 2 if w in takes else 1  # --signal=INT and -n5 carry their value
            continue
        if positional:
            positional -= 1
            i += 1
            continue
        break
    rest = words[i:]
    return rest or None


def _strip_runner(tool: str, words: list[str]) -> list[str] | None:
    """The command after ``uv run`` / ``conda run -n ENV`` / ``poetry run`` (their own options skipped)."""
    takes, i = RUNNERS[tool], 0
    while i < len(words):
        w = words[i]
        if w == '--':
            i += 1
            break
        if tool == 'uv' and w in ('-m', '--module'):
            return ['python', '-m', *words[i + 1 :]] if i + 1 < len(words) else None
        if w.startswith('-') and len(w) > 1:
            i += 2 if w in takes else 1  # --python=3.11 carries its value
            continue
        break
    rest = words[i:]
    if tool == 'uv' and rest and rest[0].endswith('.py'):
        return ['python', *rest]  # uv run train.py is uv run python train.py
    return rest or None


def shell_c(words: list[str]) -> str | None:
    """``bash -c 'STRING' [name args]`` (also ``sh``, ``-lc``, ``-ec`` ...) -> STRING; None otherwise."""
    if not words or words[0].rsplit('/', 1)[-1] not in SHELLS:
        return None
    for i, w in enumerate(words[1:], 1):
        if not w.startswith('-'):
            return None  # bash script.sh: a script, not a command string
        if 'c' in w.lstrip('-') and not w.startswith('--') and i + 1 < len(words):
            return words[i + 1]
    return None


# Containers that run a command in an image: `apptainer exec [OPTIONS] IMAGE CMD ...` (also `run`; Singularity, its
# former name, the same), with the options each takes a value for (apptainer exec --help, Apptainer 1.3). `--env
# A=1,B=2` sets the command's environment inside the container.
_APPTAINER_VALUES = {
    '--add-caps', '--app', '--apply-cgroups', '--bind', '-B', '--blkio-weight', '--blkio-weight-device',
    '--cpu-shares', '--cpus', '--cpuset-cpus', '--cpuset-mems', '--dns', '--drop-caps', '--env', '--env-file',
    '--home', '-H', '--hostname', '--memory', '--memory-reservation', '--memory-swap', '--mount', '--network',
    '--network-args', '--overlay', '-o', '--pids-limit', '--pwd', '--scratch', '-S', '--security', '--workdir', '-W',
    '--passphrase', '--pem-path', '--sif-fuse', '--fusemount', '--config',
}  # fmt: skip
CONTAINERS = {'apptainer': _APPTAINER_VALUES, 'singularity': _APPTAINER_VALUES}


# `docker run|exec [OPTIONS] IMAGE|CONTAINER CMD ...` (also podman), with the options that take a value (docker run
# --help, Docker 27); `-e/--env K=V` sets the command's environment; `--gpus all|N|"device=0,1"` decides the GPUs the
# container sees, renumbered from 0 (NVIDIA Container Toolkit): N or a device list of N ids is CUDA_VISIBLE_DEVICES
# 0..N-1 inside.
_DOCKER_VALUES = {
    '-a', '--attach', '--add-host', '--annotation', '--blkio-weight', '--blkio-weight-device', '--cap-add',
    '--cap-drop', '--cgroup-parent', '--cgroupns', '--cidfile', '--cpu-period', '--cpu-quota', '--cpu-rt-period',
    '--cpu-rt-runtime', '-c', '--cpu-shares', '--cpus', '--cpuset-cpus', '--cpuset-mems', '--detach-keys', '--device',
    '--device-cgroup-rule', '--device-read-bps', '--device-read-iops', '--device-write-bps', '--device-write-iops',
    '--dns', '--dns-option', '--dns-search', '--domainname', '--entrypoint', '-e', '--env', '--env-file', '--expose',
    '--gpus', '--group-add', '--health-cmd', '--health-interval', '--health-retries', '--health-start-interval',
    '--health-start-period', '--health-timeout', '-h', '--hostname', '--ip', '--ip6', '--ipc', '--isolation',
    '--kernel-memory', '-l', '--label', '--label-file', '--link', '--link-local-ip', '--log-driver', '--log-opt',
    '--mac-address', '-m', '--memory', '--memory-reservation', '--memory-swap', '--memory-swappiness', '--mount',
    '--name', '--network', '--network-alias', '--oom-score-adj', '--pid', '--pids-limit', '--platform', '-p',
    '--publish', '--pull', '--restart', '--runtime', '--security-opt', '--shm-size', '--stop-signal', '--stop-timeout',
    '--storage-opt', '--sysctl', '--tmpfs', '--ulimit', '-u', '--user', '--userns', '--uts', '-v', '--volume',
    '--volume-driver', '--volumes-from', '-w', '--workdir',
}  # fmt: skip


def _options(words: list[str], takes: set[str], grouped: bool) -> tuple[list[tuple[str, str]], int]:
    """A container command's options from ``words[2]`` on: ((option, value) pairs, the index of the image). ``grouped``:
    short flags run together, the last one taking a value (docker's ``-ite VALUE``)."""
    found, i = [], 2
    while i < len(words) and words[i].startswith('-') and words[i] != '-':
        opt, eq, value = words[i].partition('=')
        grouped_value = grouped and not opt.startswith('--') and len(opt) > 2 and f'-{opt[-1]}' in takes
        if not eq and (opt in takes or grouped_value):
            value, i = (words[i + 1] if i + 1 < len(words) else ''), i + 1
        found.append((opt, value))
        i += 1
    return found, i


def container_exec(words: list[str]) -> tuple[dict[str, str], list[str]] | None:
    """``apptainer exec [OPTIONS] IMAGE CMD ...`` / ``docker run [OPTIONS] IMAGE CMD ...`` -> (the variables the
    container gives CMD, CMD ...); None for anything else."""
    head = words[0].rsplit('/', 1)[-1] if words else ''
    docker = head in ('docker', 'podman') and words[1:2] in (['run'], ['exec'])
    if not docker and (head not in CONTAINERS or words[1:2] not in (['exec'], ['run'])):
        return None
    found, image = _options(words, _DOCKER_VALUES if docker else CONTAINERS[head], grouped=docker)
    env: dict[str, str] = {}
    for opt, value in found:
        if docker and opt in ('-e', '--env'):
            name, eq, v = value.partition('=')
            if eq and name.isidentifier():
                env[name] = v
        elif docker and opt == '--gpus':
            spec = value.strip('"\'')
            ids = spec[len('device=') :].split(',') if spec.startswith('device=') else None
            n = len(ids) if ids else int(spec) if spec.isdigit() else None
            if n:
                env['CUDA_VISIBLE_DEVICES'] = ','.join(str(k) for k in range(n))  # renumbered inside
        elif not docker and opt == '--env':  # A=1,B=2; a piece without `=` belongs to the value before (1,2)
            last = None
            for pair in value.split(','):
                name, eq, v = pair.partition('=')
                if eq and name.isidentifier():
                    env[name], last = v, name
                elif last is not None:
                    env[last] += ',' + pair
    rest = words[image + 1 :]  # words[image] is the image (run) or the container (exec)
    return (env, rest) if rest else None
