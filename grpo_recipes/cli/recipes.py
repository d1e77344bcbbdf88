"""``grpo-recipes``: list, copy and validate the shipped recipes (after torchtune's ``tune ls/cp/validate``).

    grpo-recipes ls [--json]                 recipe, model, GPUs, mode, tuner, predicted peak, validation
    grpo-recipes cp NAME DEST                copy the YAML and its launcher out for editing
    grpo-recipes validate [NAME|PATH ...]    ms-swift's real parser + the guard on the recipe's hardware
    grpo-recipes plan NAME                   the guard's full plan for a recipe (same as grpo-guard check)
    grpo-recipes header [NAME ...] --write   regenerate the plan summary in the YAML headers (--check: CI)

Exit status: 0 ok, 1 a recipe failed, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import GuardError
from ..recipes import rollout_argv
from .common import fail, package_version, parse_command, pipe_safe_stdout, print_json


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog='grpo-recipes',
        description='List, copy and validate the GRPO recipes shipped with grpo-recipes.',
        epilog=__doc__.split('\n\n')[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument('--version', action='version', version=f'grpo-recipes {package_version()}')
    sub = p.add_subparsers(dest='cmd', metavar='COMMAND')
    ls = sub.add_parser('ls', help='table of recipes with their predicted peak and validation levels')
    ls.add_argument('--json', action='store_true', help='machine-readable output')
    cp = sub.add_parser('cp', help='copy a recipe pair (YAML + launcher) out for editing')
    cp.add_argument('name')
    cp.add_argument('dest', type=Path, help='a directory (created if missing)')
    cp.add_argument('--force', action='store_true', help='overwrite existing files')
    va = sub.add_parser('validate', help='run the real ms-swift parser and the guard on recipes')
    va.add_argument('names', nargs='*', help='recipe names or YAML paths (default: all)')
    va.add_argument('--json', action='store_true')
    pl = sub.add_parser('plan', help="print the guard's plan for a recipe on its hardware")
    pl.add_argument('name')
    pl.add_argument('--json', action='store_true')
    pl.add_argument(
        '--model-config',
        metavar='DIR',
        help="a dir holding the model's config.json (or the file) "
        'when the model is neither local nor in the HF/ModelScope cache',
    )
    pl.add_argument(
        '--allow-unchecked',
        action='store_true',
        help='exit 0 when the rules pass but memory could not be checked (as grpo-guard check)',
    )
    hd = sub.add_parser('header', help='regenerate or check the plan summary in recipe headers')
    hd.add_argument('names', nargs='*')
    mode = hd.add_mutually_exclusive_group(required=True)
    mode.add_argument('--write', action='store_true')
    mode.add_argument('--check', action='store_true', help='exit 1 if a header is stale')
    ar = sub.add_parser(
        'arg', help='print arguments of a recipe as swift would read them, one per line (for launchers)'
    )
    ar.add_argument('recipe')
    ar.add_argument(
        'keys',
        nargs='+',
        metavar='key',
        help='an argument name, ENV.<VAR> from its ENV block, or @gpus/@gpu_type/@rollout_gpus',
    )
    mc = sub.add_parser(
        'model-check',
        help='exit 1 with one line when swift cannot get the model here (not local, '
        'not cached, hub unreachable or HF_HUB_OFFLINE); launchers run it before training',
    )
    mc.add_argument('model')
    ra = sub.add_parser('rollout-args', help='the `swift rollout` arguments of a server-mode recipe, one per line')
    ra.add_argument('recipe')
    return p


def recipe_report(recipe, environ: dict | None = None, extra: list[str] | None = None, model_config=None):
    """The guard's check of a recipe on the hardware in its header."""
    from ..check import check_launch
    from ..frontends import read_launch as load_launch
    from ..frontends.swift.reader import read_rollout
    from ..hardware import Hardware, parse_gpu_ids

    launch = load_launch(recipe.launch_argv(extra), environ=environ if environ is not None else {})
    rollout = parse_gpu_ids(recipe.rollout_gpus, '@rollout_gpus') if recipe.rollout_gpus else None
    hw = Hardware(gpus=recipe.gpus or None, gpu_type=recipe.gpu_type, source='recipe header', rollout_gpus=rollout)
    if recipe.command:  # run by its own command (`megatron rlhf`): no `swift rollout` beside it
        return check_launch(launch, hw, model_config=model_config)
    from ..config import GRPOConfig

    cfg, _ = GRPOConfig.from_argv(launch.argv)
    args = rollout_argv(cfg)
    if args is not None:  # server mode: the `swift rollout` command the launcher runs, as the guard reads it
        env = {'CUDA_VISIBLE_DEVICES': recipe.rollout_gpus} if recipe.rollout_gpus else {}
        launch.rollout = read_rollout(['--model', cfg.model, *args], env, f'{recipe.name} (rollout-args)')
    return check_launch(launch, hw, model_config=model_config)


