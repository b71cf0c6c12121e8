"""The attributor: each criterion of a drawn task labelled blind | saturated | spurious | agree (HarnessRL, sec. 4.3).

Three questions per criterion, each answered from evidence that is kept with the label:

- Reach: can the policy produce the property? Unmet by the whole group now and never met in the time index (any
  earlier draw of the task under the same wording) -> `blind`, routed to guidance. Unmet now but met before ->
  `agree`: single-step noise, no action.
- Stage: is it mastered? Met by every rollout in the last `saturation_window` draws (this one included) ->
  `saturated`. When saturated criteria pull the task's discriminative mass (share of criteria that split the
  group) below `task_mass_threshold`, and they outnumber the blind ones (a task out of reach is not a mastered
  one), the *task* is diagnosed saturated and routed to sampling. A saturated
  criterion met through generic content (a disclaimer, a polite closing: its wording is generic, or the rule's
  match sits in a sentence nearly every response shares) is flagged `generic` for a second tightening.
- Hacking: does meeting it track quality? Only for criteria that split the group: if only the satisfying side
  shares a surface feature -> `spurious`, routed to the rubric. Signals on the CPU (each with its numbers):
  `length_gaming` (satisfying responses much longer / shorter than failing ones and than retrieved positives;
  with no positive at all, not when the failing side is itself degenerate),
  `keyword_stuffing` (met by degenerate responses: very short, repeated tokens), `isolated` (met while the task's
  other criteria and the oracle-free quality proxies fail), `surface_compliance` / `sycophantic_refusal` (a
  compliance claim, flattery or refusal shared by the satisfying side only). An LLM check through the judge
  protocol (`LLMHackingCheck`) adds partial coverage and anything else a reader sees. A wording check names the
  phrase of the criterion that lets surface form pass, the basis of a rewrite.

"Satisfy" is oriented by sign: a requirement is satisfied where S = 1, a pitfall (points < 0) where S = 0 (the bad
behaviour did not occur). So a pitfall every rollout commits is blind and one nobody commits is saturated. The
hacking question is asked of requirements only. NaN cells (no verdict) are left out everywhere.

Everything here is a function of numpy arrays, texts and evidence objects (`DrawRecord`s of the time index,
`Donor`s of the semantic index); only `LLMHackingCheck` calls a model.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from harnessrl_jax.evolver import templates
from harnessrl_jax.rubric import reward as reward_lib

BLIND, SATURATED, SPURIOUS, AGREE = "blind", "saturated", "spurious", "agree"
LABELS = (BLIND, SATURATED, SPURIOUS, AGREE)
# The interface each failure label routes to (sec. 3): blind -> guidance, saturated -> sampling (task level) and a
# rubric tightening, spurious -> rubric.
ROUTES = {BLIND: "guidance", SATURATED: "sampling", SPURIOUS: "rubric", AGREE: None}

# A donor lookup maps the criteria that need retrieved positives to their donors (memory.query_many).
DonorLookup = Callable[[Sequence[Any]], Mapping[str, Sequence[Any]]]


@dataclasses.dataclass(frozen=True)
class AttributorConfig:
    """Thresholds of the three questions; the defaults are this project's, documented beside each."""

    # Stage: draws (this one included) in which every rollout must meet a criterion. The paper's example is a
    # criterion met 8/8 in two consecutive steps.
    saturation_window: int = 2
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
    # LLM hacking check, when one is given: 'all' asks it about every split requirement (spurious if it or a CPU
    # signal says so); 'confirm' asks only about those a CPU signal flagged (spurious only if it agrees).
    llm_mode: str = "all"

    def __post_init__(self):
        if self.saturation_window < 1:
            raise ValueError(f"saturation_window must be >= 1, got {self.saturation_window}")
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

def satisfied(S_row, points: float) -> np.ndarray:
    """[J] float: 1 where the response satisfies the criterion (S = 1 for a requirement, 0 for a pitfall), NaN
    where there is no verdict."""
    s = np.asarray(S_row, np.float64)
    return s if points > 0 else np.where(np.isnan(s), np.nan, 1.0 - s)


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


def _rate(sat: np.ndarray) -> float:
    v = sat[~np.isnan(sat)]
    return float(v.mean()) if v.size else math.nan


# ---------------------------------------------------------------------------------------------- text measures

