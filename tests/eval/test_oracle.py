"""The pairwise oracle (harnessrl_jax.eval.oracle): the both-order combination by hand, Anthropic's client against
a local stand-in that fails with 429/529/500 and timeouts, the store that makes a second run call nothing, a real
OpenAI-compatible server (llama.cpp serving SmolLM2), and a whole run's groups against a re-derivation of the pair
classes from the recorded rewards and the stand-in's rule."""

import itertools
import json
import os

import numpy as np
import pytest

from anthropic_standin import verdict as standin_verdict
from harnessrl_jax.eval.oracle import PairwiseOracle, make_client, pair_messages, parse_winner
from harnessrl_jax.rubric.schema import Task

TASK = Task("t1", "science", ({"role": "user", "content": "Say q."},), ())


def test_both_orders_combine_into_wins_ties_and_order_inconsistent_ties():
    # pairs (0,1), (0,2), (1,2): each (i first, j first)
    verdicts = ["A", "B",      # 0 wins as first and as second: +1
                "A", "A",      # the first shown wins both times: position bias, counted as a tie
                "B", "A"]      # 2 wins both orders: o_12 = -1
    o = PairwiseOracle.combine(3, verdicts)
    assert o.tolist() == [[0, 1, 0], [-1, 0, -1], [0, 1, 0]]
    assert np.isnan(PairwiseOracle.combine(2, ["A", None])[0, 1])
    # win rate against two anchors: per order 1 / 0.5 / 0
    wr = PairwiseOracle.combine_anchors(1, ["a1", "a2"], ["A", "B", "tie", "tie"])
    assert wr.tolist() == [100 * (1 + 1 + 0.5 + 0.5) / 4]
    assert parse_winner('{"reasoning": "x", "winner": "B"}') == "B" and parse_winner("Winner: tie") == "tie"
    assert parse_winner("both fine") is None


def test_the_oracle_never_sees_the_rubric_and_gets_its_domain_guideline():
    from harnessrl_jax.rubric.schema import Criterion
    task = Task("t2", "medical", ({"role": "user", "content": "My head hurts."},),
                (Criterion("t2/c0", "Mentions SECRET-RUBRIC-TEXT.", 1.0),))
    text = pair_messages(task, "resp one", "resp two")[0]["content"]
    assert "SECRET-RUBRIC-TEXT" not in text and "medically accurate" in text
    assert text.index("resp one") < text.index("resp two")


