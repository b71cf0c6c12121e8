"""The record store: round trip, atomic steps (also under SIGKILL), the time index, reversals, resume positions."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
import zlib

import numpy as np
import pytest

from harnessrl_jax.memory import ActionRecord, DrawRecord, Memory, RecordStore, harness_changes, undoes
from harnessrl_jax.words import Label

NAN = float("nan")


def record(step, task, scores, *, texts=None, actions=(), harness=None, task_label=None, responses=None):
    s = np.asarray(scores, np.float64)
    k, j = s.shape
    rewards = np.where(np.isnan(s).all(0), NAN, np.nanmean(np.where(np.isnan(s), 0, s), 0) * 100)
    return DrawRecord(step=step, task_id=task, criterion_ids=tuple(f"c{i}" for i in range(k)),
                      criterion_texts=tuple(texts or (f"{task} criterion {i}" for i in range(k))),
                      responses=tuple(responses or (f"{task}@{step} response {jj}" for jj in range(j))), scores=s,
                      rewards=rewards, harness=harness or {"level": 0}, task_label=task_label, actions=tuple(actions))


def same(a: DrawRecord, b: DrawRecord):
    for f in ("step", "task_id", "criterion_ids", "criterion_texts", "responses", "task_label", "actions"):
        assert getattr(a, f) == getattr(b, f), f
    assert dict(a.harness) == dict(b.harness) and dict(a.labels) == dict(b.labels)
    assert dict(a.dynamics) == dict(b.dynamics)
    np.testing.assert_array_equal(a.scores, b.scores)  # NaN == NaN here
    np.testing.assert_array_equal(a.rewards, b.rewards)


@pytest.fixture
def store(tmp_path):
    s = RecordStore(str(tmp_path / RecordStore.FILE))
    yield s
    s.close()


def test_records_round_trip_every_field_including_nan_cells(store):
    act = ActionRecord("rubric", "rewrite", "accepted", label="spurious", criterion_ids=("c1",),
                       evidence_ids=("draw:3", "crit:9"), deltas={"delta_c": 4.5}, round=2, reason="in band",
                       changes={"rubric.c1.text": ["old", "new"]}, payload={"op": "rewrite", "text": "new"})
    r = DrawRecord(
        step=7, task_id="t/1", criterion_ids=("c0", "c1"), criterion_texts=("Names the reaction", "Uses β-glucose"),
        responses=("ünïcode\nresponse", ""), scores=np.array([[1, NAN], [0, 1]]), rewards=np.array([50.0, NAN]),
        harness={"level": np.int64(2), "guidance": {"criterion": "x"}, "weights": np.array([1.0, 2.0])},
        labels={"c0": "agree", "c1": "spurious"}, task_label="saturated", actions=(act,),
        dynamics={"u": np.float32(0.5), "advantage_std": 0.25})
    store.append_step(7, [r])
    (back,) = store.history("t/1")
    expected = DrawRecord(**{**r.__dict__, "harness": {"level": 2, "guidance": {"criterion": "x"},
                                                        "weights": [1.0, 2.0]}, "dynamics": {"u": 0.5,
                                                                                           "advantage_std": 0.25}})
    same(back, expected)
    assert back.draw_id is not None and store.record(back.draw_id).responses == r.responses


def test_append_step_rejects_bad_records_and_steps_that_do_not_advance(store):
    with pytest.raises(ValueError, match="scores shape"):
        store.append_step(1, [DrawRecord(1, "a", ("c0",), ("t",), ("r0", "r1"), np.zeros((1, 3)), np.zeros(2))])
    with pytest.raises(ValueError, match="scores must be 0, 1 or NaN"):
        store.append_step(1, [record(1, "a", [[0.5, 1]])])
    with pytest.raises(ValueError, match="has step 2"):
        store.append_step(1, [record(2, "a", [[1, 1]])])
    store.append_step(1, [record(1, "a", [[1, 1]])])
    with pytest.raises(ValueError, match="not after the last committed step 1"):
        store.append_step(1, [record(1, "b", [[1, 1]])])


def test_a_step_that_fails_midway_leaves_no_trace(store, monkeypatch):
    store.append_step(1, [record(1, "a", [[1, 0]])])
    calls = []
    original = RecordStore._insert_draw

    def fail_on_second(self, r):
        calls.append(r.task_id)
        if len(calls) == 2:
            raise RuntimeError("disk full")
        return original(self, r)

    monkeypatch.setattr(RecordStore, "_insert_draw", fail_on_second)
    with pytest.raises(RuntimeError, match="disk full"):
        store.append_step(2, [record(2, "a", [[1, 1]]), record(2, "b", [[0, 0]])])
    assert store.last_step == 1 and [r.step for r in store.history("a")] == [1] and store.history("b") == []
    assert store.positions() == {"schema": 2, "step": 1, "draws": 1, "criteria": 1}


CHILD = textwrap.dedent("""
    import sys, time
    import numpy as np
    from harnessrl_jax.memory.store import RecordStore, DrawRecord
    path, mode = sys.argv[1], sys.argv[2]
    store = RecordStore(path)

    def rec(step, task):
        return DrawRecord(step, task, ("c0", "c1"), (task + " a", task + " b"), ("x" * 2000,) * 8,
                          np.ones((2, 8)), np.full(8, 100.0))

    if mode == "hook":
        for step in range(3):
            store.append_step(step, [rec(step, f"t{i}") for i in range(4)])
        original = RecordStore._insert_draw
        n = [0]
        def stall(self, r):
            out = original(self, r)
            n[0] += 1
            if n[0] == 2:  # two of this step's four draws are written, the transaction is open
                print("mid-step", flush=True)
                time.sleep(600)
            return out
        RecordStore._insert_draw = stall
        store.append_step(3, [rec(3, f"t{i}") for i in range(4)])
    else:
        step = 0
        print("started", flush=True)
        while True:
            store.append_step(step, [rec(step, f"t{i}") for i in range(16)])
            step += 1
