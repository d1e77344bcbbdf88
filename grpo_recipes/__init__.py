"""grpo-recipes: pre-launch guard and recipes for ms-swift GRPO."""

__version__ = '0.1.0'

# The ms-swift release line this pack is written and tested against.
SWIFT_VERSION_LINE = '4.6'