def test_anthropic_client_through_faults_then_the_store_makes_no_call_twice(standin, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-standin")
    server = standin(faults=[429, 529, 500, "timeout"], slow_s=1.0)
    responses = ["q q", "q", "", "qq BIAS", "BIAS"]
    store = tmp_path / "oracle.sqlite"
    oracle = PairwiseOracle(make_client("anthropic", "standin", base_url=server.url, timeout_s=0.5,
                                        backoff_s=0.01, max_retries=6), store, max_workers=1)
    o = oracle.group_matrix(TASK, responses)
    expect = np.zeros((5, 5))
    for i, j in itertools.combinations(range(5), 2):
        first = standin_verdict(pair_messages(TASK, responses[i], responses[j])[0]["content"])
        second = standin_verdict(pair_messages(TASK, responses[j], responses[i])[0]["content"])
        v = 1 if (first, second) == ("A", "B") else -1 if (first, second) == ("B", "A") else 0
        expect[i, j], expect[j, i] = v, -v
    assert o.tolist() == expect.tolist() and o[3, 4] == 0  # BIAS pair: order-inconsistent -> tie
    rep = oracle.report()
    assert rep["calls"] == 20 and rep["failed"] == 0 and rep["cache_hits"] == 0
    assert len(server.requests) == 24  # 20 calls + the 4 faulted attempts
    assert rep["input_tokens"] == server.usage["input_tokens"] and rep["output_tokens"] == 20 * 7
    assert rep["store"] == {"calls": 20, **server.usage}
    oracle.close()
    again = PairwiseOracle(make_client("anthropic", "standin", base_url=server.url), store)
    assert again.group_matrix(TASK, responses).tolist() == o.tolist()
    assert again.report()["calls"] == 0 and again.report()["cache_hits"] == 20 and len(server.requests) == 24
    again.close()


def test_a_call_that_keeps_failing_is_missing_not_stored_and_retried_next_time(standin, monkeypatch, tmp_path):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-standin")
    server = standin(fail_on="POISON")
    make = lambda: PairwiseOracle(make_client("anthropic", "standin", base_url=server.url, backoff_s=0.01,  # noqa
                                              max_retries=1), tmp_path / "o.sqlite")
    oracle = make()
    o = oracle.group_matrix(TASK, ["q", "POISON", ""])
    assert np.isnan(o[0, 1]) and np.isnan(o[1, 2]) and o[0, 2] == 1
    assert oracle.report()["failed"] == 4 and oracle.report()["store"]["calls"] == 2
    oracle.close()
    server.fail_on = None
    again = make()
    assert again.group_matrix(TASK, ["q", "POISON", ""])[0, 1] == 1 and again.report()["calls"] == 4
    again.close()


@pytest.mark.slow
def test_llama_cpp_server_as_the_oracle(llama_server, tmp_path):
    """SmolLM2 behind llama.cpp's OpenAI-compatible server: every one of the 2 C(3, 2) calls is made and answered
    in the verdict schema, tokens are reported, and a second pass is served from the store."""
    def make():
        return PairwiseOracle(make_client("openai", llama_server.model, base_url=llama_server.base_url,
                                          structured_output="json_object", max_tokens=60, temperature=0.0),
                              tmp_path / "o.sqlite", max_workers=2)
    oracle = make()
    responses = ["The sky is blue because air scatters blue light more.", "Because of the ocean.", "blue"]
    o = oracle.group_matrix(Task("sky", "science", ({"role": "user", "content": "Why is the sky blue?"},), ()),
                            responses)
    rep = oracle.report()
    assert rep["calls"] == 6 and rep["failed"] == 0 and rep["unparsed"] == 0
    assert rep["input_tokens"] > 6 * 150 and rep["output_tokens"] > 0
    assert np.allclose(o, -o.T) and set(np.unique(o)) <= {-1.0, 0.0, 1.0}
    oracle.close()
    again = make()
    assert np.array_equal(again.group_matrix(Task("sky", "science", ({"role": "user", "content":
                                                                      "Why is the sky blue?"},), ()), responses), o)
    assert again.report()["calls"] == 0 and again.report()["cache_hits"] == 6
    again.close()


@pytest.mark.slow
def test_a_runs_groups_give_the_pair_classes_of_their_rewards(analysed_runs):
    """launch/oracle.py on the tiny HarnessRL run: per step, the pair classes equal a re-derivation from the
    recorded rewards and the stand-in's rule; the summary counts every call."""
    from harnessrl_jax.eval.oracle_run import recorded_draws, run_tasks

    run = os.path.join(analysed_runs, "harnessrl-s0")
    lines = [json.loads(line) for line in open(os.path.join(run, "oracle", "oracle.jsonl"))]
    tasks = run_tasks(run)
    by_step = {}
    for d in recorded_draws(run):
        by_step.setdefault(d.step, []).append(d)
    assert [line["step"] for line in lines] == sorted(by_step)
    calls = 0
    for line in lines:
        counts = {"agree": 0, "reward_tie": 0, "wrong_direction": 0, "oracle_tie": 0}
        classes = {"blind": 0, "saturated": 0, "spurious": 0, "agree": 0}
        for d in by_step[line["step"]]:
            r = np.asarray(d.rewards)
            J = len(d.responses)
            calls += J * (J - 1)
            o = {}
            for i, j in itertools.combinations(range(J), 2):
                t = tasks[d.task_id]
                a = standin_verdict(pair_messages(t, d.responses[i], d.responses[j])[0]["content"])
                b = standin_verdict(pair_messages(t, d.responses[j], d.responses[i])[0]["content"])
                o[i, j] = 1 if (a, b) == ("A", "B") else -1 if (a, b) == ("B", "A") else 0
                o[j, i] = -o[i, j]
                dr = np.sign(r[i] - r[j])
                key = "reward_tie" if dr == 0 else "agree" if dr == o[i, j] else "oracle_tie" if o[i, j] == 0 \
                    else "wrong_direction"
                counts[key] += 1
            # each criterion as graded at that step (its recorded points): who achieves it, and the oracle's
            # verdicts on the pairs it separates
            for cid, row in zip(d.criterion_ids, np.asarray(d.scores)):
                pitfall = d.harness["criteria"][cid]["points"] < 0
                met = [k for k in range(J) if row[k] == (0 if pitfall else 1)]
                miss = [k for k in range(J) if row[k] == (1 if pitfall else 0)]
                if not miss:
                    classes["saturated"] += 1
                elif not met:
                    classes["blind"] += 1
                else:
                    classes["agree" if np.mean([o[i, j] for i in met for j in miss]) > 0 else "spurious"] += 1
        n = sum(counts.values())
        for k, v in counts.items():
            assert line[f"oracle/pair_{k}"] == pytest.approx(v / n), (line["step"], k)
        assert line["oracle/agreement"] == pytest.approx(counts["agree"] / n)
        assert {k: line["criteria"][k] for k in classes} == classes, line["step"]
        assert line["taxonomy/frac_agree"] == pytest.approx(classes["agree"] / sum(classes.values()))
        assert 0 <= line["oracle/score_mean"] <= 100 and set(line["oracle/task_scores"]) == \
            {d.task_id for d in by_step[line["step"]]}
    summary = json.load(open(os.path.join(run, "oracle", "summary.json")))
    anchors = json.load(open(os.path.join(run, "oracle", "anchors.json")))
    anchor_calls = sum(len(d.responses) * len(anchors[d.task_id]) * 2 for ds in by_step.values() for d in ds)
    assert summary["cost"]["store"]["calls"] == summary["cost"]["calls"] <= calls + anchor_calls
    assert summary["cost"]["input_tokens"] > 0 and summary["groups"] == sum(map(len, by_step.values()))