""")


def _child(tmp_path, mode):
    path = str(tmp_path / RecordStore.FILE)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return path, subprocess.Popen([sys.executable, str(script), path, mode], stdout=subprocess.PIPE, text=True,
                                  cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


def test_sigkill_mid_step_keeps_earlier_steps_and_drops_the_partial_one(tmp_path):
    path, proc = _child(tmp_path, "hook")
    try:
        assert proc.stdout.readline().strip() == "mid-step"
        # The uncommitted draws are already in the WAL file: a kill now is a kill mid-write.
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    store = RecordStore(path)
    assert store.last_step == 2 and store.positions()["draws"] == 12
    assert [r.step for r in store.history("t0")] == [2, 1, 0] and store.history("t3", limit=1)[0].step == 2
    assert store.db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    store.append_step(3, [record(3, "t0", [[1, 1]])])  # the run continues where it stopped
    assert store.last_step == 3


@pytest.mark.parametrize("delay", [0.4, 0.9, 1.7])
def test_sigkill_at_any_moment_leaves_only_whole_steps(tmp_path, delay):
    path, proc = _child(tmp_path, "loop")
    try:
        assert proc.stdout.readline().strip() == "started"
        time.sleep(delay)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(30)
    db = sqlite3.connect(path)
    steps = [s for (s,) in db.execute("SELECT step FROM steps ORDER BY step")]
    per_step = dict(db.execute("SELECT step, count(*) FROM draws GROUP BY step"))
    assert steps and steps == list(range(len(steps)))
    assert per_step == {s: 16 for s in steps}  # no draws of an uncommitted step
    assert db.execute("SELECT count(*) FROM outcomes").fetchone()[0] == 32 * len(steps)


def test_history_is_newest_first_and_filters_by_step_and_limit(store):
    for step in range(1, 6):
        # Task "a" is drawn twice at step 3: both draws are kept, the later one first.
        recs = [record(step, "a", [[step % 2, 1]]), record(step, "b", [[0, 0]])]
        if step == 3:
            recs.append(record(step, "a", [[1, 1]], responses=("second draw", "second draw")))
        store.append_step(step, recs)
    assert [r.step for r in store.history("a")] == [5, 4, 3, 3, 2, 1]
    assert store.history("a")[2].responses == ("second draw",) * 2
    assert [r.step for r in store.history("a", before_step=4)] == [3, 3, 2, 1]
    assert [r.step for r in store.history("a", before_step=4, limit=2)] == [3, 3]
    assert store.history("a", before_step=1) == [] and store.history("nobody") == []


def test_ever_met_pass_rates_and_reward_trajectory_match_hand_counts(store):
    recs = [record(1, "a", [[0, 0, 0, 0], [1, 1, 0, 0]]), record(2, "a", [[0, NAN, 0, 0], [1, 1, 1, 1]]),
            record(3, "a", [[1, 0, 0, 0], [1, 1, 1, 1]])]
    for r in recs:
        store.append_step(r.step, [r])
    assert not store.ever_met("a", "c0", before_step=3) and store.ever_met("a", "c0")
    assert store.met_criteria("a", before_step=2) == {"c1"} and store.met_criteria("a") == {"c0", "c1"}
    assert store.ever_met("a", "c0", text="a criterion 0") and not store.ever_met("a", "c0", text="other wording")
    rates = store.pass_rates("a")
    np.testing.assert_allclose(rates["c0"], [0.25, 0.0, 0.0])  # NaN cells are not counted as failures
    np.testing.assert_allclose(rates["c1"], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(store.pass_rates("a", before_step=3, last=1)["c1"], [1.0])
    traj = store.reward_trajectory("a")
    np.testing.assert_allclose(traj[:, 0], [1, 2, 3])
    np.testing.assert_allclose(traj[:, 1], [25.0, 50.0, 62.5])
    store.append_step(4, [DrawRecord(4, "a", (), (), ("r",), np.zeros((0, 1)), np.array([NAN]))])
    assert np.isnan(store.reward_trajectory("a")[-1, 1])  # every reward failed: no mean, not 0


def test_rewritten_criterion_gets_a_new_row_and_keeps_its_own_evidence(store):
    store.append_step(1, [record(1, "a", [[1, 0]], texts=["Mentions cellulose"])])
    store.append_step(2, [record(2, "a", [[0, 0]], texts=["Explains why cellulose is insoluble"])])
    rows = store.criterion_rows()
    assert [(t, c, x) for _, t, c, x in rows] == [("a", "c0", "Mentions cellulose"),
                                                  ("a", "c0", "Explains why cellulose is insoluble")]
    met, failed = store.examples(rows[0][0])
    assert [(e[1], e[2]) for e in met] == [(1, 0)] and [(e[1], e[2]) for e in failed] == [(1, 1)]
    met, failed = store.examples(rows[1][0])
    assert met == [] and [(e[1], e[2]) for e in failed] == [(2, 0), (2, 1)]


def test_examples_are_oriented_by_the_criterions_sign_in_the_draw(store):
    """For a pitfall the example that achieves it is a response that avoids it (S = 0): donors, the hacking
    signals' positives and the proposers' <reference> fields all read examples this way."""
    harness = {"level": 0, "criteria": {"c0": {"text": "Mentions cost", "points": 2.0},
                                        "c1": {"text": "Recommends an unsafe dose", "points": -3.0}}}
    store.append_step(1, [record(1, "a", [[1, 0, 1], [1, 0, 0]], texts=["Mentions cost", "Recommends an unsafe dose"],
                                 harness=harness)])
    (req, _, _, _), (pit, _, _, _) = store.criterion_rows()
    achieved, missed = store.examples(req)
    assert [e[2] for e in achieved] == [0, 2] and [e[2] for e in missed] == [1]  # a requirement: met
    achieved, missed = store.examples(pit)
    assert [e[2] for e in achieved] == [1, 2] and [e[2] for e in missed] == [0]  # a pitfall: avoided


def _act(verdict, target, before, after, op="add_field"):
    return ActionRecord("guidance", op, verdict, label="blind", changes={target: [before, after]})


def test_undo_means_every_changed_target_returns_to_its_earlier_value():
    add = _act("accepted", "guidance.criterion", None, "Name the reaction")
    assert undoes(_act("accepted", "guidance.criterion", "Name the reaction", None, "drop_field"), add)
    assert not undoes(_act("accepted", "guidance.criterion", "Name the reaction", "other", "add_field"), add)
    assert not undoes(_act("accepted", "guidance.reference", "x", None, "drop_field"), add)
    merge = ActionRecord("rubric", "merge", "accepted", changes={"c1": ["a", None], "c2": ["b", None],
                                                                 "c3": [None, "ab"]})
    split = ActionRecord("rubric", "split", "accepted", changes={"c3": ["ab", None], "c1": [None, "a"],
                                                                 "c2": [None, "b"]})
    assert undoes(split, merge) and not undoes(merge, ActionRecord("rubric", "noop", "noop"))


def test_harness_changes_flattens_nested_slices():
    before = {"level": 0, "guidance": {"criterion": None}, "criteria": {"c1": {"text": "a", "points": 1.0}}}
    after = {"level": 1, "guidance": {"criterion": "hint"}, "criteria": {"c1": {"text": "a", "points": 2.0}}}
    assert harness_changes(before, after) == {"level": [0, 1], "guidance.criterion": [None, "hint"],
                                              "criteria.c1.points": [1.0, 2.0]}
    assert harness_changes(before, before) == {}


def _changes_as_stored(before, after, prefix=""):
    """harness_changes by its definition: each leaf that is not a scalar compared after a JSON round trip."""
    out = {}
    for key in sorted(set(before) | set(after), key=str):
        b, a = before.get(key), after.get(key)
        if isinstance(b, dict) and isinstance(a, dict):
            out.update(_changes_as_stored(b, a, f"{prefix}{key}."))
        elif type(b) in (str, int, float, bool, type(None)) and type(a) in (str, int, float, bool, type(None)):
            if b != a:
                out[f"{prefix}{key}"] = [b, a]
        elif json.loads(json.dumps(b, default=list)) != json.loads(json.dumps(a, default=list)):
            out[f"{prefix}{key}"] = [json.loads(json.dumps(b, default=list)), json.loads(json.dumps(a, default=list))]
    return out


def test_harness_changes_compare_leaves_as_they_are_stored():
    """Against a JSON round trip of every non-scalar leaf: catches lists of strings (tags) compared otherwise than
    as stored (a tuple against the same list, a string enum against its value) or stored as tuples."""
    rng = np.random.default_rng(0)
    values = [None, "a", 1, 2.0, ["x", "y"], ("x", "y"), ["y", "x"], [], (), [Label.BLIND], ["blind"], ("blind",),
              [1, "x"], {"k": ["x"]}, {"k": ("x",)}, np.float64(2.0), ["x", None]]
    for _ in range(3000):
        before = {f"f{i}": values[rng.integers(len(values))] for i in range(3)}
        after = {f"f{i}": values[rng.integers(len(values))] for i in range(3)}
        got = harness_changes(before, after)
        assert got == _changes_as_stored(before, after), (before, after)
        assert all(type(x) is not tuple for pair in got.values() for x in pair), got


def test_reversals_count_undos_within_two_draws_of_the_task(store):
    down = _act("accepted", "level", 0, 1, "downweight")
    restore = _act("accepted", "level", 1, 0, "restore")
    rejected_restore = _act("rejected", "level", 1, 0, "restore")
    # Task a: downweight at its 1st draw, restored at its 3rd draw (2 draws later): a reversal.
    # Task b: downweight at its 1st draw, restored at its 4th draw: too late to count. Rejected undos never count.
    plan = {1: {"a": [down], "b": [down]}, 2: {"a": [rejected_restore], "b": []}, 3: {"a": [restore], "b": []},
            4: {"b": [restore]}}
    for step, per_task in plan.items():
        store.append_step(step, [record(step, t, [[1, 0]], actions=acts) for t, acts in per_task.items()])
        fresh = RecordStore(store.path)  # a full pass; `store` reads again only the tasks each step drew
        assert store.reversals() == fresh.reversals()
        fresh.close()
    assert store.reversals() == (1, 4)  # 4 accepted, one of them undone in time
    assert store.reversals(since_step=3) == (0, 2)
    # The proposer's check: at step 3, restoring task a would undo step 1's downweight (1 and 2 are its last 2 draws).
    assert store.would_reverse("a", restore, before_step=3) == (1, down)
    assert store.would_reverse("b", restore, before_step=5) is None  # b's last two draws are steps 3 and 4
    assert [(s, a.op) for s, _, a in store.actions("a", verdict="accepted")] == [(3, "restore"), (1, "downweight")]
    # updates: newest first, an accepted one undone by a later accepted one; `limit` keeps the newest (a limit
    # applied before the newest-first order would list step 1's downweight, undone, instead)
    full = [(u.step, u.record.op, u.undone) for u in store.updates("a")]
    assert full == [(3, "restore", False), (2, "restore", False), (1, "downweight", True)]
    assert [(u.step, u.record.op, u.undone) for u in store.updates("a", limit=2)] == full[:2]


def test_reversal_windows_agree_with_a_pure_python_count_over_each_tasks_draws(store):
    # Three tasks drawn at random steps; at a draw a task's level may be changed (accepted or rejected), often back
    # to the value it had. Re-derived here from the plan alone: an accepted change is reversed when an accepted
    # change at one of the task's next two draws sets the level back to its value before; it belongs to the window
    # of its own step, wherever the undo falls.
    rng = np.random.default_rng(3)
    level = {t: 0 for t in "abc"}
    draws = {t: [] for t in "abc"}  # per task, in order: (step, [(verdict, before, after)])
    for step in range(28):
        recs = []
        for t in "abc":
            if rng.random() < 0.35:
                continue
            acts = []
            if rng.random() < 0.7:
                before = level[t]
                after = int(rng.integers(0, 3)) if rng.random() < 0.5 else before - 1 if before else before + 1
                if after != before:
                    verdict = "accepted" if rng.random() < 0.8 else "rejected"
                    acts.append((verdict, before, after))
                    level[t] = after if verdict == "accepted" else before
            draws[t].append((step, acts))
            recs.append(record(step, t, [[1, 0]], actions=[_act(v, "level", b, a, "reweight") for v, b, a in acts]))
        store.append_step(step, recs)
    flags = []  # (step, reversed, later draws up to 2) per accepted change
    for seq in draws.values():
        for p, (step, acts) in enumerate(seq):
            for verdict, before, _ in acts:
                if verdict != "accepted":
                    continue
                later = [x for _, xs in seq[p + 1:p + 3] for x in xs if x[0] == "accepted"]
                flags.append((step, any(after == before for _, _, after in later), min(len(seq) - 1 - p, 2)))
    assert len(flags) > 20 and 0 < sum(r for _, r, _ in flags) < len(flags)  # the plan has both kinds
    got = store.reversal_windows(window=5)
    assert [w["window"] for w in got["windows"]] == ["0-4", "5-9", "10-14", "15-19", "20-24", "25-29"]
    for w in got["windows"]:
        mine = [f for f in flags if f[0] // 5 == w["start"] // 5]
        n, r = len(mine), sum(x for _, x, _ in mine)
        assert (w["accepted"], w["reversed"], w["open"]) == (n, r, sum(k < 2 for *_, k in mine))
        assert w["rate"] == pytest.approx(r / n) if n else np.isnan(w["rate"])
    n, r = len(flags), sum(x for _, x, _ in flags)
    assert (got["accepted"], got["reversed"], got["rate"]) == (n, r, pytest.approx(r / n))
    assert store.reversals() == (r, n)  # the run total is the windows' sum


def test_reversal_windows_of_an_empty_store_and_of_a_window_without_updates(store):
    empty = store.reversal_windows()
    assert empty["windows"] == [] and empty["accepted"] == 0 and np.isnan(empty["rate"])
    store.append_step(3, [record(3, "a", [[1, 0]], actions=[_act("accepted", "level", 0, 1, "downweight")])])
    store.append_step(12, [record(12, "a", [[1, 0]])])
    got = store.reversal_windows(window=5)
    assert [(w["window"], w["accepted"], w["open"]) for w in got["windows"]] == [("0-4", 1, 1), ("5-9", 0, 0),
                                                                                ("10-14", 0, 0)]
    assert got["windows"][0]["rate"] == 0.0 and np.isnan(got["windows"][1]["rate"])


def test_truncate_after_resume_step_drops_later_steps_and_their_criteria(store):
    store.append_step(1, [record(1, "a", [[1, 0]])])
    store.append_step(2, [record(2, "a", [[1, 1]], texts=["new wording"]), record(2, "b", [[0, 1]])])
    assert store.positions() == {"schema": 2, "step": 2, "draws": 3, "criteria": 3}
    assert store.truncate_after(1) == 2  # draws dropped
    assert store.positions() == {"schema": 2, "step": 1, "draws": 1, "criteria": 1}
    assert [r.step for r in store.history("a")] == [1] and store.pass_rates("b") == {}
    assert [t for _, _, _, t in store.criterion_rows()] == ["a criterion 0"]
    # the dropped draws' responses go too: a step written after the resume reuses their ids
    store.append_step(2, [record(2, "b", [[0, 1]], responses=["again 0", "again 1"])])
    assert store.history("b")[0].responses == ("again 0", "again 1")


def test_memory_open_at_checkpoint_positions_is_exact_and_refuses_a_foreign_memory(tmp_path):
    mem = Memory.open(str(tmp_path), embedder=None)
    mem.append_step(0, [record(0, "a", [[1, 0]])])
    pos = mem.save()
    mem.append_step(1, [record(1, "a", [[1, 1]])])
    mem.close()
    mem = Memory.open(str(tmp_path), embedder=None, positions=pos)
    assert mem.positions() == pos and [r.step for r in mem.history("a")] == [0]
    mem.append_step(1, [record(1, "a", [[0, 0]])])  # resumed step 1 replaces the lost one
    assert mem.history("a")[0].scores.tolist() == [[0, 0]]
    mem.close()
    with pytest.raises(ValueError, match="not this run's memory"):
        Memory.open(str(tmp_path), embedder=None, positions={"step": 1, "draws": 5})


def test_save_into_another_directory_writes_a_complete_copy(tmp_path):
    mem = Memory.open(str(tmp_path / "run"), embedder=None)
    mem.append_step(0, [record(0, "a", [[1, 0]]), record(0, "b", [[1, 1]])])
    pos = mem.save(str(tmp_path / "ckpt"))
    mem.append_step(1, [record(1, "a", [[0, 0]])])
    copy = Memory.open(str(tmp_path / "ckpt"), embedder=None)
    assert copy.positions() == pos and [r.step for r in copy.history("a")] == [0]
    same(copy.history("b")[0], mem.history("b")[0])


def test_schema_version_is_checked(tmp_path):
    path = str(tmp_path / "m.sqlite")
    RecordStore(path).close()
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version=99")
    db.close()
    with pytest.raises(RuntimeError, match="schema version 99"):
        RecordStore(path)
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_the_time_index_reads_a_draws_responses_only_when_one_is_used(store):
    """History and examples decode a draw's scores without its responses (a paper-length draw is mostly
    responses), and read them at the first access: a history that decoded them eagerly raises here."""
    store.append_step(0, [record(0, "a", [[1, 0]])])
    store.db.execute("UPDATE responses SET texts = x'00'")  # unreadable if it were decoded
    (r,) = store.history("a")
    np.testing.assert_array_equal(r.scores, [[1, 0]])
    assert len(r.responses) == 2
    (row,) = [row for row, task, cid, _ in store.criterion_rows() if (task, cid) == ("a", "c0")]
    with pytest.raises(zlib.error):
        store.examples(row)  # takes a response: only now is the column read
    with pytest.raises(zlib.error):
        r.responses[0]


def test_examples_are_the_newest_by_step_after_a_truncation_and_resume(store):
    """Against the draws' (step, id) order: catches examples read in an order that is not newest first once a
    resume has truncated steps and appended new ones (ids reused or out of step order)."""
    for step in range(1, 6):
        store.append_step(step, [record(step, "a", [[1, 0]]), record(step, "b", [[0, 1]])])
    store.truncate_after(3)
    for step in range(4, 7):
        store.append_step(step, [record(step, "b", [[1, 1]]), record(step, "a", [[0, 1]])])
    row = next(r for r, t, _, _ in store.criterion_rows() if t == "a")
    draws = sorted((d.step, d.draw_id, d.scores[0]) for d in store.history("a"))[::-1]
    want_met = [(d, s, j) for s, d, sc in draws for j in range(2) if sc[j] == 1][:2]
    want_missed = [(d, s, j) for s, d, sc in draws for j in range(2) if sc[j] == 0][:2]
    met, missed = store.examples(row)
    assert [e[:3] for e in met] == want_met and [e[:3] for e in missed] == want_missed
    assert all(e[3] == store.record(e[0]).responses[e[2]] for e in met + missed)
