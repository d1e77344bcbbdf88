"""A reward that varies on a random model (fraction of distinct characters), so the CPU smoke run's
backward pass does real work; ms-swift's accuracy reward is always 0 on random text."""

from typing import List

from swift.rewards import ORM, orms


class ToyDistinctChars(ORM):
    def __call__(self, completions, **kwargs) -> List[float]:
        return [len(set(c)) / max(len(c), 1) for c in completions]


orms['toy_distinct'] = ToyDistinctChars
