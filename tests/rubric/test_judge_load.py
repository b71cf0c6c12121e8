"""The HTTP judge under load: a group scored against a slow stand-in server with bounded concurrency, no cell lost
or mixed up, no prompt asked twice, and the cache answering the rerun (launch/bench_judge.py measures the time)."""

import numpy as np

from harnessrl_jax.rubric.judges import OpenAIJudge
from harnessrl_jax.rubric.judges.standin import StandInServer, standin_verdict
from harnessrl_jax.rubric.schema import Criterion, Task

WORDS = ("river", "stone", "light", "garden", "engine", "harbor", "winter", "signal")


def group(n_tasks=32, n_responses=8, seed=0):
    rng = np.random.default_rng(seed)
    tasks, responses = [], []
    for i in range(n_tasks):
        crits = tuple(Criterion(f"l{i}/{k}", f"The response mentions '{WORDS[rng.integers(8)]}'.", 1.0)
                      for k in range(2))
        tasks.append(Task(f"l{i}", "load", ({"role": "user", "content": f"line {i}"},), crits))
        rs = [" ".join(WORDS[j] for j in rng.integers(0, 8, rng.integers(2, 6))) for _ in range(n_responses)]
        rs[-1] = rs[0]  # a policy repeating itself: one call for both
        responses.append(rs)
    return tasks, responses


def test_a_group_under_bounded_concurrency_loses_and_repeats_no_cell_and_the_rerun_is_cached(tmp_path):
    tasks, responses = group()
    reference = [np.array([[float(standin_verdict(c.text, r)) for r in rs] for c in t.criteria])
                 for t, rs in zip(tasks, responses)]
    # the judge asks each distinct prompt once: per task, distinct (criterion wording, response) pairs
    distinct = sum(len({(c.text, r) for c in t.criteria for r in rs}) for t, rs in zip(tasks, responses))
    cache = str(tmp_path / "cache.sqlite")
    with StandInServer(latency_s=0.01) as server:
        with OpenAIJudge(server.base_url, "standin", max_concurrency=12, cache=cache, max_retries=0) as judge:
            mats = judge.score_batch(tasks, responses)
        assert server.max_inflight <= 12
        assert server.requests == distinct and set(server.by_prompt.values()) == {1}  # each prompt asked once
        for m, ref, t in zip(mats, reference, tasks):
            assert m.criterion_ids == tuple(c.id for c in t.criteria) and (m.status == "ok").all()
            np.testing.assert_array_equal(m.verdicts, ref)  # every cell where it belongs
        with OpenAIJudge(server.base_url, "standin", max_concurrency=12, cache=cache) as judge:
            again = judge.score_batch(tasks, responses)
        assert server.requests == distinct  # the rerun asked nothing
    for m, first in zip(again, mats):
        assert m.cache_hit.all()
        np.testing.assert_array_equal(m.verdicts, first.verdicts)
