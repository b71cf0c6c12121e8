"""The LLM proposer: the evolver model writes the candidate of one interface, through the judge protocol
(`client.complete(messages, schema)`, e.g. an OpenAIJudge) with the prompt `evolver/prompts/proposer.txt`.

The model sees the task's conversation (never its dataset reference), the current rubric with the attributor's
labels, the mounted fields, the evidence of the criteria routed to the interface (with an earlier satisfying
answer of the task from the time index and the donors' satisfying examples from the semantic index), some
responses of the recorded group, the task's earlier updates (accepted, rejected, undone) and this step's rejected
rounds. Its JSON is validated into typed actions against H_t; output that does not validate comes back as an
`invalid` candidate with the reason, so the critic rejects it without measuring. A candidate's `used_evidence` are
the shown records its actions' texts quote (`quotes`: a run of QUOTE_WORDS words), and a <reference> field is
tagged 'own' or 'donor' by the record it quotes. Sampling goes to the rule proposer (a down-weight is its only
operation).
"""

from __future__ import annotations

import json
from typing import Sequence

from harnessrl_jax.evolver import templates
from harnessrl_jax.evolver.attributor import Attribution
from harnessrl_jax.evolver.candidates import Candidate, Rejection
from harnessrl_jax.evolver.context import TaskContext
from harnessrl_jax.evolver.rule_proposer import RuleProposer
from harnessrl_jax.evolver.text import cut, quotes
from harnessrl_jax.harness import ops
from harnessrl_jax.harness.transitions import DEFAULT_TRANSITIONS, Transitions
from harnessrl_jax.words import Interface, Label
from harnessrl_jax.rubric.judges.parse import json_objects, strip_thinking
from harnessrl_jax.rubric.judges.llm import render_conversation

OPS_DOC = {
    "sampling": '{"op": "downweight_task", "task_id": T}',
    "guidance": ('{"op": "add_field", "task_id": T, "field": "criterion" | "reference" | "critique", "text": "...", '
                 '"criterion_id": C or null}\n{"op": "drop_field", "task_id": T, "field": "..."}'),
    "rubric": ('{"op": "create_criterion", "task_id": T, "text": "...", "points": P, "tags": [...]}\n'
               '{"op": "rewrite_criterion", "task_id": T, "criterion_id": C, "text": "...", "tags": null or [...]}\n'
               '{"op": "delete_criterion", "task_id": T, "criterion_id": C}\n'
               '{"op": "reweight_criterion", "task_id": T, "criterion_id": C, "points": P}\n'
               '{"op": "merge_criteria", "task_id": T, "criterion_ids": [C1, C2, ...], "text": "...", "points": P}\n'
               '{"op": "split_criterion", "task_id": T, "criterion_id": C, "texts": ["...", "..."], '
               '"points": [P1, P2]}'),
}

# A field or criterion quotes a record it was shown when they share this many consecutive words.
QUOTE_WORDS = 8
EXAMPLE_CHARS = 300  # each shown example is cut to this many characters

INTERFACE_OPS = {"sampling": ("downweight_task",), "guidance": ("add_field", "drop_field"),
                 "rubric": ("create_criterion", "rewrite_criterion", "delete_criterion", "reweight_criterion",
                            "merge_criteria", "split_criterion")}

def proposer_schema(interface: str) -> dict:
    """JSON schema of the proposer's answer: a rationale and actions whose `op` is one of the interface's (a
    grammar-constrained server then cannot name another); the rest of each action is checked by `harness.ops`."""
    action = {"type": "object", "properties": {"op": {"type": "string", "enum": list(INTERFACE_OPS[interface])}},
              "required": ["op"]}
    return {"type": "object",
            "properties": {"rationale": {"type": "string"}, "actions": {"type": "array", "items": action}},
            "required": ["rationale", "actions"]}

def routed(ctx: TaskContext, interface: str, drop_pass_rate: float = 0.5) -> list[Attribution]:
    """The attributions routed to `interface` (empty: nothing to do there). Guidance also gets the targets of
    mounted fields, which may be dropped."""
    att = ctx.attribution
    if interface == Interface.SAMPLING:
        return list(att.with_label(Label.SATURATED)) if att.task_label == Label.SATURATED else []
    if interface == Interface.GUIDANCE:
        out = list(att.with_label(Label.BLIND))
        for _, f in ctx.state.fields(ctx.task_id):
            a = att.get(f.criterion_id) if f.criterion_id else None
            if a is not None and a not in out:
                out.append(a)
        if not out and ctx.state.fields(ctx.task_id):
            return [a for a in att.criteria][:1]  # untargeted fields on a task with nothing blind: may be dropped
        return out
    if interface == Interface.RUBRIC:
        return list(att.with_label(Label.SPURIOUS)) + list(att.with_label(Label.SATURATED))
    raise ValueError(f"unknown interface {interface!r}")

