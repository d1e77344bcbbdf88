"""``grpo-guard calibrate``: score the memory model on published measurements."""

from __future__ import annotations

from ..errors import GuardError
from ..memory.cases import load_cases
from ..memory.scoring import score
from .common import print_json
from .render import print_calibration


def run(opts, extra: list[str]) -> int:
    cases = load_cases(opts.cases)
    if not cases:  # scores over nothing would read as a calibrated model
        raise GuardError(
            f'{opts.cases}: no cases in it; pass a JSON-lines file of cases (one object a line, see '
            f'docs/calibration.md)'
        )
    result = score(cases, replay=getattr(opts, 'replay', False))
    if opts.json:
        print_json(result)
        return 0
    print_calibration(result)
    return 0
