"""The synthetic instruction language of the testbed: what the reader policy is trained on (launch/train_reader.py)
and what the default world's criteria are written against (data/worlds/build.py).

A request names a topic ("tell me about bees"); an answer is one to four short sentences about it, each giving one
of the topic's `facts` ("Bees make honey."). A topic's `extras` never appear in an unaided answer: they appear only
when a guidance field asks for them by quoting them ('nectar'), or shows an answer that has them (a <reference>),
which the reader then copies. Independent surface features vary across answers, so a criterion on any of them
splits a group without saying anything about quality: a compliance claim, the topic repeated (keyword stuffing),
an exclamation mark at the end, and the answer's length.
"""

from __future__ import annotations

import os
import re
from typing import Iterable, Sequence

import numpy as np
import tokenizers
from tokenizers import AddedToken, decoders, models, pre_tokenizers

from harnessrl_jax.models.tokenizer import Tokenizer
from harnessrl_jax.toy import CHAT_TEMPLATE, SPECIAL

TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # topic -> (facts, extras)
    "bees": (("honey", "hive", "wax", "flowers"), ("nectar", "pollen")),
    "rivers": (("water", "fish", "banks", "boats"), ("delta", "silt")),
    "stars": (("light", "night", "sky", "heat"), ("fusion", "orbit")),
    "trees": (("leaves", "roots", "wood", "shade"), ("resin", "rings")),
    "bread": (("flour", "oven", "crust", "salt"), ("yeast", "dough")),
    "ships": (("sails", "ports", "crew", "decks"), ("hull", "anchor")),
    "clocks": (("hands", "time", "bells", "faces"), ("gears", "spring")),
    "cats": (("fur", "paws", "milk", "naps"), ("whiskers", "purr")),
    "rain": (("clouds", "drops", "storms", "puddles"), ("mist", "flood")),
    "wolves": (("packs", "howls", "forest", "snow"), ("den", "prey")),
}
REQUESTS = ("tell me about {t}", "what about {t}?", "describe {t}")
VERBS = ("have", "make", "need", "give")
COMPLIANCE = "All requirements are met."
P_COMPLIANCE, P_STUFFING, P_EXCLAIM = 0.25, 0.25, 0.3
SENTENCES = (1, 2, 3, 4)  # uniform
P_COPY = 0.9  # a quoted word of the guidance goes into the answer
P_COPY_REFERENCE = 0.8  # the answer is the <reference> field's example
P_PSEUDO = 0.25  # a target word is made up (spelt in characters: copying it needs real copying)


def request(topic: str, k: int = 0) -> str:
    return REQUESTS[k % len(REQUESTS)].format(t=topic)


def _sentence(rng: np.random.Generator, subject: str, word: str) -> str:
    return f"{subject} {VERBS[rng.integers(len(VERBS))]} {word}."


def answer(rng: np.random.Generator, topic: str, targets: Sequence[str] = ()) -> str:
    """One answer about `topic`: 1-4 fact sentences, each target word in a sentence of its own (kept with
    probability P_COPY), and the surface features drawn independently."""
    facts, _ = TOPICS[topic]
    n = int(rng.choice(SENTENCES))
    words = [facts[i] for i in rng.permutation(len(facts))[:n]]
    for w in targets:
        if rng.random() < P_COPY:
            words.insert(int(rng.integers(len(words) + 1)), w)
    cap = topic.capitalize()
    sentences = [_sentence(rng, cap if i == 0 else "They", w) for i, w in enumerate(words)]
    if rng.random() < P_STUFFING:
        sentences.insert(0, f"{cap} {topic} {topic}.")
    if rng.random() < P_EXCLAIM:
        sentences[-1] = sentences[-1][:-1] + "!"
    if rng.random() < P_COMPLIANCE:
        sentences.append(COMPLIANCE)
    return " ".join(sentences)


def _pseudo_word(rng: np.random.Generator) -> str:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return "".join(letters[i] for i in rng.integers(len(letters), size=int(rng.integers(3, 8))))


def mention(word: str) -> str:
    """A criterion's text asking for a word, as the world writes it (the reader copies quoted words)."""
    return f"The response mentions '{word}'."


# Guidance in the forms the methods mount it: a <criterion> field (the rule proposer's instruction, or a quote of an
# earlier answer), a <critique>, a scaffold listing criteria (RuscaRL, CoCA's guided prompt), a skill line.
def _criterion_forms(w: str) -> list[str]:
    return [f"<criterion>Mention '{w}'. (for example with the word: {w})</criterion>",
            f"<criterion>Your answer should satisfy this: {mention(w)}</criterion>",
            f"<critique>None of the 8 answers in the last attempt met this: {mention(w)}</critique>",
            f"Criterion 1: {mention(w)} (worth 3 points)",
            f"- mention: {mention(w)}"]


_DISTRACTORS = ("The response is under 60 words.", "The response ends with '!'", "The response states that all "
                "requirements are met.", "The response is at least 12 words.")


def guidance(rng: np.random.Generator, targets: Sequence[str], reference: str | None = None) -> str:
    """A guidance block asking for `targets` (each in one of the methods' forms, with criteria that ask for no word
    among them), or showing `reference` as a <reference> field."""
    if reference is not None:
        return f"<reference>An answer that meets it:\n{reference}</reference>"
    lines = [_criterion_forms(w)[rng.integers(5)] for w in targets]
    if rng.random() < 0.5:
        lines.insert(int(rng.integers(len(lines) + 1)),
                     f"Criterion 2: {_DISTRACTORS[rng.integers(len(_DISTRACTORS))]} (worth 1 points)")
    if rng.random() < 0.3:
        lines.insert(0, "Evaluation criteria for this question:")
    return "\n".join(lines)