class LLMProposer:
    """Asks a model for the candidate, through the judge protocol (`client.complete(messages, schema)`, e.g. an
    OpenAIJudge); its JSON is validated into typed actions, and output that does not validate comes back as an
    `invalid` candidate with the reason. Sampling goes to `fallback` (the rule proposer)."""

    source = "llm"

    def __init__(self, client, *, template: str = "proposer", fallback: RuleProposer | None = None,
                 transitions: Transitions = DEFAULT_TRANSITIONS, max_chars: int = 800):
        self.client, self.template = client, templates.load(template)
        self.fallback = fallback or RuleProposer(transitions=transitions)
        self.transitions, self.max_chars = transitions, max_chars

    def propose(self, ctx: TaskContext, interface: str, feedback: Sequence[Rejection] = ()) -> Candidate | None:
        if interface == Interface.SAMPLING:
            return self.fallback.propose(ctx, interface, feedback)
        targets = routed(ctx, interface)
        if not targets:
            return None
        prompt = self.prompt(ctx, interface, targets, feedback)
        out = self.client.complete(({"role": "user", "content": prompt},), proposer_schema(interface))
        label = targets[0].label
        cids = tuple(a.criterion_id for a in targets)
        ev = tuple(e for a in targets for e in a.evidence.ids())
        name = f"llm round {len(feedback)}"
        if getattr(out, "status", "ok") != "ok" or out.text is None:
            return Candidate(ctx.task_id, interface, (), label, cids, ev, "", "llm", name, 1.0, self.source,
                             f"no answer from the proposer model: {getattr(out, 'detail', '')}")
        actions, rationale, invalid = self.parse(ctx, interface, out.text)
        if invalid is None and not actions:
            return None  # the model chose noop
        if actions:
            cids = tuple(dict.fromkeys(cids + tuple(_action_criteria(actions))))
        used, ref_source = quoted_evidence(actions, shown_examples(ctx, targets))
        return Candidate(ctx.task_id, interface, tuple(actions), label, cids, ev, rationale, "llm", name, 1.0,
                         self.source, invalid, reference_source=ref_source, used_evidence=used)

    def parse(self, ctx: TaskContext, interface: str, text: str) -> tuple[list[ops.Action], str, str | None]:
        """(actions, rationale, why invalid or None) from the model's answer, validated against H_t."""

        obj = next((o for o in json_objects(strip_thinking(text)) if isinstance(o, dict) and "actions" in o), None)
        if obj is None:
            return [], "", f"no JSON object with an 'actions' list in the answer: {text[:200]!r}"
        rationale = str(obj.get("rationale", ""))
        raw = obj["actions"]
        if not isinstance(raw, list):
            return [], rationale, f"'actions' must be a list, got {type(raw).__name__}"
        actions = []
        for n, d in enumerate(raw):
            if not isinstance(d, dict):
                return [], rationale, f"actions[{n}] is not an object"
            d = {"task_id": ctx.task_id, **d}
            try:
                a = ops.action_from_dict(d)
            except (ValueError, TypeError) as e:
                return [], rationale, f"actions[{n}]: {e}"
            if isinstance(a, ops.Noop):
                continue
            if a.interface != interface:
                return [], rationale, f"actions[{n}] ({a.op}) is a {a.interface} action, asked for {interface}"
            if getattr(a, "task_id", None) != ctx.task_id:
                return [], rationale, f"actions[{n}] targets task {getattr(a, 'task_id', None)!r}, not {ctx.task_id!r}"
            actions.append(a)
        if actions:
            try:
                self.transitions.apply(ctx.state, actions)
            except ops.InvalidAction as e:
                return actions, rationale, e.reason
            except (ValueError, TypeError) as e:
                return actions, rationale, str(e)
        return actions, rationale, None

    def prompt(self, ctx: TaskContext, interface: str, targets: Sequence[Attribution],
               feedback: Sequence[Rejection]) -> str:

        state, tid = ctx.state, ctx.task_id
        labels = ctx.attribution.labels()
        rubric = "\n".join(
            f"- {c.id} [{c.points:+.3g} points{', ANCHOR: text frozen, reweight only' if c.anchor else ''}; "
            f"label {labels.get(c.id, '?')}] {c.text}  tags={list(c.tags)}" for c in ctx.criteria)
        fields = "\n".join(f"- <{n}> for {f.criterion_id or 'the task'}: {cut(f.text, 300)}"
                           for n, f in state.fields(tid)) or "(none)"
        evidence = []
        for a in targets:
            evidence.append(f"- {a.criterion_id}: {a.label} ({a.question}): {a.reason}; pass rate "
                            f"{a.evidence.pass_rate:.2f}; phrase {a.evidence.phrase!r}; signals "
                            f"{json.dumps(a.evidence.signals, default=str)[:600]}")
            own = _own_example(ctx, a)
            if own is not None:
                evidence.append(f"  an earlier answer of this task that met it ({own[0]}): {own[2]}")
            for d in _donors(ctx, a):
                ex = _donor_example(d)
                evidence.append(f"  donor {d.task_id}/{d.criterion_id} (cosine {d.cosine:.2f}): {d.text}"
                                + (f"\n  its satisfying example: {ex[2]}" if ex else ""))
        group = "\n".join(f"--- response {j} (reward {ctx.rewards[j]:.1f}) ---\n{cut(r, 400)}"
                          for j, r in enumerate(ctx.responses[:4]))
        fb = "\n".join(f"- round {n}: {json.dumps([x.to_dict() for x in r.candidate.actions])} -> rejected: "
                       f"{getattr(r.measurement, 'reason', '')}" for n, r in enumerate(feedback)) or "(first round)"
        return templates.fill(
            self.template, task_id=tid, conversation=render_conversation(ctx.task),
            updates=_updates_text(ctx),
            interface=interface, ops=OPS_DOC[interface], rubric=rubric, fields=fields,
            cap=int(state.guidance.cap), diagnosis=f"task label {ctx.attribution.task_label}; discriminative mass "
                                                  f"{ctx.attribution.mass:.2f}; mean reward {ctx.rbar:.1f}",
            evidence="\n".join(evidence), group=group, feedback=fb)