def _facts(report) -> dict:
    """Model, mode, tuner and nodes of a recipe's report (a front end with its own plan says them itself)."""
    if hasattr(report, 'recipe_facts'):
        return report.recipe_facts()
    cfg = report.cfg
    return {
        'model': cfg.model,
        'mode': cfg.vllm_mode if cfg.use_vllm else 'hf-generate',
        'tuner': cfg.tuner_type + (f'+{cfg.quant_method}{cfg.quant_bits}' if cfg.quant_method else ''),
        'nodes': report.plan.nnodes if report.plan else 1,  # NNODES: the header's @gpus are one node's
    }


def _summary(recipe) -> dict:
    report = recipe_report(recipe)
    facts = _facts(report)
    peak = max((m.peak_fraction for m in report.memory), default=None)
    nodes = facts['nodes']
    rollout_node = recipe.meta.get('rollout_node')  # server mode on a node of its own
    hw = f'{recipe.gpus}x {recipe.gpu_type}'
    if nodes > 1:
        hw = f'{nodes} nodes × {hw}'
    if rollout_node:
        hw += ' + a rollout node'
    return {
        'name': recipe.name,
        'path': str(recipe.path),
        'launcher': str(recipe.launcher),
        'model': facts['model'],
        'hardware': hw,
        'gpus': recipe.gpus,
        'gpu_type': recipe.gpu_type,
        'nodes': nodes,
        'rollout_node': rollout_node,
        'mode': facts['mode'],
        'tuner': facts['tuner'],
        'peak_fraction': peak,
        'peak_gib': max((m.total_gib for m in report.memory), default=None),
        'fits': report.fits,
        'guard_ok': report.ok,
        'validation': recipe.validation,
        'errors': [f.message for f in report.findings if f.severity == 'error'],
    }


def cmd_ls(opts) -> int:
    from ..recipes import discover

    rows = [_summary(r) for r in discover()]
    if opts.json:
        print_json(rows)
        return 0
    from ..recipes import LEVEL_CODE, LEVEL_TEXT
    from .ls_table import recipes_table
    from .render import make_console

    con = make_console()
    codes = [' '.join(LEVEL_CODE[v] for v in r['validation'] if v in LEVEL_CODE) or '-' for r in rows]
    con.print(
        recipes_table(rows, codes, con.width, 'GRPO recipes for ms-swift 4.6 (grpo-recipes plan NAME: the full plan)')
    )
    con.print(
        "peak: largest predicted peak / capacity over the recipe's GPUs. valid.: "
        + '; '.join(f'{LEVEL_CODE[k]} = {v}' for k, v in LEVEL_TEXT.items())
        + '.'
    )
    con.print('No recipe has had a GPU run yet.')
    return 0


def cmd_cp(opts) -> int:
    from ..recipes import find

    recipe = find(opts.name)
    dest = opts.dest
    if dest.exists() and not dest.is_dir():
        raise GuardError(
            f'{dest}: exists and is not a directory; DEST is the directory the recipe is copied into '
            f'(e.g. grpo-recipes cp {opts.name} my-recipes/)'
        )
    files = [recipe.path, recipe.launcher]
    rollout = recipe.path.with_name(recipe.path.stem + '.rollout.yaml')
    if rollout.exists():
        files.append(rollout)
    files = [f for f in files if f.exists()]
    targets = [dest / f.name for f in files]
    clash = [str(t) for t in targets if t.exists()]
    if clash and not opts.force:
        raise GuardError(f'{", ".join(clash)} already exist(s); pass --force to overwrite')
    texts = [_copied_text(f, t, recipe) for f, t in zip(files, targets)]  # all read before anything is written
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for f, t, text in zip(files, targets, texts):
            _write_atomic(t, text, f.stat().st_mode)
            print(f'copied {f} -> {t}')
    except OSError as e:
        where = e.filename or dest
        raise GuardError(
            f'{where}: cannot write the copy ({e.strerror or e}); pick a DEST directory you can write'
        ) from None
    return 0


