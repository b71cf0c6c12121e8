"""Start-up fix for the SGLang CPU environment: PyPI's torchvision is a CUDA build whose C ops do not load against
the CPU torch, and its `_meta_registrations` then fails at import ("operator torchvision::nms does not exist").
Those registrations describe the C ops only, so they are skipped when the ops are absent."""

import importlib.abc
import importlib.machinery
import sys


class _SkipMetaRegistrations(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    NAME = "torchvision._meta_registrations"

    def find_spec(self, name, path=None, target=None):
        if name != self.NAME:
            return None
        import torchvision.extension

        if torchvision.extension._has_ops():
            return None  # the C ops loaded: torchvision registers their meta kernels itself
        return importlib.machinery.ModuleSpec(name, self)

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _SkipMetaRegistrations())