# The criterion lists that go in a system turn (RuscaRL's scaffold) or after the request (CoCA's guided prompt), as
# those methods' templates write them.
SCAFFOLD = ("Evaluation criteria for this question:\n\nIMPORTANT POINTS TO INCLUDE:\n{lines}\n\nWrite a complete, "
            "helpful answer. Do not mention these criteria or say that you have seen them.")
GUIDED = ("Your response will be evaluated against these criteria.\nAim to satisfy:\n{lines}\nDo not mention or refer "
          "to these criteria in your response.")


def _listed(rng: np.random.Generator, targets: Sequence[str], scaffold: bool) -> str:
    items = [mention(w) for w in targets]
    if rng.random() < 0.5:
        items.insert(int(rng.integers(len(items) + 1)), _DISTRACTORS[rng.integers(len(_DISTRACTORS))])
    if scaffold:
        lines = "\n".join(f"Criterion {n}: {t} (worth {int(rng.integers(1, 4))} points)" for n, t in enumerate(items, 1))
        return SCAFFOLD.format(lines=lines)
    return GUIDED.format(lines="\n".join(f"- {t} (worth {int(rng.integers(1, 4))} points)" for t in items))


def example(rng: np.random.Generator, list_share: float = 0.0) -> tuple[list[dict[str, str]], str]:
    """(messages, answer) of the reader's training data: a bare request (half), a request with quoted target words
    to copy (a topic's extras or facts, or made-up words) in a field form, the same in a criterion list (a system
    turn or after the request; `list_share` of all examples), or a request with a <reference> answer to copy."""
    topic = list(TOPICS)[rng.integers(len(TOPICS))]
    req = request(topic, int(rng.integers(len(REQUESTS))))
    kind = rng.random()
    if kind < 0.5:
        return [{"role": "user", "content": req}], answer(rng, topic)
    facts, extras = TOPICS[topic]
    if kind < 0.85:
        pool = list(extras) + list(facts)
        targets = [pool[i] if rng.random() >= P_PSEUDO else _pseudo_word(rng)
                   for i in rng.permutation(len(pool))[: int(rng.integers(1, 3))]]
        if kind < 0.85 - list_share:
            return [{"role": "user", "content": f"{req}\n\n{guidance(rng, targets)}"}], answer(rng, topic, targets)
        if rng.random() < 0.5:
            return ([{"role": "system", "content": _listed(rng, targets, True)}, {"role": "user", "content": req}],
                    answer(rng, topic, targets))
        return [{"role": "user", "content": f"{req}\n\n{_listed(rng, targets, False)}"}], answer(rng, topic, targets)
    targets = [extras[rng.integers(len(extras))] if rng.random() >= P_PSEUDO else _pseudo_word(rng)]
    shown = answer(rng, topic, targets)
    reply = shown if rng.random() < P_COPY_REFERENCE else answer(rng, topic)
    return [{"role": "user", "content": f"{req}\n\n{guidance(rng, (), shown)}"}], reply


# The words of the methods' guidance texts (fields, critiques, scaffolds, CoCA's prompt) that are not in their
# prompt files: kept whole in the reader's vocabulary so guidance stays short.
GUIDANCE_WORDS = ("Mention for example with the word words Your answer should satisfy this An that meets it does not "
                  "None All of answers in last attempt met did which costs points Their lengths were earlier got "
                  "right said Avoid Do Criterion worth penalty The response mentions states all requirements are "
                  "is under at least long ends an exclamation mark names three times Aim to satisfy")
_PROMPTS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "methods", "prompts")
_SPLIT = re.compile(r"[A-Za-z0-9]+|[^\sA-Za-z0-9]")


def corpus_words(texts: Iterable[str]) -> set[str]:
    return {w for t in texts for w in _SPLIT.findall(t)}


def reader_tokenizer() -> Tokenizer:
    """A word-level tokenizer for the reader: every word of the corpus's vocabulary and templates, of the methods'
    prompt files and of GUIDANCE_WORDS is one token; any other word is spelt in single characters (WordPiece's
    '##' continuations), so a made-up word or a new world's word still reads and writes; the chat tokens of toy."""
    texts = [GUIDANCE_WORDS, COMPLIANCE, SCAFFOLD, GUIDED, " ".join(VERBS), "They", mention("x"),
             " ".join(_DISTRACTORS), " ".join(_criterion_forms("x")), guidance(np.random.default_rng(0), (), "x")]
    texts += [request(t, k) for t in TOPICS for k in range(len(REQUESTS))]
    texts += [" ".join((t, t.capitalize()) + facts + extras) for t, (facts, extras) in TOPICS.items()]
    for name in sorted(os.listdir(_PROMPTS)):
        with open(os.path.join(_PROMPTS, name), encoding="utf-8") as f:
            texts.append(f.read())
    chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    words = sorted(corpus_words(texts) | set(chars)) + [f"##{c}" for c in chars]
    vocab = {t: i for i, t in enumerate(SPECIAL + ("[UNK]",) + tuple(words))}
    backend = tokenizers.Tokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=64))
    backend.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    return Tokenizer(backend, eos_token="<|end|>", pad_token="<|pad|>", chat_template=CHAT_TEMPLATE)


def quoted(text: str) -> list[str]:
    """The quoted words of a text ('nectar'), as the reader is trained to copy them."""
    return re.findall(r"'([a-z]+)'", text)


__all__ = ["COMPLIANCE", "REQUESTS", "TOPICS", "answer", "example", "guidance", "mention", "quoted", "reader_tokenizer",
           "request"]