def _copied_text(src: Path, target: Path, recipe) -> str:
    """A recipe file as its copy says it: its launch line and library paths point at the copy, not the original."""
    import shlex

    text = src.read_text(encoding='utf-8')
    original = f'recipes/{recipe.path.parent.name}/{recipe.launcher.name}'
    copy_launcher = shlex.quote(str(target.with_name(recipe.launcher.name)))
    text = text.replace(f'# Launch: bash {original}', f'# Launch: bash {copy_launcher}')
    if src.suffix == '.sh':  # keep the copy pointing at the shared launcher library
        lib = Path(__file__).resolve().parents[2] / 'scripts' / 'launch_lib.sh'
        text = text.replace('source "$HERE/../../scripts/launch_lib.sh"', f'source "{lib}"')
        text = text.replace('# shellcheck source=SCRIPTDIR/../../scripts/launch_lib.sh', f'# shellcheck source={lib}')
    return text


def _write_atomic(target: Path, text: str, mode: int) -> None:
    """Write ``target`` whole or not at all (a temporary file beside it, renamed over it)."""
    import os
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f'.{target.name}.', suffix='.tmp')
    try:
        with os.fdopen(fd, 'w', encoding='utf-8') as f:
            f.write(text)
        os.chmod(tmp, mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cmd_validate(opts) -> int:
    from ..frontends import read_launch as load_launch
    from ..realparse import swift_parse, validate, validate_many
    from ..recipes import discover, find

    recipes = [find(n) for n in opts.names] if opts.names else discover()
    launches = [load_launch(r.launch_argv(), environ={}) for r in recipes]
    from .progress import progress

    # `swift rlhf` recipes through ms-swift's parser in one subprocess; another command's recipe through its front
    # end's own validator (Megatron-SWIFT: its release's argument snapshot)
    own = [i for i, la in enumerate(launches) if la.fw.validator != f'{swift_parse.__module__}:{swift_parse.__name__}']
    shared = [i for i in range(len(launches)) if i not in own]
    parsed = [None] * len(launches)
    with progress(f"validate: ms-swift's own parser on {len(launches)} recipe(s)"):
        for i, res in zip(shared, validate_many([launches[i] for i in shared]) if shared else []):
            parsed[i] = res
    for i in own:
        parsed[i] = validate(launches[i])
    results = []
    for r, res in zip(recipes, parsed):
        s = _summary(r)
        band = s['peak_fraction'] is not None and 0.75 <= s['peak_fraction'] <= 0.90
        results.append(
            {
                'name': r.name,
                'parsed': res.ok,
                'parser': res.parser,
                'parse_message': res.message,
                'guard_ok': s['guard_ok'],
                'peak_fraction': s['peak_fraction'],
                'in_band': band,
                'errors': s['errors'],
                'ok': res.ok and s['guard_ok'] and band,
            }
        )
    if opts.json:
        print_json(results)
    else:
        for r in results:
            mark = 'OK  ' if r['ok'] else 'FAIL'
            peak = f'{r["peak_fraction"]:.0%}' if r['peak_fraction'] is not None else '-'
            parsed = 'ok' if r['parsed'] else 'REJECTED: ' + str(r['parse_message'])
            print(
                f'{mark} {r["name"]}: {r["parser"]} {parsed}'
                f'; guard {"ok" if r["guard_ok"] else "errors: " + "; ".join(r["errors"])}; peak {peak}'
                f'{"" if r["in_band"] else " (outside 75-90%)"}'
            )
    return 0 if all(r['ok'] for r in results) else 1


def cmd_plan(opts) -> int:
    from ..recipes import find
    from .common import model_config_arg as _model_config
    from .verdict import report_json

    report = recipe_report(find(opts.name), model_config=_model_config(opts.model_config))
    if opts.json:
        print_json(report_json(report, opts.allow_unchecked))
    else:
        from .render import print_report

        print_report(report, allow_unchecked=opts.allow_unchecked)
    return report.exit_code(opts.allow_unchecked)


def cmd_header(opts) -> int:
    from ..recipe_header import full_block, is_stale, write_block
    from ..recipes import discover, find

    recipes = [find(n) for n in opts.names] if opts.names else discover()
    stale = []
    for r in recipes:
        block = full_block(r, recipe_report(r))  # the whole block, with what it was planned from
        if opts.write:
            if write_block(r.path, block):
                print(f'updated {r.path}')
        elif is_stale(r.path, block):  # named as find() finds it again: a bundled name, else the file's path
            stale.append(r.name if _bundled(r) else str(r.path))
    if stale:
        import shlex

        print(
            'stale plan header(s): '
            + ', '.join(stale)
            + '; run `grpo-recipes header --write '
            + ' '.join(shlex.quote(s) for s in stale)
            + '`',
            file=sys.stderr,
        )
        return 1
    return 0


def _bundled(recipe) -> bool:
    from ..recipes import discover

    return any(r.path.resolve() == recipe.path.resolve() for r in discover())


def cmd_arg(opts) -> int:
    from ..config import GRPOConfig
    from ..frontends import read_launch as load_launch
    from ..recipes import find

    recipe = find(opts.recipe)
    launch = load_launch(recipe.launch_argv(), environ={})
    # a recipe run by its own command: the values as its front end read them (every field of its argument class)
    fields = getattr(launch, 'args', None) if recipe.command else None
    cfg = None if fields is not None else GRPOConfig.from_argv(launch.argv)[0]
    values = []
    for key in opts.keys:  # all checked before anything is printed
        if key.startswith('@'):
            value = recipe.meta.get(key[1:], '')
        elif key.startswith('ENV.'):
            value = launch.env.get(key[4:], '')
        elif fields is not None:
            if key not in fields:
                raise GuardError(f'{key}: not an argument of `{" ".join(recipe.command)}`')
            value = fields[key]
            value = '' if value is None else (' '.join(map(str, value)) if isinstance(value, list) else value)
            value = str(value).lower() if isinstance(value, bool) else value
        else:
            if not hasattr(cfg, key):
                raise GuardError(f'{key}: not a field grpo-recipes reads (see grpo_recipes/config.py)')
            value = getattr(cfg, key)
            value = '' if value is None else (' '.join(map(str, value)) if isinstance(value, list) else value)
            value = str(value).lower() if isinstance(value, bool) else value
        values.append(str(value))
    print('\n'.join(values))
    return 0


def cmd_rollout_args(opts) -> int:
    """`swift rollout` arguments that mirror the recipe's vLLM settings (single source of truth)."""
    from ..config import GRPOConfig
    from ..frontends import read_launch as load_launch
    from ..recipes import find

    recipe = find(opts.recipe)
    if recipe.command:
        raise GuardError(f'{recipe.name}: not a server-mode recipe (it runs `{" ".join(recipe.command)}`)')
    cfg, _ = GRPOConfig.from_argv(load_launch([str(recipe.path)], environ={}).argv)
    args = rollout_argv(cfg)
    if args is None:
        raise GuardError(f'{recipe.name}: not a server-mode recipe')
    print('\n'.join(args))
    return 0


def cmd_model_check(opts) -> int:
    from ..model_reach import unreachable

    why = unreachable(opts.model)
    if why:
        print(f'error: {why}', file=sys.stderr)
        return 1
    return 0


COMMANDS = {
    'model-check': cmd_model_check,
    'ls': cmd_ls,
    'cp': cmd_cp,
    'validate': cmd_validate,
    'plan': cmd_plan,
    'header': cmd_header,
    'arg': cmd_arg,
    'rollout-args': cmd_rollout_args,
}


def main(argv: list[str] | None = None) -> int:
    opts = parse_command(build_parser(), argv)
    if isinstance(opts, int):
        return opts
    try:
        with pipe_safe_stdout():  # `| head`: the exit status stays the command's
            return COMMANDS[opts.cmd](opts)
    except GuardError as e:
        return fail(str(e), e.exit_code)
    except (ValueError, argparse.ArgumentError) as e:
        from ..swift_args import ArgumentError

        if not isinstance(e, (ArgumentError, argparse.ArgumentError)):
            raise
        return fail(
            f'{getattr(opts, "name", None) or getattr(opts, "recipe", None) or "the recipe"}: swift rlhf '
            f'rejects the arguments: {e}',
            1,
        )
    except BrokenPipeError:
        return 0
    except OSError as e:  # a path the system refuses (a name too long, a permission): name it, one line
        return fail(f'{e.filename or "input"}: {e.strerror or e}', 2)


if __name__ == '__main__':
    sys.exit(main())
