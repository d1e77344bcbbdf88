"""Stand-in: prints ``dataclasses.fields`` of ms-swift's real MegatronRLHFArguments as JSON, with megatron-core,
mcore-bridge and transformer-engine replaced by empty stand-in modules (they are not installed here and the
dataclass only names them). Used by tests/test_megatron_snapshot.py as the differential oracle of the ast snapshot."""

import dataclasses
import importlib.abc
import importlib.machinery
import json
import sys
import types

STUBBED = ('megatron', 'mcore_bridge', 'transformer_engine', 'apex')


class _Meta(type):
    """A class whose every attribute, item and call is another such class (subclassable, callable)."""

    def __getattr__(cls, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _Meta(name, (), {})

    def __getitem__(cls, key):
        return cls

    def __call__(cls, *args, **kwargs):
        return cls


class _Anything(types.ModuleType):
    __path__ = []  # a package: submodules load through the finder too
    __version__ = '0.15.0'

    def __getattr__(self, name):
        if name.startswith('__'):
            raise AttributeError(name)
        return _Meta(name, (), {})


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name.split('.')[0] in STUBBED:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Anything(spec.name)

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
from swift.megatron.arguments import MegatronRLHFArguments  # noqa: E402


def _default(f):
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return '<required>'
    try:
        json.dumps(value)
    except TypeError:
        return repr(value)
    return value


print(json.dumps({f.name: _default(f) for f in dataclasses.fields(MegatronRLHFArguments) if f.init}))
