"""A self-contained toy problem for tests and `experiments/tiny_cpu.py`: a character tokenizer and letter tasks.

A tiny random model over a character vocabulary samples almost uniformly, so a rule like "the letter q
appears at least once in 8 tokens" starts at ~15% and is learnable in a few dozen GRPO steps; a 49k-token BPE
vocabulary would leave a random model no signal at all. The tasks are ordinary `Task`s with `verifier:rule`
criteria (IFEval's `keywords:letter_frequency`), so they run through the same reward path as real data.
"""

from __future__ import annotations

import json

import tokenizers
from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers

from harnessrl_jax.models.tokenizer import Tokenizer
from harnessrl_jax.rubric.schema import Criterion, Task

SPECIAL = ("<|pad|>", "<|end|>", "<|user|>", "<|assistant|>", "<|system|>")
# Lowercase letters first (what the letter tasks sample), then what guidance fields and chat text also use, so a
# mounted <criterion>...</criterion> reaches the tiny policy as written.
CHARS = "abcdefghijklmnopqrstuvwxyz .,?!'-0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ\n<>/:;()\""
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


# What tool calls add (JSON braces and brackets, XML attributes, file names): the agentic tiny model's characters.
AGENT_CHARS = CHARS + "{}[]_=|"


def char_tokenizer(chars: str = CHARS) -> Tokenizer:
    """One token per character of `chars` (by default lowercase letters, digits, space, light punctuation) plus chat
    tokens."""
    vocab = {t: i for i, t in enumerate(SPECIAL + tuple(chars))}
    backend = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="<|pad|>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    backend.decoder = decoders.Fuse()  # join characters back without separators
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL])
    return Tokenizer(backend, eos_token="<|end|>", pad_token="<|pad|>", chat_template=CHAT_TEMPLATE)


def letter_tasks(letters: str = "q", thresholds: tuple[int, ...] = (1, 3)) -> list[Task]:
    """One task per letter: "say q". Criterion i (1 point each): the letter appears at least thresholds[i] times."""
    tasks = []
    for letter in letters:
        criteria = tuple(
            Criterion(
                id=f"letter-{letter}/at-least-{k}", text=f"The letter '{letter}' appears at least {k} times.",
                points=1.0,
                tags=("verifier:rule", "rule:keywords:letter_frequency",
                      "rule_kwargs:" + json.dumps({"letter": letter, "let_frequency": k, "let_relation": "at least"})),
            )
            for k in thresholds
        )
        tasks.append(Task(id=f"letter-{letter}", domain="toy",
                          prompt=({"role": "user", "content": f"say {letter}"},), criteria=criteria))
    return tasks


def _rule(cid: str, text: str, points: float, rule_id: str, kwargs: dict) -> Criterion:
    return Criterion(id=cid, text=text, points=points,
                     tags=("verifier:rule", f"rule:{rule_id}", "rule_kwargs:" + json.dumps(kwargs)))


def harness_tasks() -> list[Task]:
    """Letter tasks whose criteria put every evolver path to work on a random character model (HarnessRL tests):

    - `say-q`: the letter q at least once (varies within a group: ~15% of 8 random characters) and a word limit
      every response meets (saturated after two draws, so the task is down-weighted and the limit tightened);
    - `say-honey`: the word "honey" (blind: 8 random characters never spell it, so guidance is proposed and, since
      the frozen random policy cannot use it, measured at delta_g = 0 and rejected) and the same word limit.
    Oracle rubrics (analysis only) ask for two q's and for the word.
    """
    limit = dict(num_words=50, relation="less than")
    return [
        Task(id="say-q", domain="toy", prompt=({"role": "user", "content": "say q"},),
             criteria=(_rule("say-q/q", "The letter 'q' appears at least once.", 2.0, "keywords:letter_frequency",
                             dict(letter="q", let_frequency=1, let_relation="at least")),
                       _rule("say-q/short", "The response is under 50 words.", 1.0,
                             "length_constraints:number_words", limit)),
             oracle_criteria=(_rule("say-q/o-qq", "The letter 'q' appears at least twice.", 1.0,
                                    "keywords:letter_frequency", dict(letter="q", let_frequency=2,
                                                                      let_relation="at least")),)),
        Task(id="say-honey", domain="toy", prompt=({"role": "user", "content": "say honey"},),
             criteria=(_rule("say-honey/word", "The response says honey.", 2.0, "keywords:existence",
                             dict(keywords=["honey"])),
                       _rule("say-honey/short", "The response is under 50 words.", 1.0,
                             "length_constraints:number_words", limit)),
             reference="honey",
             oracle_criteria=(_rule("say-honey/o-h", "The response contains the letter h.", 1.0,
                                    "keywords:letter_frequency", dict(letter="h", let_frequency=1,
                                                                      let_relation="at least")),)),
    ]
