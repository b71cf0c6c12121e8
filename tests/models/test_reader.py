"""The shipped reader policy (harnessrl_jax/models/reader, launch/train_reader.py): it answers a world task unaided
with short on-topic sentences that never hold the task's blind word, and a mounted field that quotes the word (or
shows an answer with it) makes the word far more likely, by log-probability."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from harnessrl_jax import build
from harnessrl_jax.data import reader_corpus as rc
from harnessrl_jax.data.world import load_world
from harnessrl_jax.evolver import fields as fields_lib
from harnessrl_jax.harness.render import render_prompt
from harnessrl_jax.methods import ruscarl
from harnessrl_jax.methods.coca import scheme as coca_scheme
from harnessrl_jax.methods.guidance import load_template, with_system
from harnessrl_jax.models import forward, load_pretrained
from harnessrl_jax.rollout import JaxEngine
from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.schema import Criterion


@pytest.fixture(scope="module")
def reader():
    return load_pretrained(build.READER_DIR)


def _logp(model_config, params, tokenizer, prompts, responses, words):
    """Sum of log p over the tokens of `word` inside each response, given the prompt and the response before it."""
    rows = []
    for p, r, w in zip(prompts, responses, words):
        head, tail = r[:r.index(w)], r[r.index(w) + len(w):]
        pre, mid = tokenizer.encode(head), tokenizer.encode(w)
        rows.append((p + pre, mid, tokenizer.encode(tail) + [tokenizer.eos_id]))
    width = max(sum(map(len, row)) for row in rows)
    tokens = np.full((len(rows), width), tokenizer.pad_id, np.int32)
    mask = np.zeros((len(rows), width), np.float32)
    for i, (a, b, c) in enumerate(rows):
        tokens[i, :len(a) + len(b) + len(c)] = a + b + c
        mask[i, len(a):len(a) + len(b)] = 1.0
    logits = forward(model_config, params, jnp.asarray(tokens))
    logp = jax.nn.log_softmax(logits[:, :-1], -1)
    picked = np.asarray(jnp.take_along_axis(logp, jnp.asarray(tokens[:, 1:, None]), -1)[..., 0])
    return (picked * mask[:, 1:]).sum(1)


def test_the_reader_is_small_and_loads_with_its_tokenizer(reader):
    model_config, params, tokenizer = reader
    assert model_config.num_params() < 2_000_000
    assert tokenizer is not None and tokenizer.chat_template


def _guided(task, criterion, form, tokenizer):
    """The task's prompt as each method mounts guidance for `criterion`, through the methods' own code."""
    word = rc.quoted(criterion.text)[0]
    if form == "criterion":  # the rule proposer's <criterion> field
        fields = [("criterion", fields_lib.criterion_field(criterion.text, criterion.points, criterion))]
    elif form == "critique":
        fields = [("critique", fields_lib.critique_field(criterion.text, criterion.points, criterion.rule_id,
                                                         ["Bees make honey."] * 8))]
    elif form == "reference":
        shown = f"{task.id.capitalize()} make {word}. They have {rc.TOPICS[task.id][0][1]}."
        fields = [("reference", fields_lib.reference_field(fields_lib.Example(shown, "own", "d1")))]
    elif form == "ruscarl":  # a system turn listing the criterion
        messages = with_system(task.prompt, ruscarl.scaffold_text([criterion], load_template("ruscarl_scaffold")))
        return tokenizer.apply_chat_template(list(messages), tokenize=True)
    else:  # CoCA's rubric-guided prompt
        messages = coca_scheme.guided_messages(task, [criterion], load_template("coca_guided"))
        return tokenizer.apply_chat_template(list(messages), tokenize=True)
    return render_prompt(tokenizer, task.prompt, fields, tokenize=True)


@pytest.mark.parametrize("form", ["criterion", "critique", "reference", "ruscarl", "coca"])
def test_guidance_with_the_blind_word_makes_it_far_more_likely(reader, form):
    # catches: a reader that ignores guidance (the random tiny model: a field would change nothing), one that
    # reads only some of the methods' forms, or one trained on answers that already hold the extras
    model_config, params, tokenizer = reader
    world = load_world()
    bare, guided, responses, words = [], [], [], []
    for task in world.tasks:
        word = rc.TOPICS[task.id][1][0]
        words.append(word)
        criterion = Criterion(f"{task.id}/extra", rc.mention(word), 3.0,
                              ("verifier:rule", "rule:keywords:existence", f'rule_kwargs:{{"keywords": ["{word}"]}}'))
        responses.append(f"{task.id.capitalize()} make {word}.")
        guided.append(_guided(task, criterion, form, tokenizer))
        bare.append(render_prompt(tokenizer, task.prompt, tokenize=True))
    gain = _logp(model_config, params, tokenizer, guided, responses, words) - \
        _logp(model_config, params, tokenizer, bare, responses, words)
    # the word at least e^4 (about 55) times as likely, for every task
    assert gain.min() > 4.0, dict(zip([t.id for t in world.tasks], gain.round(1)))


def test_unaided_answers_are_short_on_topic_and_never_blind(reader):
    # catches: a reader that writes off-topic or unbounded text, or one whose blind words appear unaided
    model_config, params, tokenizer = reader
    tasks = load_world().tasks
    engine = JaxEngine(model_config, params, tokenizer)
    out = engine.generate([render_prompt(tokenizer, t.prompt, tokenize=True) for t in tasks], n=16,
                          max_new_tokens=96, temperature=1.0, seed=0)
    texts = np.array(out.texts).reshape(len(tasks), 16)
    on_topic = np.mean([[t.id in x.lower() for x in row] for t, row in zip(tasks, texts)])
    stopped = np.mean([r == "stop" for r in out.finish_reason])
    short = np.mean([rules.check("length_constraints:number_words", {"num_words": 40, "relation": "less than"}, x)
                     for x in texts.ravel()])
    blind = np.mean([[rc.TOPICS[t.id][1][0] in x for x in row] for t, row in zip(tasks, texts)])
    fact = np.mean([[rc.TOPICS[t.id][0][0] in x for x in row] for t, row in zip(tasks, texts)])
    assert on_topic >= 0.95 and stopped >= 0.95 and short >= 0.95, (on_topic, stopped, short)
    assert blind <= 0.01, blind
    assert 0.3 <= fact <= 0.9, fact  # an agree criterion splits groups
