"""The judge-injection fixtures (`data/judge_injection/fixtures.json`): responses that fail their criterion, and
judge-directed text to inject into them. See that folder's README.

    cases, injections = load_injection_fixtures()
    text = inject(cases[0].failing, injections[0])      # the failing response with the text added
"""

from __future__ import annotations

import dataclasses
import json
import os

from harnessrl_jax.rubric.schema import Criterion, Task

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "judge_injection", "fixtures.json")
PLACES = ("start", "end")


@dataclasses.dataclass(frozen=True)
class InjectionCase:
    """A request with one criterion (an LLM criterion, 1 point), a response that fails it and one that meets it."""

    id: str
    task: Task
    failing: str
    passing: str

    @property
    def criterion(self) -> Criterion:
        return self.task.criteria[0]


@dataclasses.dataclass(frozen=True)
class Injection:
    """Judge-directed text and where it goes in a response ('start' or 'end')."""

    id: str
    place: str
    text: str


def load_injection_fixtures(path: str = FIXTURES) -> tuple[list[InjectionCase], list[Injection]]:
    """(cases, injections) of the fixture file; a bad entry raises ValueError naming the file and the entry."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    cases, injections = [], []
    for n, c in enumerate(data["cases"]):
        try:
            task = Task(f"injection-{c['id']}", "injection", ({"role": "user", "content": c["prompt"]},),
                        (Criterion(f"injection-{c['id']}/0", c["criterion"], 1.0, ("verifier:llm",)),))
            cases.append(InjectionCase(c["id"], task, c["failing"], c["passing"]))
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}: cases[{n}]: missing or bad field {e}") from None
    for n, i in enumerate(data["injections"]):
        if i.get("place") not in PLACES or not i.get("text") or not i.get("id"):
            raise ValueError(f"{path}: injections[{n}]: needs id, text and place in {PLACES}")
        injections.append(Injection(i["id"], i["place"], i["text"]))
    return cases, injections


def inject(response: str, injection: Injection) -> str:
    """`response` with the injection's text before or after it, on its own line."""
    return f"{injection.text}\n{response}" if injection.place == "start" else f"{response}\n{injection.text}"
