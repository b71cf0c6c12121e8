"""Rendering: mounted guidance fields after the last user message, through the chat template. Expected strings are
written out by hand in SmolLM2's ChatML format (its template adds the default system message when there is none)."""

import jax
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


def test_render_follows_the_harness_rows_and_bare_drops_the_fields(tokenizer):
    state = HarnessState.from_tasks(TASKS)
    state = apply(state, [AddField("chat", "critique", "Too long."), AddField("chat", "criterion", "One word.")])
    guided = hr.render(tokenizer, TASKS, [1, 0, 1], state.guidance)
    chat = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nName a polymer.<|im_end|>\n"
            "<|im_start|>assistant\nCellulose.<|im_end|>\n<|im_start|>user\nAnother?\n\n"
            "<criterion>One word.</criterion>\n<critique>Too long.</critique><|im_end|>\n<|im_start|>assistant\n")
    paper = SYSTEM + ("<|im_start|>user\nWhy does cellulose make a good filter paper?<|im_end|>\n"
                      "<|im_start|>assistant\n")
    assert guided == [chat, paper, chat]
    bare = hr.render_bare(tokenizer, TASKS, [1, 0])
    assert bare[0] == chat.replace("\n\n<criterion>One word.</criterion>\n<critique>Too long.</critique>", "")
    assert bare[1] == paper


def test_render_ids_are_the_tokenized_text_and_indices_may_be_a_jax_array(tokenizer):
    state = apply(HarnessState.from_tasks(TASKS), AddField("paper", "reference", "A good answer ..."))
    idx = jax.numpy.array([0, 1], dtype=jax.numpy.int32)
    texts = hr.render(tokenizer, TASKS, idx, state.guidance)
    ids = hr.render(tokenizer, TASKS, idx, state.guidance, tokenize=True)
    assert ids == [tokenizer.encode(t) for t in texts]
    assert tokenizer.decode(ids[0], skip_special_tokens=False) == texts[0]
    # The guided prompt extends the bare one only inside the user turn: same prefix, longer.
    bare_ids = hr.render_bare(tokenizer, TASKS, idx, tokenize=True)
    assert len(ids[0]) > len(bare_ids[0]) and ids[1] == bare_ids[1]