def shown_examples(ctx: TaskContext, targets: Sequence[Attribution]) -> list[tuple[str, str, str]]:
    """The retrieved responses the prompt shows for `targets`, as (evidence id, 'own' | 'donor', text as shown):
    per target an earlier satisfying answer of the task (time index) and the first satisfying example of each of
    its first two donors (semantic index)."""
    out = []
    for a in targets:
        own = _own_example(ctx, a)
        out += [own] if own is not None else []
        out += [ex for ex in map(_donor_example, _donors(ctx, a)) if ex is not None]
    return list(dict.fromkeys(out))

def quoted_evidence(actions: Sequence[ops.Action], shown: Sequence[tuple[str, str, str]]
                    ) -> tuple[tuple[str, ...], str | None]:
    """(ids of the shown records some action's text quotes, the source of a <reference> field: 'own' when it
    quotes the task's own history, else 'donor' when it quotes a donor, else None), as the rule proposer's
    <reference> takes its own history first."""
    texts = [t for a in actions for t in _texts(a)]
    used = tuple(dict.fromkeys(i for i, _, rec in shown if any(quotes(t, rec, QUOTE_WORDS) for t in texts)))
    refs = [a.text for a in actions if isinstance(a, ops.AddField) and a.field == "reference"]
    if not refs:
        return used, None
    sources = {src for i, src, rec in shown if any(quotes(t, rec, QUOTE_WORDS) for t in refs)}
    return used, "own" if "own" in sources else "donor" if "donor" in sources else None

def _texts(a: ops.Action) -> list[str]:
    """The texts an action writes into the harness (a field, a criterion, the parts of a split)."""
    return [t for t in [getattr(a, "text", None), *(getattr(a, "texts", None) or ())] if isinstance(t, str)]

def _own_example(ctx: TaskContext, a: Attribution) -> tuple[str, str, str] | None:
    c = next((c for c in ctx.criteria if c.id == a.criterion_id), None)
    hit = ctx.earlier_satisfying(a.criterion_id, c.points) if c is not None else None
    return None if hit is None else (f"draw:{hit[0]}", "own", cut(hit[1], EXAMPLE_CHARS))

def _donors(ctx: TaskContext, a: Attribution) -> list:
    return list(ctx.donors.get(a.criterion_id, ()))[:2]

def _donor_example(d) -> tuple[str, str, str] | None:
    return (f"donor:{d.row}", "donor", cut(d.satisfying[0].response, EXAMPLE_CHARS)) if d.satisfying else None

def _action_criteria(actions: Sequence[ops.Action]) -> list[str]:
    out = []
    for a in actions:
        if getattr(a, "criterion_id", None):
            out.append(a.criterion_id)
        out += list(getattr(a, "criterion_ids", ()) or ())
    return out

def _updates_text(ctx: TaskContext, limit: int = 12) -> str:
    """The task's earlier updates from the time index, newest first, one line each."""
    lines = []
    for u in list(ctx.updates)[:limit]:
        r = u.record
        if r.op == "noop":
            continue
        undone = " (later undone)" if u.undone else ""
        lines.append(f"- step {u.step}: {r.interface} {r.op} {list(r.criterion_ids)} -> {r.verdict}{undone}"
                     + (f": {r.reason}" if r.reason else ""))
    return "\n".join(lines) or "(none)"