_WORD = re.compile(r"\w+")
STOPWORDS = frozenset("""a an the and or but if then else of to in on at by for with without from into onto over
under about above below as is are was were be been being it its this that these those there their they them he she
his her we our you your i me my not no nor so than too very can could should would will shall may might must do
does did done have has had having which who whom whose what when where why how all any both each few more most
other some such only own same just also any one two three""".split())


def words(text: str) -> list[str]:
    """Lowercased runs of word characters (the counting `length_constraints:number_words` uses)."""
    return _WORD.findall(text.lower())


def content_words(text: str) -> set[str]:
    return {w for w in words(text) if len(w) > 2 and w not in STOPWORDS and not w.isdigit()}


def degenerate(text: str, min_words: int = 8, repeat_run: int = 3, distinct_ratio: float = 0.5) -> str | None:
    """Why a response is degenerate ('very short', 'repeated tokens', 'repetitive'), or None."""
    w = words(text)
    if len(w) < min_words:
        return "very short"
    run = best = 1
    for a, b in zip(w, w[1:]):
        run = run + 1 if a == b else 1
        best = max(best, run)
    if best >= repeat_run:
        return "repeated tokens"
    if len(w) >= 10 and len(set(w)) / len(w) < distinct_ratio:
        return "repetitive"
    return None


