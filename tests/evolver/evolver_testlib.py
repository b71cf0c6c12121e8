"""Builders shared by the evolver tests: rule-checked tasks, records for the time index, a bag-of-words embedder
for the semantic index (so retrieval runs with no model), and a fake judge-protocol client."""

import dataclasses
import hashlib
import json
import re

import numpy as np

from harnessrl_jax.memory import DrawRecord
from harnessrl_jax.rubric.judges import RuleJudge
from harnessrl_jax.rubric.schema import Criterion, Task


def kw(cid, text, points, *keywords):
    """A keywords:existence criterion (every pattern must occur)."""
    return Criterion(cid, text, points, ("verifier:rule", "rule:keywords:existence",
                                         "rule_kwargs:" + json.dumps({"keywords": list(keywords)})))


def words_under(cid, n, points=1.0):
    return Criterion(cid, f"The response is under {n} words.", points,
                     ("verifier:rule", "rule:length_constraints:number_words",
                      "rule_kwargs:" + json.dumps({"num_words": n, "relation": "less than"})))


def llm(cid, text, points=1.0):
    return Criterion(cid, text, points, ("verifier:llm",))


def make_task(tid, criteria, reference=None, prompt="Answer the question."):
    return Task(tid, "test", ({"role": "user", "content": prompt},), tuple(criteria), reference)


def draw(step, task_id, criteria, responses, scores, *, task_label=None, labels=None, actions=()):
    """A DrawRecord as the loop writes it: the wording of each criterion, its verdicts, the rewards."""
    s = np.asarray(scores, np.float64)
    pts = np.array([c.points for c in criteria], float)
    from harnessrl_jax.rubric.reward import rubric_reward

    harness = {"level": 0, "criteria": {c.id: {"text": c.text, "points": float(c.points), "tags": list(c.tags)}
                                        for c in criteria}}  # the slice of H_t the loop records with each draw
    return DrawRecord(step, task_id, tuple(c.id for c in criteria), tuple(c.text for c in criteria),
                      tuple(responses), s, rubric_reward(pts, s), harness=harness, task_label=task_label,
                      labels=labels or {}, actions=tuple(actions))


def regrade_with_rules(task, responses, criteria):
    """The critic's regrade hook, with the real rule judge (harness criteria are converted to schema ones)."""
    criteria = [c.to_criterion() if hasattr(c, "to_criterion") else c for c in criteria]
    return RuleJudge().score(task, list(responses), criteria).verdicts


class BagOfWords:
    """A deterministic embedder: hashed content-word counts, unit length. Same words -> cosine 1."""

    name, dim = "bag-of-words", 256

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), np.float32)
        for i, t in enumerate(texts):
            for w in re.findall(r"[a-z]{3,}", t.lower()):
                out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


@dataclasses.dataclass
class Reply:
    text: str
    status: str = "ok"
    detail: str = ""


class FakeClient:
    """The judge protocol's `complete(messages, schema)`, answering from a list and recording the prompts."""

    def __init__(self, *answers):
        self.answers, self.prompts, self.schemas = list(answers), [], []

    def complete(self, messages, schema, key=None):
        self.prompts.append(messages[-1]["content"])
        self.schemas.append(schema)
        return Reply(self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])


def build_context(criteria, responses, reference=None, *, state=None, history=None, tid="t", S=None, donors=None,
                  step=10, updates=(), config=None):
    """A TaskContext as the evolver builds it: H_t (the seed harness unless given), S by the rule judge unless
    given, and the attribution with the given time-index history (None: no memory, the group judged alone)."""
    from harnessrl_jax.evolver import TaskContext, attribute
    from harnessrl_jax.harness import HarnessState

    task = make_task(tid, criteria, reference)
    state = state or HarnessState.from_tasks([task])
    crits = state.rubric_of(tid)
    S = regrade_with_rules(task, responses, crits) if S is None else np.asarray(S, float)
    from harnessrl_jax.evolver import AttributorConfig

    att = attribute(task, crits, S, responses, history=history, config=config or AttributorConfig())
    return TaskContext(step, task, state, tuple(responses), S, att, tuple(history or ()), donors or {},
                       updates=tuple(updates))


def repeat_as_history(ctx, task_label=None, draw_id=7):
    """One earlier record identical to this group (so criteria met 8/8 fill a window of 2), with a task label."""
    rec = draw(ctx.step - 1, ctx.task_id, ctx.criteria, ctx.responses, ctx.S, task_label=task_label)
    return (dataclasses.replace(rec, draw_id=draw_id),)
