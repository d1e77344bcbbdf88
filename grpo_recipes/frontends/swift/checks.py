"""ms-swift's own argument checks, run by rules/arguments.py through the framework's hooks
(``Framework.unknown_arguments``, ``Framework.registry_check``; the ids are declared there)."""

from __future__ import annotations

from ...findings import ERROR, INFO, WARNING, Finding
from ...versions import version_tuple
from . import registry
from .versions import explain, known_releases, release_fields


def written_for(flags: list[str], judged: str | None) -> list[str]:
    """The ms-swift releases (releases.json, one per minor) that know every one of ``flags``, when the judged
    release does not: the releases a script that uses them was written for ([] when none knows them all, or the
    judged release is one of them)."""
    keys = [f.lstrip('-').split('=', 1)[0].replace('-', '_') for f in flags]
    fit = [r for r in known_releases() if all(k in release_fields(r) for k in keys)]
    judged_vt = version_tuple(judged)
    if judged_vt is not None and any(version_tuple(r)[:2] == judged_vt[:2] for r in fit):
        return []
    return fit


def unknown_arguments(ctx) -> list[Finding]:
    """The words ms-swift's parser leaves over: ``ValueError: remaining_argv`` (swift/pipelines/base.py), a warning
    under ``--ignore_args_error true``; an ambiguous abbreviation stops argparse first."""
    out = []
    # --ignore_args_error true: ms-swift logs the leftovers instead of stopping (swift/pipelines/base.py,
    # 3.x: llm/base.py)
    ignored = ctx.cfg.ignore_args_error
    unknown = explain(ctx.remaining, ctx.packages.get('ms-swift'))
    releases = written_for([u.flag for u in unknown], ctx.packages.get('ms-swift')) if len(unknown) > 1 else []
    if releases:
        span = releases[0] if len(releases) == 1 else f'{releases[0]} to {releases[-1]}'
        out.append(
            Finding(
                INFO,
                'args.release',
                [u.flag.lstrip('-') for u in unknown],
                f'{", ".join(u.flag for u in unknown)} are all arguments of ms-swift {span} (one release per minor, '
                f'newest patch): the launch was written for that release, and is judged here as ms-swift '
                f'{ctx.packages.get("ms-swift") or "installed"} runs it',
                f'check it as that release reads it: --swift-version {releases[-1]}; or, to run it on this release, '
                'make the changes the args.unknown errors give',
                "grpo_recipes/frontends/swift/releases.json (each release's swift rlhf arguments, from its source)",
            )
        )
    for u in unknown:
        fix = f'rename {u.flag} to {u.suggestion}' if u.suggestion else f'remove {u.flag}'
        stops = getattr(u, 'stops', None)  # an ambiguous abbreviation: argparse stops first, whatever the setting
        out.append(
            Finding(
                WARNING if ignored and not stops else ERROR,
                'args.unknown',
                [u.flag.lstrip('-')],
                f'{u.describe()}. '
                + (
                    stops
                    or (
                        'ms-swift ignores it (--ignore_args_error true): it has no effect'
                        if ignored
                        else 'ms-swift stops with `ValueError: remaining_argv: [...]`'
                    )
                ),
                fix,
                'argparse (HfArgumentParser, allow_abbrev)' if stops else 'swift/pipelines/base.py',
            )
        )
    return out


def registry_check(ctx) -> list[Finding]:
    """--model_type / --template against ms-swift's registry snapshot (swift/model/model_meta.py MODEL_MAPPING,
    swift/template/register.py TEMPLATE_MAPPING); not checked when the snapshot is another major release's."""
    cfg = ctx.cfg
    given = [(n, v) for n, v in (('model_type', cfg.model_type), ('template', cfg.template)) if v]
    if not given:
        return []
    swift_v = version_tuple(ctx.packages.get('ms-swift'))
    snap_v = version_tuple(registry.snapshot()['ms_swift_version'])
    if swift_v is not None and snap_v is not None and swift_v[:1] != snap_v[:1]:
        return [
            Finding(
                INFO,
                'args.registry-unchecked',
                [n for n, _ in given],
                f'{", ".join(f"--{n} {v}" for n, v in given)}: not checked (the registry snapshot is ms-swift '
                f"{registry.snapshot()['ms_swift_version']}'s; the launch is judged against ms-swift "
                f'{ctx.packages.get("ms-swift")})',
            )
        ]
    out = []
    for name, value in given:
        problem = (registry.model_type_problem if name == 'model_type' else registry.template_problem)(value, cfg.model)
        if problem:
            src = 'swift/model/model_meta.py' if name == 'model_type' else 'swift/template/register.py'
            out.append(Finding(ERROR, f'args.{name.replace("_", "-")}', [name], problem[0], problem[1], src))
    return out