def length_auc(a: Sequence[float], b: Sequence[float]) -> float:
    """P(a random element of a > one of b) + half the ties (the Mann-Whitney AUC)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if not a.size or not b.size:
        return math.nan
    return float((a[:, None] > b[None, :]).mean() + 0.5 * (a[:, None] == b[None, :]).mean())


def _sentences(text: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+|\n+", text)
    return [" ".join(words(p)) for p in parts if len(words(p)) >= 3]


def shared_sentences(responses: Sequence[str], share: float) -> list[str]:
    """Normalised sentences (lowercase words, >= 3 of them) found in at least `share` of the responses."""
    if not responses:
        return []
    counts: dict[str, int] = {}
    for r in responses:
        for s in set(_sentences(r)):
            counts[s] = counts.get(s, 0) + 1
    need = share * len(responses)
    return sorted(s for s, n in counts.items() if n >= need)


# Wording that a generic response meets whatever the task: disclaimers, referrals, politeness, tone and format.
GENERIC_WORDING = re.compile(
    r"\b(disclaimer|consult(s|ing)? (a|an|your) (doctor|physician|professional|expert)|see(k|s)? (a|an) "
    r"(doctor|professional)|polite(ly|ness)?|courteous|thank(s|ing)?|friendly|warm tone|empath\w*|professional tone|"
    r"formal tone|tone|clear(ly)?|concise(ly)?|well[- ]organi[sz]ed|readable|grammatical\w*|"
    r"format(ted|ting)?|structured|encourag\w*|closing|sign[- ]off|offers? (further )?help)\b", re.I)

# Phrases that claim compliance instead of showing it, flatter, or refuse (sec. 4.3: surface compliance,
# sycophantic refusal). Each is searched case-insensitively in the responses.
SURFACE_PATTERNS = {
    "surface_compliance": (
        r"\ball (of )?(the |your )?(requirements|criteria|instructions|constraints|points)( \w+)? (have been|are|were)"
        r" (fully |all )?(met|satisfied|addressed|covered|followed)",
        r"\bI (have|'ve) (addressed|covered|followed|met|satisfied|answered) (all|every|each)\b",
        r"\b(this|my) (response|answer) (fully |completely )?(meets|satisfies|addresses|follows|covers) (all|every)\b",
        r"\b(requirements?|criteria) (met|satisfied)\b",
    ),
    "sycophantic_refusal": (
        r"\b(what a |such a )?(great|excellent|wonderful|fantastic) question\b",
        r"\byou('re| are) (absolutely|completely|totally) right\b",
        r"\bI('m| am) (sorry|afraid),? (but )?I (can(no|')t|am unable to|won't)\b",
        r"\bI can(no|')t (help|assist|provide|answer|do) (with )?(that|this)\b",
        r"\bas an AI( language model)?\b",
    ),
}

# Words in a criterion that a bare mention, a list or a claim can satisfy (the wording check's lexicon).
LAX_WORDING = re.compile(
    r"\b(mention(s|ed)?|refer(s|red)? to|use(s|d)?|include(s|d)?|list(s|ed)?|name(s|d)?|note(s|d)?|acknowledge(s|d)?|"
    r"touch(es)? on|discuss(es)?|address(es)?|cover(s|ed)?|state(s|d)?|contain(s)?|specific|relevant|appropriate|some|any|"
    r"detailed|clear(ly)?)\b[^.,;:]{0,60}", re.I)


def _schema(criterion):
    """The schema.Criterion of a harness RubricCriterion (or the criterion itself)."""
    return criterion.to_criterion() if hasattr(criterion, "to_criterion") else criterion


def readable_pattern(pattern: str) -> str:
    """A rule keyword regex as a word a reader (and a guidance field) can use: '\\b(fluid|water)' -> 'fluid'."""
    p = re.sub(r"\(\?[a-zA-Z]+\)", "", pattern)
    p = re.sub(r"\\[bBsSwWdD]", " ", p)
    while True:  # each innermost group by its first alternative
        m = re.search(r"\(([^()]*)\)", p)
        if not m:
            break
        p = p[:m.start()] + re.sub(r"^\?[:=!<]*", "", m.group(1)).split("|")[0] + p[m.end():]
    p = p.split("|")[0]
    p = re.sub(r"\\(.)", r"\1", p)
    p = re.sub(r"[()\[\]^$*+?{}|.]", "", p)
    return " ".join(p.split())


def rule_keywords(criterion) -> list[str]:
    """The keyword patterns a keyword rule checks (keywords:existence, frequency, word_frequency)."""
    c = _schema(criterion)
    rid, kw = c.rule_id, c.rule_kwargs
    if rid == "keywords:existence":
        return list(kw.get("keywords", []))
    if rid in ("keywords:frequency", "keywords:word_frequency") and kw.get("keyword"):
        return [kw["keyword"]]
    if rid == "keywords:regex_match" and kw.get("pattern"):
        return [kw["pattern"]]
    return []


def wording_check(criterion, responses: Sequence[str] = ()) -> str | None:
    """The exact phrase of the criterion (or its rule) that lets surface form pass, or None.

    A keyword rule passes on the keyword alone: the phrase is where the keyword appears in the criterion's text
    (else the pattern, readable). A length rule passes on length alone. Otherwise the first lax wording in the
    text: 'mentions ...', 'uses specific ...', 'includes ...'.
    """
    c = _schema(criterion)
    rid = c.rule_id
    for pattern in rule_keywords(criterion):
        present = [r for r in responses if _search(pattern, r)]
        if responses and not present:
            continue
        m = _search(pattern, c.text)
        return m.group(0) if m else readable_pattern(pattern) or pattern
    if rid and rid.startswith("length_constraints:"):
        m = re.search(r"\b(under|fewer than|less than|at most|at least|more than|over|between)\s+\d+[^.,;]*", c.text,
                      re.I)
        return m.group(0) if m else f"{c.rule_kwargs}"
    m = LAX_WORDING.search(c.text)
    return m.group(0).strip() if m else None


def _search(pattern: str, text: str):
    try:
        return re.search(pattern, text, re.I)
    except re.error:
        return re.search(re.escape(pattern), text, re.I)


# ---------------------------------------------------------------------------------------------- hacking signals

def hacking_signals(k: int, criteria: Sequence[Any], S: np.ndarray, responses: Sequence[str], *,
                    positives: Sequence[str] = (), reference: str | None = None,
                    config: AttributorConfig = AttributorConfig()) -> dict[str, dict[str, Any]]:
    """The CPU signals that fire for requirement k of a group that it splits, each with its measurements.

    `positives` are responses known to meet the criterion (or a related one) elsewhere: the task's reference,
    earlier satisfying responses of this task, donors' satisfying examples. Only the satisfying side may share a
    signal's feature.
    """
    crit = _schema(criteria[k])
    row = np.asarray(S[k], np.float64)
    A = [j for j in range(len(responses)) if row[j] == 1]
    B = [j for j in range(len(responses)) if row[j] == 0]
    out: dict[str, dict[str, Any]] = {}
    if not A or not B or crit.points <= 0:
        return out
    rid = crit.rule_id or ""
    length_rule = rid.startswith("length_constraints:")
    n = np.array([len(words(r)) for r in responses], float)

    why = [degenerate(r, config.min_words, config.repeat_run, config.distinct_ratio) for r in responses]
    da = float(np.mean([why[j] is not None for j in A]))
    db = float(np.mean([why[j] is not None for j in B]))

    # length gaming: the two sides separate by length, and real positives do not share the satisfying length.
    # With no positive to compare with, a failing side of degenerate answers explains the gap by itself.
    if not length_rule and (positives or db < config.surface_share):
        la, lb = float(np.median(n[A])), float(np.median(n[B]))
        auc = length_auc(n[A], n[B])
        pos_len = [len(words(p)) for p in positives if p]
        p_med = float(np.median(pos_len)) if pos_len else None
        ratio = config.length_ratio if p_med is not None else config.length_ratio_unreferenced
        longer = auc >= config.length_auc and la >= ratio * max(lb, 1.0)
        shorter = auc <= 1 - config.length_auc and la * ratio <= lb
        if (longer or shorter) and p_med is not None:
            # Positives of the property sit near the failing length, not the satisfying one.
            longer = longer and la > config.length_ratio * max(p_med, 1.0)
            shorter = shorter and la * config.length_ratio < p_med
        if longer or shorter:
            out["length_gaming"] = {"direction": "longer" if longer else "shorter", "satisfying_median_words": la,
                                    "failing_median_words": lb, "auc": auc, "positives_median_words": p_med}

    # keyword stuffing: met by degenerate responses, the failing side mostly sound.
    if da >= config.surface_share and db <= da / 2:
        kinds = sorted({why[j] for j in A if why[j]})
        out["keyword_stuffing"] = {"degenerate_satisfying": da, "degenerate_failing": db, "kinds": kinds,
                                   "responses": [j for j in A if why[j]]}

    # isolated: met while the task's other requirements and the quality proxies fail.
    if not length_rule:
        others = [i for i, o in enumerate(criteria) if i != k and o.points > 0]
        if len(others) >= 2:
            pts = np.array([criteria[i].points for i in others], float)
            r_other = reward_lib.rubric_reward(pts, np.asarray(S, np.float64)[others])
            oa, ob = float(np.nanmean(r_other[A])), float(np.nanmean(r_other[B]))
            q = np.array([quality_proxy(r, reference, positives, config) for r in responses])
            qa, qb = float(q[A].mean()), float(q[B].mean())
            if oa + config.isolation_margin <= ob and qa < qb:
                out["isolated"] = {"other_reward_satisfying": oa, "other_reward_failing": ob,
                                   "quality_proxy_satisfying": qa, "quality_proxy_failing": qb}

    # compliance claims, flattery, refusals shared by the satisfying side only.
    for name, patterns in SURFACE_PATTERNS.items():
        for pattern in patterns:
            hits = [re.search(pattern, r, re.I) for r in responses]
            sa = float(np.mean([hits[j] is not None for j in A]))
            sb = float(np.mean([hits[j] is not None for j in B]))
            if sa >= config.surface_share and sb <= sa / 2:
                phrase = next(hits[j].group(0) for j in A if hits[j] is not None)
                out[name] = {"phrase": phrase, "share_satisfying": sa, "share_failing": sb}
                break
    return out


def quality_proxy(response: str, reference: str | None, positives: Sequence[str] = (),
                  config: AttributorConfig = AttributorConfig()) -> float:
    """An oracle-free quality score in [0, 1]: not degenerate, and (when there is one) how much of the reference's
    content vocabulary it covers."""
    sound = degenerate(response, config.min_words, config.repeat_run, config.distinct_ratio) is None
    target = reference or (positives[0] if positives else None)
    if not target:
        return float(sound)
    ref = content_words(target)
    recall = len(ref & content_words(response)) / len(ref) if ref else 0.0
    return 0.5 * float(sound) + 0.5 * recall


def generic_evidence(criterion, responses: Sequence[str], share: float) -> str | None:
    """Why a saturated criterion counts as met through generic content (the shared phrase), or None."""
    c = _schema(criterion)
    shared = shared_sentences(responses, share)
    for pattern in rule_keywords(criterion):
        for s in shared:
            if _search(pattern, s):
                return s
    m = GENERIC_WORDING.search(c.text)
    if m:
        return m.group(0)
    return None


# ------------------------------------------------------------------------------------------------- LLM check

@dataclasses.dataclass(frozen=True)
class HackingVerdict:
    """The LLM check's answer: spurious (None when unreadable), the pattern, the phrase, why."""

    spurious: bool | None
    pattern: str = ""
    phrase: str | None = None
    explanation: str = ""


