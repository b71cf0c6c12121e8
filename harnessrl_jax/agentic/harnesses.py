"""Agent harnesses: the same workspace task under a system prompt, a tool schema, a control loop and a trajectory
format (how tool results come back). Texts in `agentic/prompts/`.

    name          schema  loop  system prompt  tool results as
    json_direct   json    act   editor         "result: ..."
    json_plan     json    plan  editor         "result: ..."
    xml_direct    xml     act   editor         <result>...</result>
    xml_plan      xml     plan  editor         <result>...</result>
    cli_direct    cli     act   shell          "$ ..."
    cli_plan      cli     plan  shell          "$ ..."
    native_cli    cli     plan  native agent   "output:\n..."      held out: evaluated, never trained on

`act`: every policy turn is parsed for one tool call. `plan`: the first turn is a plan the harness acknowledges
(no call runs), then as `act`.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Sequence

from harnessrl_jax.agentic.tools import MAX_OUTPUT_CHARS, SCHEMAS

PROMPTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "prompts")
LOOPS = ("act", "plan")
PLAN_ACK = "Plan noted. Now act."
NO_CALL = "error: no tool call found"


def _prompt(name: str) -> str:
    with open(os.path.join(PROMPTS_DIR, f"{name}.txt"), encoding="utf-8") as f:
        return f.read().strip()


@dataclasses.dataclass(frozen=True)
class Harness:
    """One harness: `system` and `schema` prompt files, the control loop, and the tool-result wrapper
    (`result_format` with a {output} placeholder)."""

    name: str
    schema: str
    loop: str
    system: str
    result_format: str

    def __post_init__(self):
        if self.schema not in SCHEMAS:
            raise ValueError(f"harness {self.name}: schema {self.schema!r}, known {list(SCHEMAS)}")
        if self.loop not in LOOPS:
            raise ValueError(f"harness {self.name}: loop {self.loop!r}, known {list(LOOPS)}")

    def messages(self, instruction: str) -> list[dict[str, str]]:
        """The opening messages of an episode: the system prompt with the tool schema, then the task."""
        return [{"role": "system", "content": f"{_prompt(self.system)}\n{_prompt(self.schema)}"},
                {"role": "user", "content": instruction}]

    def result(self, output: str) -> str:
        """The message a tool output comes back in (cut to MAX_OUTPUT_CHARS)."""
        return self.result_format.format(output=output[:MAX_OUTPUT_CHARS])

    def parses(self, turn: int) -> bool:
        """Whether policy turn `turn` (0-based) is parsed for a tool call (a plan loop's first is not)."""
        return not (self.loop == "plan" and turn == 0)


HARNESSES: dict[str, Harness] = {h.name: h for h in (
    Harness("json_direct", "json", "act", "sys_editor", "result: {output}"),
    Harness("json_plan", "json", "plan", "sys_editor", "result: {output}"),
    Harness("xml_direct", "xml", "act", "sys_editor", "<result>{output}</result>"),
    Harness("xml_plan", "xml", "plan", "sys_editor", "<result>{output}</result>"),
    Harness("cli_direct", "cli", "act", "sys_shell", "$ {output}"),
    Harness("cli_plan", "cli", "plan", "sys_shell", "$ {output}"),
    Harness("native_cli", "cli", "plan", "sys_native", "output:\n{output}"),
)}
TRAIN_HARNESSES = ("json_direct", "json_plan", "xml_direct", "xml_plan", "cli_direct", "cli_plan")
HELDOUT_HARNESS = "native_cli"
PAIR = ("json_direct", "xml_direct")  # the two-harness mixture: two tool schemas under the same loop


def harness(name: str) -> Harness:
    if name not in HARNESSES:
        raise ValueError(f"unknown harness {name!r}: known {sorted(HARNESSES)}")
    return HARNESSES[name]


def check_names(names: Sequence[str]) -> list[str]:
    return [f"unknown harness {n!r}: known {sorted(HARNESSES)}" for n in names if n not in HARNESSES]


__all__ = ["HARNESSES", "HELDOUT_HARNESS", "Harness", "LOOPS", "NO_CALL", "PAIR", "PLAN_ACK", "TRAIN_HARNESSES",
           "check_names", "harness"]
