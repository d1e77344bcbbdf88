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

from ..check import check_launch
from ..config import GRPOConfig
from ..errors import GuardError
from ..frontends import read_launch
from ..frontends.swift.reader import read_rollout
from ..hardware import Hardware, parse_gpu_ids
from ..realparse import validate_many
from ..recipes import LEVEL_CODE, LEVEL_TEXT, discover, find, plan_block, rewrite_header
from .common import fail, parse_command, print_json
from .render import make_console, print_report


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog='grpo-recipes', description='List, copy and validate the GRPO recipes '
                                'shipped with grpo-recipes.', epilog=__doc__.split('\n\n')[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
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
    hd = sub.add_parser('header', help='regenerate or check the plan summary in recipe headers')
    hd.add_argument('names', nargs='*')
    mode = hd.add_mutually_exclusive_group(required=True)
    mode.add_argument('--write', action='store_true')
    mode.add_argument('--check', action='store_true', help='exit 1 if a header is stale')
    ar = sub.add_parser('arg', help='print arguments of a recipe as swift would read them, one per line (for launchers)')
    ar.add_argument('recipe')
    ar.add_argument('keys', nargs='+', metavar='key',
                    help='an argument name, ENV.<VAR> from its ENV block, or @gpus/@gpu_type/@rollout_gpus')
    ra = sub.add_parser('rollout-args', help='the `swift rollout` arguments of a server-mode recipe, one per line')
    ra.add_argument('recipe')
    return p


def recipe_report(recipe, environ: dict | None = None, extra: list[str] | None = None):
    """The guard's check of a recipe on the hardware in its header."""
    launch = read_launch([str(recipe.path), *(extra or [])], environ=environ if environ is not None else {})
    rollout = parse_gpu_ids(recipe.rollout_gpus, '@rollout_gpus') if recipe.rollout_gpus else None
    hw = Hardware(gpus=recipe.gpus or None, gpu_type=recipe.gpu_type, source='recipe header', rollout_gpus=rollout)
    cfg, _ = GRPOConfig.from_argv(launch.argv)
    args = rollout_argv(cfg)
    if args is not None:  # server mode: the `swift rollout` command the launcher runs, as the guard reads it
        env = {'CUDA_VISIBLE_DEVICES': recipe.rollout_gpus} if recipe.rollout_gpus else {}
        launch.rollout = read_rollout(['--model', cfg.model, *args], env, f'{recipe.name} (rollout-args)')
    return check_launch(launch, hw)


def rollout_argv(cfg) -> list[str] | None:
    """`swift rollout` arguments that mirror a server-mode recipe's vLLM settings (None: not server mode)."""
    if not (cfg.use_vllm and cfg.vllm_mode == 'server'):
        return None
    args = ['--vllm_tensor_parallel_size', str(cfg.vllm_tensor_parallel_size),
            '--vllm_data_parallel_size', str(cfg.vllm_data_parallel_size),
            '--vllm_gpu_memory_utilization', str(cfg.vllm_gpu_memory_utilization),
            '--port', str((cfg.vllm_server_port or [8000])[0])]
    if cfg.vllm_max_model_len:
        args += ['--vllm_max_model_len', str(cfg.vllm_max_model_len)]
    if cfg.vllm_enable_lora:
        args += ['--vllm_enable_lora', 'true', '--vllm_max_lora_rank', str(cfg.lora_rank)]
    return args


def _summary(recipe) -> dict:
    report = recipe_report(recipe)
    cfg = report.cfg
    peak = max((m.peak_fraction for m in report.memory), default=None)
    hw = f'{recipe.gpus}x {recipe.gpu_type}'
    return {'name': recipe.name, 'path': str(recipe.path), 'launcher': str(recipe.launcher), 'model': cfg.model,
            'hardware': hw, 'gpus': recipe.gpus, 'gpu_type': recipe.gpu_type,
            'mode': cfg.vllm_mode if cfg.use_vllm else 'hf-generate', 'tuner': cfg.tuner_type +
            (f'+{cfg.quant_method}{cfg.quant_bits}' if cfg.quant_method else ''),
            'peak_fraction': peak, 'peak_gib': max((m.total_gib for m in report.memory), default=None),
            'fits': report.fits, 'guard_ok': report.ok, 'validation': recipe.validation,
            'errors': [f.message for f in report.findings if f.severity == 'error']}


def cmd_ls(opts) -> int:
    rows = [_summary(r) for r in discover()]
    if opts.json:
        print_json(rows)
        return 0
    from rich import box
    from rich.table import Table
    t = Table(title='GRPO recipes for ms-swift 4.6 (grpo-recipes plan NAME: the full plan)', title_justify='left',
              title_style='bold', box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ('recipe', 'GPUs', 'mode', 'tuner', 'peak', 'valid.'):
        t.add_column(col, no_wrap=True, min_width=6 if col == 'valid.' else None)
    for r in rows:
        peak = f'{r["peak_fraction"]:.0%}' if r['peak_fraction'] is not None else '-'
        codes = ' '.join(LEVEL_CODE[v] for v in r['validation'] if v in LEVEL_CODE) or '-'
        t.add_row(r['name'], r['hardware'].replace(' ', ''), r['mode'], r['tuner'], peak, codes)
    con = make_console()
    con.print(t)
    con.print('peak: largest predicted peak / capacity over the recipe\'s GPUs. valid.: '
              + '; '.join(f'{LEVEL_CODE[k]} = {v}' for k, v in LEVEL_TEXT.items()) + '.')
    con.print('No recipe has had a GPU run yet.')
    return 0


def cmd_cp(opts) -> int:
    recipe = find(opts.name)
    dest = opts.dest
    dest.mkdir(parents=True, exist_ok=True)
    files = [recipe.path, recipe.launcher]
    rollout = recipe.path.with_name(recipe.path.stem + '.rollout.yaml')
    if rollout.exists():
        files.append(rollout)
    targets = [dest / f.name for f in files]
    clash = [str(t) for t in targets if t.exists()]
    if clash and not opts.force:
        raise GuardError(f'{", ".join(clash)} already exist(s); pass --force to overwrite')
    for f, t in zip(files, targets):
        if not f.exists():
            continue
        text = f.read_text(encoding='utf-8')
        if f.suffix == '.sh':  # keep the copy pointing at the shared launcher library
            lib = (Path(__file__).resolve().parents[2] / 'scripts' / 'launch_lib.sh')
            text = text.replace('source "$HERE/../../scripts/launch_lib.sh"', f'source "{lib}"')
        t.write_text(text, encoding='utf-8')
        t.chmod(f.stat().st_mode)
        print(f'copied {f} -> {t}')
    return 0


def cmd_validate(opts) -> int:
    recipes = [find(n) for n in opts.names] if opts.names else discover()
    launches = [read_launch([str(r.path)], environ={}) for r in recipes]
    parsed = validate_many(launches)
    results = []
    for r, res in zip(recipes, parsed):
        s = _summary(r)
        band = s['peak_fraction'] is not None and 0.75 <= s['peak_fraction'] <= 0.90
        results.append({'name': r.name, 'parsed': res.ok, 'parse_message': res.message, 'guard_ok': s['guard_ok'],
                        'peak_fraction': s['peak_fraction'], 'in_band': band, 'errors': s['errors'],
                        'ok': res.ok and s['guard_ok'] and band})
    if opts.json:
        print_json(results)
    else:
        for r in results:
            mark = 'OK  ' if r['ok'] else 'FAIL'
            peak = f'{r["peak_fraction"]:.0%}' if r['peak_fraction'] is not None else '-'
            print(f'{mark} {r["name"]}: ms-swift parser {"ok" if r["parsed"] else "REJECTED: " + str(r["parse_message"])}'
                  f'; guard {"ok" if r["guard_ok"] else "errors: " + "; ".join(r["errors"])}; peak {peak}'
                  f'{"" if r["in_band"] else " (outside 75-90%)"}')
    return 0 if all(r['ok'] for r in results) else 1


def cmd_plan(opts) -> int:
    report = recipe_report(find(opts.name))
    if opts.json:
        print_json(report.to_dict())
    else:
        print_report(report)
    return 0 if report.ok else 1


def cmd_header(opts) -> int:
    recipes = [find(n) for n in opts.names] if opts.names else discover()
    stale = []
    for r in recipes:
        block = plan_block(recipe_report(r))
        if opts.write:
            if rewrite_header(r.path, block):
                print(f'updated {r.path}')
        else:
            text = r.path.read_text(encoding='utf-8').splitlines()
            if not all(line in text for line in block):
                stale.append(r.name)
    if stale:
        print('stale plan header(s): ' + ', '.join(stale) + '; run `grpo-recipes header --write`', file=sys.stderr)
        return 1
    return 0


def cmd_arg(opts) -> int:
    recipe = find(opts.recipe)
    launch = read_launch([str(recipe.path)], environ={})
    cfg, _ = GRPOConfig.from_argv(launch.argv)
    values = []
    for key in opts.keys:  # all checked before anything is printed
        if key.startswith('@'):
            value = recipe.meta.get(key[1:], '')
        elif key.startswith('ENV.'):
            value = launch.env.get(key[4:], '')
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
    recipe = find(opts.recipe)
    cfg, _ = GRPOConfig.from_argv(read_launch([str(recipe.path)], environ={}).argv)
    args = rollout_argv(cfg)
    if args is None:
        raise GuardError(f'{recipe.name}: not a server-mode recipe')
    print('\n'.join(args))
    return 0


COMMANDS = {'ls': cmd_ls, 'cp': cmd_cp, 'validate': cmd_validate, 'plan': cmd_plan, 'header': cmd_header,
            'arg': cmd_arg, 'rollout-args': cmd_rollout_args}


def main(argv: list[str] | None = None) -> int:
    opts = parse_command(build_parser(), argv)
    if isinstance(opts, int):
        return opts
    try:
        return COMMANDS[opts.cmd](opts)
    except GuardError as e:
        return fail(str(e), e.exit_code)
    except BrokenPipeError:
        return 0


if __name__ == '__main__':
    sys.exit(main())
