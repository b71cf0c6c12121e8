"""Rendering: mounted guidance fields after the last user message, through the chat template. Expected strings are
written out by hand in SmolLM2's ChatML format (its template adds the default system message when there is none)."""

import pytest

from harnessrl_jax.harness import render as hr
from harnessrl_jax.harness.ops import AddField
from harnessrl_jax.harness.state import HarnessState
from harnessrl_jax.harness.transitions import apply
from harnessrl_jax.rubric.schema import Criterion, Task

SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"


@pytest.fixture(scope="module")
def tokenizer():
    from harnessrl_jax.models.presets import smollm2_gguf_path
    from harnessrl_jax.models.tokenizer import Tokenizer

    return Tokenizer.from_gguf(smollm2_gguf_path())


def task(tid, prompt):
    return Task(tid, "science", tuple(prompt), (Criterion(f"{tid}/c0", "x", 1.0),))


TASKS = [
    task("paper", [{"role": "user", "content": "Why does cellulose make a good filter paper?"}]),
    task("chat", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Name a polymer."},
                  {"role": "assistant", "content": "Cellulose."}, {"role": "user", "content": "Another?"}]),
]


def test_guidance_block_orders_fields_criterion_reference_critique():
    fields = [("critique", "Last time you named no reaction."), ("criterion", "Name the reaction."),
              ("reference", "Periodate oxidation cleaves C2-C3.")]
    assert hr.guidance_block(fields) == ("<criterion>Name the reaction.</criterion>\n"
                                         "<reference>Periodate oxidation cleaves C2-C3.</reference>\n"
                                         "<critique>Last time you named no reaction.</critique>")
    with pytest.raises(ValueError):
        hr.guidance_block([("hint", "x")])
    with pytest.raises(ValueError):
        hr.guidance_block([("criterion", "x"), ("criterion", "y")])


def test_fields_go_after_the_last_user_message_only():
    msgs = hr.guided_messages(TASKS[1].prompt, [("critique", "Too long.")])
    assert [m["content"] for m in msgs] == ["Be brief.", "Name a polymer.", "Cellulose.",
                                            "Another?\n\n<critique>Too long.</critique>"]
    assert TASKS[1].prompt[3]["content"] == "Another?"  # the task is not modified
    assert hr.guided_messages(TASKS[1].prompt, []) == [dict(m) for m in TASKS[1].prompt]
    with pytest.raises(ValueError, match="no user message"):
        hr.guided_messages([{"role": "system", "content": "s"}], [("critique", "c")])


def test_render_prompt_exact_text_with_and_without_guidance(tokenizer):
    prompt = TASKS[0].prompt
    assert hr.render_prompt(tokenizer, prompt) == (
        SYSTEM + "<|im_start|>user\nWhy does cellulose make a good filter paper?<|im_end|>\n<|im_start|>assistant\n")
    fields = [("criterion", "Name the reaction."), ("reference", "Periodate oxidation ...")]
    assert hr.render_prompt(tokenizer, prompt, fields) == (
        SYSTEM + "<|im_start|>user\nWhy does cellulose make a good filter paper?\n\n"
        "<criterion>Name the reaction.</criterion>\n<reference>Periodate oxidation ...</reference><|im_end|>\n"
        "<|im_start|>assistant\n")


def test_task_fields_follow_the_harness_rows_and_no_fields_is_the_bare_prompt(tokenizer):
    state = HarnessState.from_tasks(TASKS)
    state = apply(state, [AddField("chat", "critique", "Too long."), AddField("chat", "criterion", "One word.")])
    fields = hr.task_fields(state.guidance, 1)
    assert fields == (("criterion", "One word."), ("critique", "Too long.")) and hr.task_fields(state.guidance, 0) == ()
    chat = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nName a polymer.<|im_end|>\n"
            "<|im_start|>assistant\nCellulose.<|im_end|>\n<|im_start|>user\nAnother?\n\n"
            "<criterion>One word.</criterion>\n<critique>Too long.</critique><|im_end|>\n<|im_start|>assistant\n")
    assert hr.render_prompt(tokenizer, TASKS[1].prompt, fields) == chat
    bare = chat.replace("\n\n<criterion>One word.</criterion>\n<critique>Too long.</critique>", "")
    assert hr.render_prompt(tokenizer, TASKS[1].prompt, ()) == bare
    ids = hr.render_prompt(tokenizer, TASKS[1].prompt, fields, tokenize=True)
    assert ids == tokenizer.encode(chat) and tokenizer.decode(ids, skip_special_tokens=False) == chat


