"""The checker registry: rule ids, kwargs validation, and `check`.

A checker is a function `fn(response, *, kwarg: type, ...) -> bool` registered under a `group:name` id. Its
signature is its kwargs schema: annotations give the types (int, str, bool, list[str], Literal[...] choices,
Annotated[type, validator], `X | None` for optional ones) and defaults mark kwargs optional. Every int kwarg is a
count or threshold and must be >= 0; an integral float (5.0) is accepted for it and passed on as the int.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import re
import types
import typing
from typing import Annotated, Any, Callable, Literal, Mapping

# IFEval's two relations; its checkers reject anything else, and so do ours under IFEval ids.
Relation = Literal["less than", "at least"]
# New checkers take these as well.
Comparison = Literal["less than", "at most", "exactly", "at least", "more than"]

_COMPARE = {
    "less than": lambda n, k: n < k,
    "at most": lambda n, k: n <= k,
    "exactly": lambda n, k: n == k,
    "at least": lambda n, k: n >= k,
    "more than": lambda n, k: n > k,
}


def compare(count: int, relation: str, threshold: int) -> bool:
    """`count <relation> threshold`, e.g. compare(3, 'less than', 4) is True."""
    return _COMPARE[relation](count, threshold)


def _nonblank(value: str) -> None:
    if not value.strip():
        raise ValueError("must not be blank")


def _regex(value: str) -> None:
    try:
        re.compile(value)
    except re.error as e:
        raise ValueError(f"is not a valid regular expression ({e})") from None


Text = Annotated[str, _nonblank]
Regex = Annotated[str, _regex]


class UnknownRuleError(KeyError, ValueError):
    """No checker has this id (a KeyError for lookups, a ValueError for input validation)."""

    def __str__(self):  # KeyError would repr() the message
        return str(self.args[0])


class KwargError(ValueError):
    """A kwarg's value is unusable; raised by a rule's `validate` hook, reported with the rule id."""

    def __init__(self, name: str, why: str):
        super().__init__(name, why)
        self.name, self.why = name, why


@dataclasses.dataclass(frozen=True)
class Rule:
    """A registered checker and its kwargs schema."""

    id: str
    fn: Callable[..., bool]
    params: Mapping[str, inspect.Parameter]  # kwarg name -> parameter (annotation resolved, default)
    ifeval: bool  # same id, kwargs and verdicts as IFEval's instruction
    prompt_kwarg: str | None  # kwarg filled from the prompt when absent (combination:repeat_prompt)
    validate: Callable[[dict], None] | None  # cross-kwarg checks; raises KwargError

    @property
    def doc(self) -> str:
        return inspect.getdoc(self.fn) or ""

    @property
    def required(self) -> list[str]:
        return [k for k, p in self.params.items() if p.default is inspect.Parameter.empty]


_RULES: dict[str, Rule] = {}
_ID = re.compile(r"^[a-z][a-z_-]*:[a-z0-9_-]+$")  # IFBench has format:sub-bullets


def register(rule_id: str, *, ifeval: bool = False, prompt_kwarg: str | None = None,
             validate: Callable[[dict], None] | None = None):
    """Decorator: registers `fn(response, *, kwargs...) -> bool` as the checker for `rule_id`."""

    def deco(fn):
        if not _ID.match(rule_id):
            raise ValueError(f"rule id {rule_id!r} is not of the form 'group:name'")
        if rule_id in _RULES:
            raise ValueError(f"rule id {rule_id!r} is already registered (by {_RULES[rule_id].fn.__qualname__})")
        hints = typing.get_type_hints(fn, include_extras=True)
        sig = inspect.signature(fn)
        first, *rest = sig.parameters.values()
        if first.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD or any(
                p.kind is not inspect.Parameter.KEYWORD_ONLY for p in rest):
            raise TypeError(f"{fn.__qualname__}: expected fn(response, *, kwargs...)")
        for p in rest:
            if p.name not in hints:
                raise TypeError(f"{fn.__qualname__}: kwarg {p.name!r} needs a type annotation (its schema)")
        params = {p.name: p.replace(annotation=hints[p.name]) for p in rest}
        if prompt_kwarg is not None and prompt_kwarg not in params:
            raise TypeError(f"{fn.__qualname__}: prompt_kwarg {prompt_kwarg!r} is not one of its kwargs")
        _RULES[rule_id] = Rule(rule_id, fn, params, ifeval, prompt_kwarg, validate)
        return fn

    return deco


def registered() -> list[str]:
    """All registered rule ids, sorted."""
    return sorted(_RULES)


def get_rule(rule_id: str) -> Rule:
    """The Rule for rule_id; UnknownRuleError (a KeyError and a ValueError) names close matches."""
    try:
        return _RULES[rule_id]
    except (KeyError, TypeError):
        pass
    if not isinstance(rule_id, str):
        raise UnknownRuleError(f"rule id must be a string, got {rule_id!r}")
    # Close matches on the whole id, then on the name alone ('number_words' -> 'length_constraints:number_words').
    names = {i.split(":", 1)[1]: i for i in _RULES}
    close = difflib.get_close_matches(rule_id, list(_RULES), n=3, cutoff=0.6)
    close += [names[n] for n in difflib.get_close_matches(rule_id.split(":")[-1], list(names), n=3, cutoff=0.6)]
    close = list(dict.fromkeys(close))
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else f"; registered: {', '.join(registered())}"
    raise UnknownRuleError(f"unknown rule id {rule_id!r}{hint}")


def _coerce(ann, value):
    """value checked against annotation ann; returns it (lists as lists) or raises ValueError(why)."""
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is Annotated:
        value = _coerce(args[0], value)
        for validator in ann.__metadata__:
            validator(value)
        return value
    if origin in (typing.Union, types.UnionType):  # `X | None`: None was dropped before we got here
        return _coerce(next(a for a in args if a is not type(None)), value)
    if origin is Literal:
        if value not in args:
            raise ValueError(f"must be one of {', '.join(map(repr, args))}, got {value!r}")
        return value
    if origin is list:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"must be a list of strings, got {value!r}")
        if not value:
            raise ValueError("must not be empty")
        return list(value)
    if ann is int:
        # IFBench's released files store every integer as a float (`"N": 5.0`): an integral float is that integer.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"must be an integer, got {value!r}")
        if value < 0:
            raise ValueError(f"must be >= 0, got {value}")
        return value
    if ann in (str, bool):
        if not isinstance(value, ann):
            raise ValueError(f"must be {'a string' if ann is str else 'a boolean'}, got {value!r}")
        return value
    raise TypeError(f"unsupported kwarg annotation {ann!r}")


def validate_kwargs(rule_id: str, kwargs: Mapping[str, Any] | None, *, prompt: str | None = None) -> dict:
    """The kwargs rule_id's checker will get, validated; ValueError naming the rule and the kwarg otherwise.

    Keys whose value is None are dropped first (IFEval's data lists unused kwargs as null). A rule that takes the
    prompt (combination:repeat_prompt) gets `prompt` for its prompt kwarg when the kwargs leave it out.
    """
    rule = get_rule(rule_id)
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, Mapping):
        raise ValueError(f"rule {rule_id!r}: kwargs must be a mapping, got {type(kwargs).__name__}")
    given = {k: v for k, v in kwargs.items() if v is not None}
    if rule.prompt_kwarg and rule.prompt_kwarg not in given and prompt is not None:
        given[rule.prompt_kwarg] = prompt
    accepted = ", ".join(rule.params) or "none"
    for k in given:
        if k not in rule.params:
            raise ValueError(f"rule {rule_id!r}: unknown kwarg {k!r} (accepted: {accepted})")
    for k in rule.required:
        if k not in given:
            raise ValueError(f"rule {rule_id!r}: missing kwarg {k!r} (accepted: {accepted})")
    out = {}
    for k, v in given.items():
        try:
            out[k] = _coerce(rule.params[k].annotation, v)
        except ValueError as e:
            raise ValueError(f"rule {rule_id!r}: kwarg {k!r} {e}") from None
    if rule.validate is not None:
        try:
            rule.validate(out)
        except KwargError as e:
            raise ValueError(f"rule {rule_id!r}: kwarg {e.name!r} {e.why}") from None
    return out


def check(rule_id: str, kwargs: Mapping[str, Any] | None, response: str, *, prompt: str | None = None) -> bool:
    """Whether `response` follows rule `rule_id` with `kwargs`.

    A response that is empty or only whitespace follows no rule, as in IFEval's evaluation. Unknown ids raise
    UnknownRuleError (KeyError and ValueError); bad kwargs raise ValueError naming the rule and the kwarg.
    """
    rule = get_rule(rule_id)
    args = validate_kwargs(rule_id, kwargs, prompt=prompt)
    if not isinstance(response, str):
        raise TypeError(f"rule {rule_id!r}: response must be a string, got {type(response).__name__}")
    if not response.strip():
        return False
    return bool(rule.fn(response, **args))
