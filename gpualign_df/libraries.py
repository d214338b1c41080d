"""Which optional libraries are installed or imported, and code that runs once one is imported.

The one owner of "is pandas / Dask / cuDF / CuPy here?": the rest of the package asks
:func:`loaded` (already imported, so using it costs nothing), :func:`installed` (importable,
found without importing it) or registers work with :func:`when_imported` instead of
importing a library just to find out. Importing this module imports only the standard
library.

:func:`when_imported` is how the accessors are registered "on first use": importing
:mod:`gpualign_df` asks to run the registration of ``.aln`` right after pandas (Dask's
``dask.dataframe``, cuDF) has been imported, whenever that happens, instead of importing
those libraries itself (seconds on a GPU machine). It works by a finder placed first on
``sys.meta_path`` that, for a watched module name only, finds the module's spec through the
other finders and wraps its loader: the wrapper puts the original loader back on the module
(so ``module.__loader__`` and ``module.__spec__.loader`` are the library's own while it
runs), lets it execute the module, then runs the callbacks.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import threading
import warnings
from types import ModuleType
from typing import Any, Callable

__all__ = ["loaded", "installed", "when_imported", "is_cudf", "lazy_attributes"]

#: Callbacks by module name; run after every import of that module (in order of
#: registration), and at once for a module already imported when registered.
_HOOKS: dict[str, list[Callable[[ModuleType], Any]]] = {}
_LOCK = threading.RLock()


def _initializing(module: ModuleType) -> bool:
    """The module is still executing (the import system marks its spec while it runs)."""
    return bool(getattr(getattr(module, "__spec__", None), "_initializing", False))


def loaded(name: str) -> bool:
    """Whether module ``name`` has been imported (and finished executing) in this process.

    Examples
    --------
    >>> from gpualign_df import libraries
    >>> libraries.loaded("sys"), libraries.loaded("surely_not_a_module")
    (True, False)
    """
    module = sys.modules.get(name)
    return module is not None and not _initializing(module)


def lazy_attributes(package: str, names: dict[str, str],
                    namespace: dict[str, Any]) -> tuple[Callable[[str], Any],
                                                        Callable[[], list[str]]]:
    """PEP 562 ``(__getattr__, __dir__)`` for a package whose public names are imported on
    first use: ``names`` maps each name to the submodule that defines it; a name once
    imported is kept in the package's ``namespace`` (its ``globals()``).

    Examples
    --------
    >>> from gpualign_df import libraries
    >>> space = {}
    >>> getattr_, dir_ = libraries.lazy_attributes("json", {"JSONDecoder": "decoder"}, space)
    >>> dir_()
    ['JSONDecoder']
    >>> getattr_("JSONDecoder").__name__, "JSONDecoder" in space
    ('JSONDecoder', True)
    """
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{names[name]}"), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__


def is_cudf(values: Any) -> bool:
    """Whether ``values`` is a cuDF object (Series, DataFrame, Index), known without
    importing cuDF.

    Examples
    --------
    >>> from gpualign_df import libraries
    >>> libraries.is_cudf(["ACGT"])
    False
    """
    return type(values).__module__.split(".")[0] == "cudf"


def installed(name: str) -> bool:
    """Whether module ``name`` (dotted names too) can be imported, found without importing
    it or its parent packages (their specs are looked up on their search paths).

    Examples
    --------
    >>> from gpualign_df import libraries
    >>> libraries.installed("json.decoder"), libraries.installed("surely_not_a_module")
    (True, False)
    """
    module = sys.modules.get(name)
    if module is not None:
        return True
    parts = name.split(".")
    path = None
    for depth in range(1, len(parts) + 1):
        prefix = ".".join(parts[:depth])
        parent = sys.modules.get(prefix)
        try:
            if parent is not None:
                spec = getattr(parent, "__spec__", None)
            else:
                spec = importlib.machinery.PathFinder.find_spec(prefix, path)
                if spec is None and depth == 1:   # built-in, frozen, or a custom finder's
                    spec = importlib.util.find_spec(prefix)
        except (ImportError, ValueError):
            return False
        if spec is None:
            return False
        if depth < len(parts):
            path = getattr(parent, "__path__", None) if parent is not None else \
                spec.submodule_search_locations
            if path is None:      # not a package: it has no submodules
                return False
    return True


def when_imported(name: str, callback: Callable[[ModuleType], Any]) -> None:
    """Run ``callback(module)`` right after module ``name`` has been imported.

    At once where the module is already imported (one that another thread is importing is
    waited for); otherwise right after its code has run, each time it is imported, before
    the statement that imported it continues. An exception in a callback does not fail the
    user's import: it becomes a warning naming the module and the callback.

    Parameters
    ----------
    name : str
        Full module name (``"pandas"``, ``"dask.dataframe"``).
    callback : callable
        Called with the module object.

    Examples
    --------
    >>> from gpualign_df import libraries
    >>> seen = []
    >>> libraries.when_imported("colorsys", lambda module: seen.append(module.__name__))
    >>> import colorsys      # (or at once, had it been imported already)
    >>> seen
    ['colorsys']
    """
    with _LOCK:
        _HOOKS.setdefault(name, []).append(callback)
        if not any(isinstance(finder, _PostImportFinder) for finder in sys.meta_path):
            sys.meta_path.insert(0, _PostImportFinder())
    if name in sys.modules:
        # complete, or being imported by another thread (import_module waits for it); in
        # the thread importing it (a circular import), it is still half-executed here and
        # the callback cannot run: then it runs after a later import only
        module = importlib.import_module(name)
        if not _initializing(module):
            _run(callback, module)


def _run(callback: Callable[[ModuleType], Any], module: ModuleType) -> None:
    try:
        callback(module)
    except Exception as error:  # noqa: BLE001 - the user's import must not fail for us
        warnings.warn(f"gpualign_df: {getattr(callback, '__qualname__', callback)} after "
                      f"importing {module.__name__} failed: {error!r}", RuntimeWarning,
                      stacklevel=2)


def _notify(name: str, module: ModuleType) -> None:
    module = sys.modules.get(name, module)   # a module may replace itself in sys.modules
    with _LOCK:
        callbacks = list(_HOOKS.get(name, ()))
    for callback in callbacks:
        _run(callback, module)


class _PostImportFinder:
    """A ``sys.meta_path`` finder for the watched names only: finds the spec through the
    other finders and wraps its loader in a :class:`_NotifyingLoader`."""

    def __init__(self) -> None:
        self._resolving = threading.local()

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname not in _HOOKS:
            return None
        resolving = self._resolving.__dict__.setdefault("names", set())
        if fullname in resolving:
            return None
        resolving.add(fullname)
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
        finally:
            resolving.discard(fullname)
        if spec is not None and spec.loader is not None and \
                hasattr(spec.loader, "exec_module"):
            spec.loader = _NotifyingLoader(spec.loader)
        return spec

    def invalidate_caches(self) -> None:
        pass


class _NotifyingLoader:
    """The module's own loader, then the callbacks. Anything else is the original loader's
    (resource readers, ``get_code``, ...), which is also what the module itself sees."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)

    def create_module(self, spec: Any) -> Any:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        if getattr(module, "__loader__", None) is self:
            module.__loader__ = self.loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        self.loader.exec_module(module)
        _notify(module.__name__, module)
