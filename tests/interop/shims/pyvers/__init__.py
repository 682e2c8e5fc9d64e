"""Minimal stand-in for the `pyvers` package (not in Debian): `implement_for` picks, among
functions of one qualified name, the one whose [from_version, to_version) holds the installed
version of a module."""
import functools
import importlib
from packaging.version import Version

_chosen = {}


def _installed(module_name):
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    return Version(Version(getattr(module, "__version__", "0")).base_version)


class implement_for:
    def __init__(self, module_name, from_version=None, to_version=None, class_method=False):
        self.module_name, self.from_version, self.to_version = module_name, from_version, to_version
        self.class_method = class_method

    def _matches(self):
        version = _installed(self.module_name)
        if version is None:
            return False
        if self.from_version is not None and version < Version(self.from_version):
            return False
        if self.to_version is not None and version >= Version(self.to_version):
            return False
        return True

    def __call__(self, fn):
        name = f"{fn.__module__}.{fn.__qualname__}"
        if self._matches():
            _chosen[name] = fn
            return classmethod(fn) if self.class_method else fn
        if name in _chosen:
            found = _chosen[name]
            return classmethod(found) if self.class_method else found

        @functools.wraps(fn)
        def unsupported(*args, **kwargs):
            raise NotImplementedError(f"{name}: no implementation for the installed {self.module_name}")

        return unsupported