def test_prompt_ids_are_tokenized_once_per_prompt_fields_and_template(tokenizer, monkeypatch):
    """A guided prompt's ids are remembered (the critic's budget check and its resample ask for the same ones), and
    never served for other fields, another prompt or a changed chat template."""
    calls = []
    real = tokenizer.apply_chat_template
    monkeypatch.setattr(tokenizer, "apply_chat_template", lambda *a, **k: calls.append(1) or real(*a, **k))
    fields = (("criterion", "Name the reaction, once per prompt."),)
    first = hr.render_prompt(tokenizer, TASKS[0].prompt, fields, tokenize=True)
    first.append(-1)  # the caller's list is its own
    again = hr.render_prompt(tokenizer, TASKS[0].prompt, list(fields), tokenize=True)
    assert len(calls) == 1 and again == tokenizer.encode(hr.render_prompt(tokenizer, TASKS[0].prompt, fields))
    other_fields = hr.render_prompt(tokenizer, TASKS[0].prompt, (("criterion", "Another one."),), tokenize=True)
    other_prompt = hr.render_prompt(tokenizer, TASKS[1].prompt, fields, tokenize=True)
    assert len(calls) == 4 and len({tuple(again), tuple(other_fields), tuple(other_prompt)}) == 3
    template = tokenizer.chat_template
    monkeypatch.setattr(tokenizer, "chat_template", template.replace("helpful AI assistant", "terse assistant"))
    changed = hr.render_prompt(tokenizer, TASKS[0].prompt, fields, tokenize=True)
    assert tokenizer.decode(changed, skip_special_tokens=False).count("terse assistant") == 1


def test_fields_that_fit_are_kept_verbatim(tokenizer):
    fields = (("criterion", "Name the reaction."), ("reference", "Periodate oxidation ..."))
    n = len(hr.render_prompt(tokenizer, TASKS[0].prompt, fields, tokenize=True))
    assert hr.fit_fields(tokenizer, TASKS[0].prompt, fields, n) == (fields, False)


def test_fields_over_the_budget_are_shortened_reference_first_to_exactly_fit(tokenizer):
    long_ref = " ".join(f"Sentence {i} of an example answer about cellulose fibres." for i in range(40))
    fields = (("criterion", "Name the reaction."), ("reference", long_ref), ("critique", "None said periodate."))
    full = len(hr.render_prompt(tokenizer, TASKS[0].prompt, fields, tokenize=True))
    limit = full - 200
    fitted, shortened = hr.fit_fields(tokenizer, TASKS[0].prompt, fields, limit)
    assert shortened and [n for n, _ in fitted] == ["criterion", "reference", "critique"]
    texts = dict(fitted)
    # Only the reference (which gives away most) is cut, at its start, and marked; the others are untouched.
    assert texts["criterion"] == "Name the reaction." and texts["critique"] == "None said periodate."
    assert texts["reference"].endswith(" ...") and long_ref.startswith(texts["reference"][:-4])
    n = len(hr.render_prompt(tokenizer, TASKS[0].prompt, fitted, tokenize=True))
    assert limit - 20 <= n <= limit  # fits, without throwing away much more than needed
    # Deterministic: the critic and the training rollout see the same prompt.
    assert hr.fit_fields(tokenizer, TASKS[0].prompt, fields, limit) == (fitted, True)


def test_fields_that_cannot_fit_even_cut_are_refused(tokenizer):
    fields = (("criterion", "Name the reaction. " * 30), ("critique", "None said periodate. " * 30))
    bare = len(hr.render_prompt(tokenizer, TASKS[0].prompt, (), tokenize=True))
    assert hr.fit_fields(tokenizer, TASKS[0].prompt, fields, bare + 5) == (None, False)
