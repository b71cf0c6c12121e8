"""Training methods by name (`config.method`), each a small frozen description of its parts (`Method`); one step
(harnessrl_jax.stepper) runs any description.

    method = describe(config)          # the registered method config.method names, or a module path's
    check(config)                      # its problems, each naming the --config. key to fix

    @methods.register("my_method", settings=("my_method", MyConfig), check=my_check)   # a method: one module
    def describe(config) -> Method: ...

`settings` names the method's config section and its dataclass (the defaults, once); `defaults` are top-level values
its paper fixes (applied by a config's `:method=NAME`). Every module of this package is imported with it, so a new
file registers itself; `config.method` may also be a dotted path (`my_lab.my_method`) to a module outside the
package defining `describe(config) -> Method` (and optionally `check(config)`, `SETTINGS` and `DEFAULTS`).
"""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any, Callable

from harnessrl_jax.errors import ConfigError
from harnessrl_jax.methods.base import Method
from harnessrl_jax.settings import typed


@dataclasses.dataclass(frozen=True)
class Registered:
    """A method as registered: its description, its checks, and its own config section (key, dataclass) if any."""

    name: str
    describe: Callable[[Any], Method]
    check: Callable[[Any], list[str]] | None = None
    settings: tuple[str, type] | None = None
    defaults: tuple[tuple[str, Any], ...] = ()


METHODS: dict[str, Registered] = {}
# config section -> settings dataclass, for every section a method module registered (methods share some: HarnessRL's
# interface replacements read config.sec, config.ruscarl and config.evorubric)
SETTINGS: dict[str, type] = {}
# config.tasks.source -> (method, config) -> the method as it runs on those tasks (the workspace tasks' multi-turn
# scheme, methods.agentic); a source not named here runs every method as described
TASK_SOURCE_ADAPTERS: dict[str, Callable[[Method, Any], Method]] = {}


def register(name: str, *, check: Callable[[Any], list[str]] | None = None,
             settings: tuple[str, type] | None = None, defaults: dict[str, Any] | None = None):
    """Decorator registering `describe(config) -> Method` under `name`, with the method's checks, settings and
    config defaults."""
    def wrap(describe_fn):
        if name in METHODS and METHODS[name].describe is not describe_fn:
            raise ValueError(f"method {name!r} is registered twice ({METHODS[name].describe.__module__} and "
                             f"{describe_fn.__module__})")
        METHODS[name] = Registered(name, describe_fn, check, settings, tuple((defaults or {}).items()))
        if settings is not None:
            register_settings(*settings)
        return describe_fn
    return wrap


def register_settings(key: str, cls: type) -> None:
    """Registers config.<key> as a settings section of dataclass `cls` (experiments/base.py builds it)."""
    if SETTINGS.get(key, cls) is not cls:
        raise ValueError(f"config section {key!r} is registered twice ({SETTINGS[key].__name__}, {cls.__name__})")
    SETTINGS[key] = cls


def register_task_source(source: str, adapt: Callable[[Method, Any], Method]) -> None:
    """Registers how methods run on the tasks of config.tasks.source `source` (describe applies it)."""
    if TASK_SOURCE_ADAPTERS.get(source, adapt) is not adapt:
        raise ValueError(f"task source {source!r} has two method adapters")
    TASK_SOURCE_ADAPTERS[source] = adapt


def settings(config, key: str):
    """The typed config.<key> of a registered settings section (its defaults where the config has no section)."""
    return typed(SETTINGS[key], config.get(key) or {}, key)


def lookup(name: str) -> Registered:
    """The registered method `name`, or the module at dotted path `name` (its describe, check and SETTINGS)."""
    if name in METHODS:
        return METHODS[name]
    if "." not in name:
        raise ConfigError([f"--config.method={name!r}: known methods {sorted(METHODS)}, or a module path "
                           f"(my_lab.my_method) whose module defines describe(config)"])
    try:
        module = importlib.import_module(name)
    except ImportError as e:
        raise ConfigError([f"--config.method={name!r}: cannot import the module ({e})"]) from None
    describe_fn = getattr(module, "describe", None)
    if not callable(describe_fn):
        raise ConfigError([f"--config.method={name!r}: the module defines no describe(config) -> Method"])
    section = getattr(module, "SETTINGS", None)
    if section is not None:
        register_settings(*section)
    return Registered(name, describe_fn, getattr(module, "check", None), section,
                      tuple(getattr(module, "DEFAULTS", {}).items()))


def apply_defaults(config):
    """Sets the top-level values config.method's paper fixes beyond its parts (its registration's `defaults`:
    HarnessBandit and its mixtures train with Dr.GRPO's leave-one-out baseline, 'rloo'); returns the config."""
    for key, value in lookup(config.method).defaults:
        config[key] = value
    return config


def describe(config) -> Method:
    """The description of config.method under `config` (the one place a config becomes a method)."""
    method = lookup(config.method).describe(config)
    if not isinstance(method, Method):
        raise ConfigError([f"--config.method={config.method!r}: describe(config) returned {type(method).__name__}, "
                           f"not a Method"])
    adapt = TASK_SOURCE_ADAPTERS.get((config.get("tasks") or {}).get("source", ""))
    return adapt(method, config) if adapt is not None else method


def check(config) -> list[str]:
    """The problems config.method's own checks find (each naming the --config. key to fix)."""
    found = lookup(config.method).check
    return list(found(config)) if found is not None else []


# Every module of the package, so each method registers itself (a new file needs no edit here).
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["METHODS", "Method", "Registered", "SETTINGS", "TASK_SOURCE_ADAPTERS", "apply_defaults", "check", "describe",
           "lookup", "register", "register_settings", "register_task_source", "settings"]
