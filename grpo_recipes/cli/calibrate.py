"""``grpo-guard calibrate``: score the memory model on published measurements."""
from __future__ import annotations

from ..memory.scoring import score
from ..memory.cases import load_cases
from .common import print_json
from .render import print_calibration


def run(opts, extra: list[str]) -> int:
    result = score(load_cases(opts.cases))
    if opts.json:
        print_json(result)
        return 0
    print_calibration(result)
    return 0
