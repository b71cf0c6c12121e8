"""The attributor: each criterion of a drawn task labelled blind | saturated | spurious | agree (HarnessRL, sec. 4.3).

    reach     unmet by the group now, never met in the time index, and unmet in each of the last `blind_window`
              draws -> blind (routed to guidance); unmet now but met before -> agree (single-step noise)
    stage     met by every rollout in the last `saturation_window` draws -> saturated; saturated criteria that pull
              the task's discriminative mass below `task_mass_threshold` and outnumber the blind ones -> the task
              is saturated (routed to sampling)
    hacking   a requirement that splits the group and whose satisfying side alone shares a surface feature
              -> spurious (routed to the rubric; the signals are in `evolver.hacking`)

A pitfall (points < 0) is satisfied where S = 0; NaN cells are left out. Without a memory the group decides alone.
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver.hacking import HackingVerdict, generic_evidence, hacking_signals, wording_check
from harnessrl_jax.rubric import reward as reward_lib
from harnessrl_jax.rubric.reward import satisfied
from harnessrl_jax.words import Label

# A donor lookup maps the criteria that need retrieved positives to their donors (memory.query_many).
DonorLookup = Callable[[Sequence[Any]], Mapping[str, Sequence[Any]]]


@dataclasses.dataclass(frozen=True)
class AttributorConfig:
    """Thresholds of the three questions; the defaults are this project's, documented beside each."""

    # Stage: draws (this one included) in which every rollout must meet a criterion. The paper's example is a
    # criterion met 8/8 in two consecutive steps.
    saturation_window: int = 2
    # Reach: draws (this one included) in which no rollout may meet a criterion for it to be blind; the same
    # persistence as saturation, so one unlucky group is not taken for a capability gap.
    blind_window: int = 2
    # A task whose saturated criteria leave its discriminative mass below this is saturated (cold start: the
    # median seed mass, `ColdStart.task_mass_threshold`).
    task_mass_threshold: float = 0.5
    # Generic saturation: a sentence shared (after normalising) by at least this share of the group.
    generic_share: float = 0.8
    # Hacking. length_gaming: satisfying vs failing median word counts differ by this ratio, with the lengths
    # separating the two sides (AUC) at least this well; with no retrieved positive to compare with, the stricter
    # ratio applies.
    length_ratio: float = 1.5
    length_ratio_unreferenced: float = 2.0
    length_auc: float = 0.9
    # Degenerate responses (keyword_stuffing): under `min_words` words, a run of `repeat_run` identical tokens, or
    # (from 10 words on) fewer than `distinct_ratio` distinct tokens.
    min_words: int = 8
    repeat_run: int = 3
    distinct_ratio: float = 0.5
    # A surface feature counts when at least this share of the satisfying side shows it and the failing side
    # shows it at most half as often.
    surface_share: float = 0.5
    # isolated: the satisfying side scores this many reward points less on the task's other requirements.
    isolation_margin: float = 25.0
    # judge_directed: the satisfying side's share of responses that write to the judge ("the response above meets
    # every criterion", "ignore the rubric") must exceed this (and the failing side's); 0: any one such response.
    judge_directed_share: float = 0.0
    # LLM hacking check, when one is given: 'all' asks it about every split requirement (spurious if it or a CPU
    # signal says so); 'confirm' asks only about those a CPU signal flagged (spurious only if it agrees).
    llm_mode: str = "all"

    def __post_init__(self):
        for name in ("saturation_window", "blind_window"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.llm_mode not in ("all", "confirm"):
            raise ValueError(f"llm_mode must be 'all' or 'confirm', got {self.llm_mode!r}")


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a label rests on: records consulted, pass rates, the sides of the group, signals and the phrase."""

    pass_rate: float = math.nan  # share of this group satisfying it (oriented by sign)
    history_pass_rates: tuple[float, ...] = ()  # earlier draws under the same wording, newest first
    draw_ids: tuple[int, ...] = ()  # time-index records the label used
    donor_rows: tuple[int, ...] = ()  # semantic-index rows whose examples served as positives
    satisfying: tuple[int, ...] = ()  # response indices of this group
    failing: tuple[int, ...] = ()
    signals: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    phrase: str | None = None  # wording check: the part of the criterion that lets surface form pass

    def ids(self) -> tuple[str, ...]:
        """Evidence ids as written to harness.jsonl: `draw:<id>` (time index), `donor:<row>` (semantic index)."""
        return tuple(f"draw:{i}" for i in self.draw_ids) + tuple(f"donor:{r}" for r in self.donor_rows)

    def to_dict(self) -> dict[str, Any]:
        return {"pass_rate": _num(self.pass_rate), "history_pass_rates": [_num(p) for p in self.history_pass_rates],
                "draw_ids": list(self.draw_ids), "donor_rows": list(self.donor_rows),
                "satisfying": list(self.satisfying), "failing": list(self.failing),
                "signals": json.loads(json.dumps(self.signals, default=_num)), "phrase": self.phrase}


@dataclasses.dataclass(frozen=True)
class Attribution:
    """One criterion's label, the question that decided it (reach | stage | hacking | None) and its evidence."""

    criterion_id: str
    label: str
    question: str | None
    reason: str
    evidence: Evidence
    generic: bool = False  # saturated through generic content: flagged for a second tightening

    def to_dict(self) -> dict[str, Any]:
        return {"criterion_id": self.criterion_id, "label": self.label, "question": self.question,
                "reason": self.reason, "generic": self.generic, "evidence": self.evidence.to_dict()}


@dataclasses.dataclass(frozen=True)
class TaskAttribution:
    """All criteria of one drawn task, and the task-level diagnosis (`task_label` 'saturated' or None)."""

    task_id: str
    criteria: tuple[Attribution, ...]
    mass: float  # discriminative mass of this group (unweighted, rubric.reward.discriminative_mass)
    task_label: str | None
    task_reason: str = ""

    def labels(self) -> dict[str, str]:
        """criterion id -> label, as DrawRecord.labels takes it."""
        return {a.criterion_id: a.label for a in self.criteria}

    def get(self, criterion_id: str) -> Attribution | None:
        for a in self.criteria:
            if a.criterion_id == criterion_id:
                return a
        return None

    def with_label(self, label: str) -> tuple[Attribution, ...]:
        return tuple(a for a in self.criteria if a.label == label)

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "mass": _num(self.mass), "task_label": self.task_label,
                "task_reason": self.task_reason, "criteria": [a.to_dict() for a in self.criteria]}