HACKING_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string"},
                   "pattern": {"type": "string", "enum": ["surface_compliance", "length_gaming", "partial_coverage",
                                                          "sycophantic_refusal", "other", "none"]},
                   "phrase": {"type": "string"}, "spurious": {"type": "boolean"}},
    "required": ["explanation", "pattern", "phrase", "spurious"], "additionalProperties": False}


class LLMHackingCheck:
    """Asks a model, through the judge protocol (`client.complete(messages, schema)`, e.g. an OpenAIJudge), whether
    a criterion separates the group by surface form; prompt `evolver/prompts/hacking_check.txt`."""

    def __init__(self, client, template: str = "hacking_check", max_examples: int = 3, max_chars: int = 1500):
        self.client, self.template = client, templates.load(template)
        self.max_examples, self.max_chars = max_examples, max_chars

    def __call__(self, task, criterion, satisfying: Sequence[str], failing: Sequence[str],
                 positives: Sequence[str]) -> HackingVerdict:
        from harnessrl_jax.rubric.judges.llm import render_conversation, render_criterion
        from harnessrl_jax.rubric.judges.parse import json_objects, word_verdict

        def block(texts):
            texts = list(texts)[: self.max_examples]
            if not texts:
                return "(none)"
            return "\n\n".join(f"--- example {i + 1} ---\n{_cut(t, self.max_chars)}" for i, t in enumerate(texts))

        text = templates.fill(self.template, conversation=render_conversation(task),
                            criterion=render_criterion(_schema(criterion)), satisfying=block(satisfying),
                            failing=block(failing), positives=block(positives))
        out = self.client.complete(({"role": "user", "content": text},), HACKING_SCHEMA)
        if getattr(out, "status", "ok") != "ok" or not out.text:
            return HackingVerdict(None, explanation=f"no answer: {getattr(out, 'detail', '')}")
        for obj in json_objects(out.text):
            if isinstance(obj, dict) and "spurious" in obj:
                v = word_verdict(obj["spurious"])
                phrase = obj.get("phrase") or None
                crit_text = _schema(criterion).text
                if phrase and phrase not in crit_text:  # the phrase must be quoted from the criterion
                    phrase = None
                return HackingVerdict(v, str(obj.get("pattern", "")), phrase, str(obj.get("explanation", "")))
        return HackingVerdict(None, explanation=f"unparsed: {out.text[:200]}")


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + " ..."


