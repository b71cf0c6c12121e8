"""Multi-turn episodes on the tiny model: one engine call per turn over every live episode, the tool results as
context only, and the engine's logprobs equal to one forward over the assembled trajectory."""

import jax
import numpy as np

from harnessrl_jax import toy
from harnessrl_jax.agentic.harnesses import HARNESSES
from harnessrl_jax.agentic.rollout import TurnFormat, run_episodes
from harnessrl_jax.agentic.tasks import load_agent_tasks
from harnessrl_jax.models import forward, init_params, preset_config
from harnessrl_jax.rl.batch import build_trajectory_batch, round_up
from harnessrl_jax.rollout import JaxEngine


def test_turn_format_closes_the_turn_once_and_opens_the_next_assistant_turn():
    """A stop token sampled by the policy is not repeated; an unstopped turn gets the template's close."""
    tok = toy.char_tokenizer(toy.AGENT_CHARS)
    fmt = TurnFormat(tok, [tok.eos_id])
    assert (fmt.close, fmt.open_user, fmt.open_assistant) == ("<|end|>", "<|user|>", "<|end|><|assistant|>")
    assert tok.decode(fmt.result_ids("ok", tok.eos_id), skip_special_tokens=False) == "<|user|>ok<|end|><|assistant|>"
    assert tok.decode(fmt.result_ids("ok", 30), skip_special_tokens=False) == "<|end|><|user|>ok<|end|><|assistant|>"


class CountingEngine(JaxEngine):
    calls: list[int]

    def generate(self, prompts, n=1, **kw):
        self.calls.append(len(prompts))
        return super().generate(prompts, n, **kw)


def test_episodes_batch_every_turn_and_their_logprobs_match_one_forward_over_the_trajectory():
    """Catches: an engine call per episode instead of per turn; tool tokens on the loss mask; a policy turn put at
    the wrong offset (its logprobs would then not match the forward at the mask)."""
    tok = toy.char_tokenizer(toy.AGENT_CHARS)
    config = preset_config("tiny").replace(vocab_size=round_up(tok.vocab_size, 16), max_position_embeddings=1024)
    params = init_params(config, jax.random.PRNGKey(0))
    engine = CountingEngine(config, params, tok, prompt_bucket=512)  # one sampler program for every turn
    engine.calls = []
    tasks = load_agent_tasks(split="heldout")[:2]
    hs = [HARNESSES["json_direct"], HARNESSES["cli_plan"]]
    eps = run_episodes(engine, tok, tasks, hs, n=2, max_turns=3, turn_tokens=8, max_prompt=288,
                       max_continuation=200, seed=3)
    assert engine.calls == [4, 4, 4]  # every live episode's next turn in one call (a random policy never says done)
    assert all(len(ep.turns) == 3 and ep.ended == "turns" for ep in eps)
    assert all(sum(lp is None for _, lp in ep.segments) == 3 for ep in eps)  # the opening and two tool results

    batch = build_trajectory_batch([ep.segments for ep in eps], np.ones(4), seq_len=512, pad_id=engine.pad_id)
    # one forward over the assembled rows (causal: the right padding changes nothing before it)
    logp = np.asarray(jax.nn.log_softmax(forward(config, params, batch.tokens), axis=-1))
    for r, ep in enumerate(eps):
        expected_mask = np.zeros(512, bool)
        at = 0
        for ids, lp in ep.segments:
            if lp is not None:
                expected_mask[at - 1:at + len(ids) - 1] = True
            at += len(ids)
        np.testing.assert_array_equal(batch.loss_mask[r], expected_mask)
        assert batch.loss_mask[r].sum() == ep.policy_tokens
        np.testing.assert_array_equal(batch.tokens[r, :len(ep.context)], ep.context)
        pos = np.flatnonzero(batch.loss_mask[r])
        own = logp[r, pos, batch.targets[r, pos]]
        np.testing.assert_allclose(batch.engine_logprobs[r, pos], own, atol=2e-4)


def test_tool_result_tokens_carry_no_loss():
    """A batch builder that put context segments on the mask fails here (exact positions)."""
    segs = [([5, 6, 7], None), ([8, 9], np.array([-1.0, -2.0], np.float32)), ([10, 11, 12], None),
            ([13], np.array([-3.0], np.float32))]
    b = build_trajectory_batch([segs], [0.5], seq_len=16, pad_id=0, num_rows=2)
    assert np.flatnonzero(b.loss_mask[0]).tolist() == [2, 3, 7]  # the positions predicting 8, 9 and 13
    assert b.targets[0, [2, 3, 7]].tolist() == [8, 9, 13]
    assert b.engine_logprobs[0, [2, 3, 7]].tolist() == [-1.0, -2.0, -3.0]
    assert b.attention_mask[0].sum() == 9 and not b.loss_mask[1].any() and b.weights.tolist() == [1.0, 0.0]