def _num(x):
    if isinstance(x, (np.generic,)):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


# ------------------------------------------------------------------------------------------ orientation, history

def history_rows(history: Sequence[Any], criterion_id: str, text: str
                 ) -> list[tuple[int, int, np.ndarray, Sequence[str]]]:
    """(draw id, step, score row, responses) of earlier draws that judged this criterion under this exact wording,
    newest first (the time index gives records newest first)."""
    out = []
    for r in history:
        try:
            k = r.criterion_ids.index(criterion_id)
        except ValueError:
            continue
        if r.criterion_texts[k] == text:
            out.append((r.draw_id, r.step, np.asarray(r.scores, np.float64)[k], r.responses))
    return out


def _rate(row, points: float) -> float:
    """The mean of `satisfied(row, points)` over the judged responses (NaN when none was judged), in plain Python:
    it is asked of every criterion of every earlier draw of the task, and for verdicts of 0 and 1 the sum is exact,
    so the float is numpy's."""
    judged = [v for v in np.asarray(row, np.float64).tolist() if v == v]
    if not judged:
        return math.nan
    return sum(judged if points > 0 else [1.0 - v for v in judged]) / len(judged)


# ---------------------------------------------------------------------------------------------------- attribute

def attribute(task, criteria: Sequence[Any], S, responses: Sequence[str], *, history: Sequence[Any] | None = None,
              donor_lookup: DonorLookup | None = None, config: AttributorConfig = AttributorConfig(),
              llm_check: Callable[..., HackingVerdict] | None = None) -> TaskAttribution:
    """Labels every criterion of one drawn task and diagnoses the task.

    task: the schema.Task (its prompt); criteria: the harness's current criteria of the task, in the rows of S
    [K, J]; responses: the J responses; history: the task's earlier DrawRecords, newest first (time index), or None
    without a memory (see the module docstring); donor_lookup: criteria -> {criterion id: donors} from the semantic
    index (called once, only for criteria that need positives); llm_check: an `LLMHackingCheck`.
    """
    S = np.asarray(S, np.float64)
    K, J = S.shape
    if len(criteria) != K or len(responses) != J:
        raise ValueError(f"task {task.id!r}: S is {S.shape} for {len(criteria)} criteria and {len(responses)} "
                         f"responses")
    windows = history is not None
    history = history or ()
    points = np.array([c.points for c in criteria], float)

    # First pass: reach and stage, and the raw hacking signals of the criteria that split the group.
    prelim: list[dict[str, Any]] = []
    for k, c in enumerate(criteria):
        sat = satisfied(S[k], c.points)
        valid = ~np.isnan(sat)
        rate = _rate(S[k], c.points)
        past = history_rows(history, c.id, c.text)
        past_rates = tuple(_rate(row, c.points) for _, _, row, _ in past)
        ev = Evidence(pass_rate=rate, history_pass_rates=past_rates,
                      satisfying=tuple(int(j) for j in np.flatnonzero(valid & (sat == 1))),
                      failing=tuple(int(j) for j in np.flatnonzero(valid & (sat == 0))))
        prelim.append({"k": k, "c": c, "ev": ev, "past": past, "valid": bool(valid.any())})

    # Hacking signals from this task's own positives (earlier responses that satisfied the criterion: a requirement
    # met, a pitfall avoided); a pitfall that splits the group is asked the same question as a requirement.
    for p in prelim:
        c = p["c"]
        if p["valid"] and 0.0 < p["ev"].pass_rate < 1.0:
            p["own"] = _satisfying_history(p["past"], c.points)
            p["signals"] = hacking_signals(p["k"], criteria, S, responses, positives=[r for _, r in p["own"]],
                                           config=config)
    # Donors from the semantic index, fetched only where they are used: examples for blind criteria, positives for
    # a length signal to be judged against, and the LLM check's retrieved positives.
    def needs(p):
        if not p["valid"]:
            return False
        if p["ev"].pass_rate == 0.0:
            return True
        if "signals" not in p:
            return False
        return ("length_gaming" in p["signals"] or (llm_check is not None and (config.llm_mode == "all"
                                                                                or bool(p["signals"]))))
    need_donors = [p["c"] for p in prelim if needs(p)]
    donors = dict(donor_lookup(need_donors)) if donor_lookup is not None and need_donors else {}

    out = []
    for p in prelim:
        k, c, ev, past = p["k"], p["c"], p["ev"], p["past"]
        if not p["valid"]:
            out.append(Attribution(c.id, Label.AGREE, None, "no verdict in this group", ev))
            continue
        rate = ev.pass_rate
        if rate == 0.0:  # reach
            out.append(_reach(c, ev, past, donors, config.blind_window if windows else 1))
            continue
        if rate == 1.0:  # stage
            out.append(_stage(c, ev, past, responses, config, config.saturation_window if windows else 1))
            continue
        # hacking: the criterion splits the group.
        own = p["own"]
        donor_pos = [e.response for d in donors.get(c.id, ()) for e in d.satisfying]
        positives = [r for _, r in own] + donor_pos
        signals = p["signals"]
        if donor_pos:  # judged again with the retrieved positives
            signals = hacking_signals(k, criteria, S, responses, positives=positives, config=config)
        rows = tuple(d.row for d in donors.get(c.id, ()) if d.satisfying)
        llm = None
        if llm_check is not None and (config.llm_mode == "all" or signals):
            llm = llm_check(task, c, [responses[j] for j in ev.satisfying], [responses[j] for j in ev.failing],
                            positives)
            if llm.spurious is not None:
                signals = dict(signals)
                signals["llm"] = {"spurious": llm.spurious, "pattern": llm.pattern, "phrase": llm.phrase,
                                  "explanation": llm.explanation}
        cpu = {name: v for name, v in signals.items() if name != "llm"}
        if llm is None or llm.spurious is None:
            spurious = bool(cpu)
        elif config.llm_mode == "all":
            spurious = llm.spurious or bool(cpu)
        else:  # confirm: the CPU nominates, the model decides
            spurious = llm.spurious
        if spurious:
            phrase = (llm.phrase if llm is not None and llm.spurious and llm.phrase else None) or \
                wording_check(c, [responses[j] for j in ev.satisfying])
            ev = dataclasses.replace(ev, signals=signals, phrase=phrase,
                                     draw_ids=tuple(dict.fromkeys(d for d, _ in own)), donor_rows=rows)
            names = ", ".join(s for s in signals if s != "llm" or signals["llm"]["spurious"])
            out.append(Attribution(c.id, Label.SPURIOUS, "hacking", f"only the satisfying side shows: {names}", ev))
        else:
            ev = dataclasses.replace(ev, signals=signals)
            out.append(Attribution(c.id, Label.AGREE, "hacking", "splits the group with no surface feature on the "
                                   "satisfying side alone", ev))

    mass = reward_lib.discriminative_mass(points, S)
    n_sat = sum(a.label == Label.SATURATED for a in out)
    n_blind = sum(a.label == Label.BLIND for a in out)
    task_label, reason = None, ""
    if n_sat and mass < config.task_mass_threshold and n_sat > n_blind:
        task_label = Label.SATURATED
        reason = (f"{n_sat} saturated criteria leave a discriminative mass of {mass:.3g} "
                  f"(< {config.task_mass_threshold:.3g})")
    return TaskAttribution(task.id, tuple(out), float(mass), task_label, reason)