# ---------------------------------------------------------------------------------------------------- attribute

def attribute(task, criteria: Sequence[Any], S, responses: Sequence[str], *, history: Sequence[Any] = (),
              donor_lookup: DonorLookup | None = None, config: AttributorConfig = AttributorConfig(),
              llm_check: Callable[..., HackingVerdict] | None = None) -> TaskAttribution:
    """Labels every criterion of one drawn task and diagnoses the task.

    task: the schema.Task (prompt, reference); criteria: the harness's current criteria of the task, in the rows
    of S [K, J]; responses: the J responses; history: the task's earlier DrawRecords, newest first (time index);
    donor_lookup: criteria -> {criterion id: donors} from the semantic index (called once, only for criteria that
    need positives); llm_check: an `LLMHackingCheck`.
    """
    S = np.asarray(S, np.float64)
    K, J = S.shape
    if len(criteria) != K or len(responses) != J:
        raise ValueError(f"task {task.id!r}: S is {S.shape} for {len(criteria)} criteria and {len(responses)} "
                         f"responses")
    reference = getattr(task, "reference", None)
    points = np.array([c.points for c in criteria], float)

    # First pass: reach and stage, and the raw hacking signals of the criteria that split the group.
    prelim: list[dict[str, Any]] = []
    for k, c in enumerate(criteria):
        sat = satisfied(S[k], c.points)
        valid = ~np.isnan(sat)
        rate = _rate(sat)
        past = history_rows(history, c.id, c.text)
        past_rates = tuple(_rate(satisfied(row, c.points)) for _, _, row, _ in past)
        ev = Evidence(pass_rate=rate, history_pass_rates=past_rates,
                      satisfying=tuple(int(j) for j in np.flatnonzero(valid & (sat == 1))),
                      failing=tuple(int(j) for j in np.flatnonzero(valid & (sat == 0))))
        prelim.append({"k": k, "c": c, "ev": ev, "past": past, "valid": bool(valid.any())})

    # Hacking signals from this task's own positives (its reference, earlier responses that met the criterion).
    for p in prelim:
        c = p["c"]
        if p["valid"] and 0.0 < p["ev"].pass_rate < 1.0 and c.points > 0:
            p["own"] = _satisfying_history(p["past"], c.points)
            p["signals"] = hacking_signals(p["k"], criteria, S, responses,
                                           positives=([reference] if reference else []) + [r for _, r in p["own"]],
                                           reference=reference, config=config)
    # Donors from the semantic index, fetched only where they are used: references for blind criteria, positives
    # for a length signal to be judged against, and the LLM check's retrieved positives.
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
            out.append(Attribution(c.id, AGREE, None, "no verdict in this group", ev))
            continue
        rate = ev.pass_rate
        if rate == 0.0:  # reach
            met_before = [(d, s) for (d, s, _, _), r in zip(past, ev.history_pass_rates) if r > 0]
            if met_before:
                d, s = met_before[0]
                ev = dataclasses.replace(ev, draw_ids=tuple(x for x, _ in met_before))
                out.append(Attribution(c.id, AGREE, "reach", f"unmet by the whole group now but met at step {s} "
                                       f"(draw {d}): single-step noise", ev))
            else:
                rows = tuple(x.row for x in donors.get(c.id, ()))
                ev = dataclasses.replace(ev, draw_ids=tuple(d for d, *_ in past), donor_rows=rows)
                out.append(Attribution(c.id, BLIND, "reach", f"unmet by all {len(ev.failing)} responses and never met "
                                       f"in {len(past)} earlier draw(s) under this wording", ev))
            continue
        if rate == 1.0:  # stage
            window = past[: config.saturation_window - 1]
            full = len(window) == config.saturation_window - 1 and all(
                r == 1.0 for r in ev.history_pass_rates[: config.saturation_window - 1])
            ev = dataclasses.replace(ev, draw_ids=tuple(d for d, *_ in window))
            if full:
                phrase = generic_evidence(c, responses, config.generic_share)
                ev = dataclasses.replace(ev, phrase=phrase)
                out.append(Attribution(
                    c.id, SATURATED, "stage", f"met by every rollout in the last {config.saturation_window} draw(s)"
                    + (f"; through generic content ({phrase!r})" if phrase else ""), ev, generic=phrase is not None))
            else:
                out.append(Attribution(c.id, AGREE, "stage", f"met by every rollout now, but the window of "
                                       f"{config.saturation_window} draws is not filled yet", ev))
            continue
        # hacking: the criterion splits the group.
        if c.points <= 0:
            out.append(Attribution(c.id, AGREE, None, "splits the group (pitfall)", ev))
            continue
        own = p["own"]
        donor_pos = [e.response for d in donors.get(c.id, ()) for e in d.satisfying]
        positives = ([reference] if reference else []) + [r for _, r in own] + donor_pos
        signals = p["signals"]
        if donor_pos:  # judged again with the retrieved positives
            signals = hacking_signals(k, criteria, S, responses, positives=positives, reference=reference,
                                      config=config)
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
            out.append(Attribution(c.id, SPURIOUS, "hacking", f"only the satisfying side shows: {names}", ev))
        else:
            ev = dataclasses.replace(ev, signals=signals)
            out.append(Attribution(c.id, AGREE, "hacking", "splits the group with no surface feature on the "
                                   "satisfying side alone", ev))

    mass = reward_lib.discriminative_mass(points, S)
    n_sat = sum(a.label == SATURATED for a in out)
    n_blind = sum(a.label == BLIND for a in out)
    task_label, reason = None, ""
    if n_sat and mass < config.task_mass_threshold and n_sat > n_blind:
        task_label = SATURATED
        reason = (f"{n_sat} saturated criteria leave a discriminative mass of {mass:.3g} "
                  f"(< {config.task_mass_threshold:.3g})")
    return TaskAttribution(task.id, tuple(out), float(mass), task_label, reason)


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

    def __call__(self, task, criteria, S, responses, *, history=(), donor_lookup=None) -> TaskAttribution:
        return attribute(task, criteria, S, responses, history=history, donor_lookup=donor_lookup,
                         config=self.config, llm_check=self.llm_check)