def _reach(c, ev: Evidence, past, donors, window: int) -> Attribution:
    """A criterion the whole group fails: noise if it was met before, blind once unmet for `window` draws."""
    met_before = [(d, s) for (d, s, _, _), r in zip(past, ev.history_pass_rates) if r > 0]
    if met_before:
        d, s = met_before[0]
        ev = dataclasses.replace(ev, draw_ids=tuple(x for x, _ in met_before))
        return Attribution(c.id, Label.AGREE, "reach", f"unmet by the whole group now but met at step {s} (draw {d}): "
                           f"single-step noise", ev)
    earlier = [(d, r) for (d, *_), r in zip(past, ev.history_pass_rates) if r == 0.0][: window - 1]
    rows = tuple(x.row for x in donors.get(c.id, ()))
    ev = dataclasses.replace(ev, draw_ids=tuple(d for d, *_ in past), donor_rows=rows)
    if len(earlier) < window - 1:
        return Attribution(c.id, Label.AGREE, "reach", f"unmet by the whole group and never met before, but the "
                           f"window of {window} draws under this wording is not filled yet ({len(earlier) + 1})", ev)
    return Attribution(c.id, Label.BLIND, "reach", f"unmet by all {len(ev.failing)} responses, in the last {window} "
                       f"draw(s), and never met in {len(past)} earlier draw(s) under this wording", ev)


def _stage(c, ev: Evidence, past, responses, config: AttributorConfig, window: int) -> Attribution:
    """A criterion the whole group meets: saturated once met by every rollout for `window` draws."""
    earlier = past[: window - 1]
    full = len(earlier) == window - 1 and all(r == 1.0 for r in ev.history_pass_rates[: window - 1])
    ev = dataclasses.replace(ev, draw_ids=tuple(d for d, *_ in earlier))
    if not full:
        return Attribution(c.id, Label.AGREE, "stage", f"met by every rollout now, but the window of {window} draws "
                           f"is not filled yet", ev)
    phrase = generic_evidence(c, responses, config.generic_share)
    ev = dataclasses.replace(ev, phrase=phrase)
    return Attribution(c.id, Label.SATURATED, "stage", f"met by every rollout in the last {window} draw(s)"
                       + (f"; through generic content ({phrase!r})" if phrase else ""), ev, generic=phrase is not None)


def _satisfying_history(past: Sequence[tuple[int, int, np.ndarray, Sequence[str]]], points: float, limit: int = 2
                        ) -> list[tuple[int, str]]:
    """Up to `limit` (draw id, response) of the earlier responses in `past` (history_rows) that satisfied the
    criterion, newest first."""
    out = []
    for draw_id, _, row, responses in past:
        for j in np.flatnonzero(satisfied(row, points) == 1):
            out.append((draw_id, responses[j]))
            if len(out) >= limit:
                return out
    return out


class Attributor:
    """`attribute` with its configuration and optional LLM check bound; the evolver calls `__call__`."""

    def __init__(self, config: AttributorConfig = AttributorConfig(), llm_check=None):
        self.config, self.llm_check = config, llm_check

    def __call__(self, task, criteria, S, responses, *, history=None, donor_lookup=None) -> TaskAttribution:
        return attribute(task, criteria, S, responses, history=history, donor_lookup=donor_lookup,
                         config=self.config, llm_check=self.llm_check)
