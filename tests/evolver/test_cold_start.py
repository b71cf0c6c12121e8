"""The cold start against a NumPy re-derivation: gamma levels as quantiles of discriminative mass, both bands from
null fluctuations and within-group ranges, anchors from repeated gradings, and cold_start.json round trips."""

import json
import math

import numpy as np
import pytest

from harnessrl_jax.evolver import Bands, ColdStart, SeedGroups, derive
from harnessrl_jax.evolver.cold_start import GAMMA_QUANTILES
from harnessrl_jax.harness import HarnessState
from harnessrl_jax.harness.state import GAMMAS
from harnessrl_jax.rubric.schema import Criterion, Task


def seed_tasks(n_tasks=40, k=6, j=8, groups=3, regradings=2, flip=0.05, seed=0):
    """Seed groups with per-criterion pass probabilities drawn per task; regradings flip a few verdicts."""
    rng = np.random.default_rng(seed)
    out = []
    for t in range(n_tasks):
        points = rng.choice([1.0, 2.0, 3.0, 5.0], size=k)
        points[-1] = -2.0  # a pitfall
        p = rng.beta(0.6, 0.6, size=k)
        gs = [(rng.random((k, j)) < p[:, None]).astype(float) for _ in range(groups)]
        regs = [np.where(rng.random((k, j)) < flip, 1 - gs[0], gs[0]) for _ in range(regradings)]
        out.append(SeedGroups(f"task{t}", points, tuple(gs), tuple(regs), tuple(f"task{t}/c{i}" for i in range(k))))
    return out


def mean_reward(points, S):
    r = 100 * (points @ S) / np.clip(points, 0, None).sum()
    return r.mean()


def test_gammas_bands_and_threshold_match_a_numpy_rederivation():
    seeds = seed_tasks()
    cs = derive(seeds)
    # Discriminative mass: the share of criteria with both a pass and a fail in the group, averaged over groups.
    mass = np.array([np.mean([np.mean([(row == 1).any() and (row == 0).any() for row in g]) for g in s.groups])
                     for s in seeds])
    np.testing.assert_allclose([cs.task_mass[s.task_id] for s in seeds], mass)
    np.testing.assert_allclose(cs.gammas, np.quantile(mass, [0.75, 0.5, 0.25]))
    assert cs.gamma_quantiles == GAMMA_QUANTILES == (0.75, 0.5, 0.25) and cs.gammas_source == "quantiles"
    assert cs.task_mass_threshold == pytest.approx(np.median(mass))
    between_groups = [abs(mean_reward(s.points, a) - mean_reward(s.points, b))
                      for s in seeds for i, a in enumerate(s.groups) for b in s.groups[i + 1:]]
    gradings = [[s.groups[0], *s.regradings] for s in seeds]
    between_gradings = [abs(mean_reward(s.points, a) - mean_reward(s.points, b))
                        for s, gr in zip(seeds, gradings) for i, a in enumerate(gr) for b in gr[i + 1:]]
    ranges = [np.ptp(100 * (s.points @ g) / np.clip(s.points, 0, None).sum()) for s in seeds for g in s.groups]
    assert len(between_groups) == 40 * 3 and len(between_gradings) == 40 * 3 and len(ranges) == 120
    assert cs.bands["guidance"] == pytest.approx((np.percentile(between_groups, 95), np.median(ranges)))
    assert cs.bands["rubric"] == pytest.approx((np.percentile(between_gradings, 95), np.median(ranges)))
    # Repeated gradings of the same responses fluctuate less than independent groups: the paper's 3.1 < 10.2.
    assert cs.bands["rubric"][0] < cs.bands["guidance"][0]
    assert set(cs.band_sources.values()) == {"measured"}


def test_the_seed_harness_takes_the_levels_and_anchors():
    seeds = seed_tasks(n_tasks=8)
    cs = derive(seeds)
    tasks = [Task(s.task_id, "t", ({"role": "user", "content": "q"},),
                  tuple(Criterion(cid, f"criterion {cid}", float(p)) for cid, p in zip(s.criterion_ids, s.points)))
             for s in seeds]
    h = HarnessState.from_tasks(tasks, gammas=cs.gammas, anchors=cs.anchors)
    assert h.sampling.gammas == pytest.approx(cs.gammas)
    for s in seeds:
        chosen = cs.anchors[s.task_id]
        positive = [i for i in range(6) if s.points[i] > 0]
        assert len(chosen) <= len(positive) // 2
        assert {c.id for c in h.rubric_of(s.task_id) if c.anchor} == set(chosen)


def test_anchors_are_the_reliably_graded_top_weighted_criteria():
    S = np.array([[1, 0, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1], [0, 1, 0, 1], [1, 0, 0, 1]], float)
    regraded = S.copy()
    regraded[0] = 1 - regraded[0]  # the heaviest criterion is read inconsistently by the judge
    seed = SeedGroups("t", [5, 4, 3, 2, -1], (S,), (regraded,), ("c0", "c1", "c2", "c3", "c4"))
    cs = derive([seed])
    # 4 positive criteria: at most 2 anchors, the top-weighted among those graded the same both times.
    assert cs.anchors == {"t": ["c1", "c2"]}
    assert derive([seed], anchor_agreement=None).anchors is None
    assert derive([SeedGroups("t", [5, 4, 3, 2, -1], (S,))]).anchors is None  # no regrading: the harness decides


def test_unmeasurable_nulls_and_degenerate_quantiles_keep_the_papers_values():
    S = np.ones((3, 8))
    cs = derive([SeedGroups(f"t{i}", [1, 1, 1], (S,)) for i in range(5)])  # one group each, never split
    assert cs.gammas == GAMMAS and cs.gammas_source.startswith("default")
    assert cs.bands == {"guidance": (10.2, 28.0), "rubric": (3.1, 28.0)}
    assert all(v.startswith("default") for v in cs.band_sources.values())


def test_a_null_above_the_typical_range_is_an_error():
    a, b = np.zeros((2, 4)), np.ones((2, 4))  # independent groups at 0 and 100, each with no spread
    with pytest.raises(ValueError, match="lower bound .* exceeds the upper bound"):
        derive([SeedGroups("t", [1, 1], (a, b))])


def test_cold_start_json_round_trips_and_is_read_by_the_critic(tmp_path):
    cs = derive(seed_tasks(n_tasks=10), meta={"seed_model": "tiny", "judge": "rule", "J": 8})
    path = tmp_path / "cold_start.json"
    cs.save(path)
    d = json.loads(path.read_text())
    assert d["format"] == 1 and set(d) >= {"gammas", "gamma_quantiles", "bands", "band_sources", "task_mass",
                                           "task_mass_threshold", "anchors", "stats", "meta", "null_percentile"}
    back = ColdStart.load(path)
    assert back.to_dict() == cs.to_dict()
    assert ColdStart.load(str(path)).to_bands() == cs.to_bands() == Bands(cs.bands["guidance"], cs.bands["rubric"])
    assert d["stats"]["null_between_groups"]["n"] == 30 and math.isclose(
        d["stats"]["null_between_groups"]["p95"], cs.bands["guidance"][0])


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.update(format=2), "format"),
    (lambda d: d.update(gammas=[0.2, 0.5, 0.1]), "gammas"),
    (lambda d: d["bands"].update(rubric=[5, 1]), "low <= high"),
    (lambda d: d.pop("bands"), "bands"),
])
def test_a_bad_cold_start_file_is_an_error_naming_the_file(tmp_path, edit, match):
    d = ColdStart().to_dict()
    edit(d)
    path = tmp_path / "cold_start.json"
    path.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=match) as e:
        ColdStart.load(path)
    assert str(path) in str(e.value)


def test_seed_groups_check_their_shapes():
    with pytest.raises(ValueError, match="expected"):
        SeedGroups("t", [1, 1], (np.ones((3, 4)),))
    with pytest.raises(ValueError, match="regradings"):
        SeedGroups("t", [1, 1], (np.ones((2, 4)),), (np.ones((2, 5)),))


def test_collect_samples_independent_groups_and_regrades_the_first():
    """collect() with a scripted sampler and judge: group g of a batch gets its own seed, the regradings see the
    first group's responses, and each task's matrices come back in order."""
    from harnessrl_jax.evolver.cold_start import collect

    tasks = [Task(f"t{i}", "test", ({"role": "user", "content": "q"},),
                  (Criterion(f"t{i}/a", "has a", 2.0), Criterion(f"t{i}/b", "no b", -1.0))) for i in range(5)]
    seeds_seen, graded = [], []

    def sample(batch, seed):
        seeds_seen.append(seed)
        rng = np.random.default_rng(seed)
        return [[("a" if rng.random() < 0.5 else "") + ("b" if rng.random() < 0.3 else "") for _ in range(4)]
                for _ in batch]

    def score(batch, responses):
        graded.append([list(r) for r in responses])
        return [np.array([[("a" in x) for x in r], [("b" in x) for x in r]], float) for r in responses]

    lines = []
    out = collect(tasks, sample, score, groups=3, regradings=2, batch_tasks=2, seed=5, progress=lines.append)
    assert [s.task_id for s in out] == [t.id for t in tasks]
    assert len(seeds_seen) == 3 * 3 and len(set(seeds_seen)) == 9  # 3 batches x 3 groups, all distinct
    assert len(graded) == 3 * (3 + 2)
    for s in out:
        assert len(s.groups) == 3 and len(s.regradings) == 2 and s.criterion_ids == (f"{s.task_id}/a",
                                                                                      f"{s.task_id}/b")
        np.testing.assert_array_equal(s.regradings[0], s.groups[0])  # a deterministic judge regrades the same
    # the first batch's regradings were given the first group's responses
    assert graded[3] == graded[0] and graded[4] == graded[0]
    assert len(lines) == 3 and lines[-1].startswith("cold start: 5/5 tasks") and "ETA" in lines[-1]
    # a rerun with the same seed measures the same
    again = collect(tasks, sample, score, groups=3, regradings=2, batch_tasks=2, seed=5)
    assert all(np.array_equal(a.groups[2], b.groups[2]) for a, b in zip(out, again))
    with pytest.raises(ValueError, match="groups >= 1"):
        collect(tasks, sample, score, groups=0)


def test_seed_groups_file_round_trips_nan_cells_and_names_a_bad_line(tmp_path):
    from harnessrl_jax.evolver.cold_start import load_seed_groups, save_seed_groups

    seeds = seed_tasks(n_tasks=3, k=4, j=5)
    g = seeds[1].groups[0].copy()
    g[2, 3] = np.nan  # an unparsed verdict
    seeds[1] = SeedGroups(seeds[1].task_id, seeds[1].points, (g, *seeds[1].groups[1:]), seeds[1].regradings,
                          seeds[1].criterion_ids)
    path = tmp_path / "cs.groups.jsonl"
    save_seed_groups(path, seeds)
    back = load_seed_groups(path)
    for a, b in zip(seeds, back):
        assert a.task_id == b.task_id and a.criterion_ids == b.criterion_ids
        np.testing.assert_array_equal(a.points, b.points)
        for x, y in zip(a.groups + a.regradings, b.groups + b.regradings):
            np.testing.assert_array_equal(x, y)  # NaN == NaN here
    assert derive(back).to_dict() == derive(seeds).to_dict()
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"points"', '"pts"')
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"cs\.groups\.jsonl:2: not a seed-group record"):
        load_seed_groups(path)


def test_a_band_the_null_nearly_fills_is_derived_with_a_warning(tmp_path):
    """Two groups whose means differ by 87.5 points while each spans the full 0-100 range: the guidance band is
    [87.5, 100], which the critic could hardly ever hit; the file says so, and a regular cold start says nothing."""
    hi_group = np.array([[1.0] * 15 + [0.0]])
    lo_group = np.array([[0.0] * 15 + [1.0]])
    cs = derive([SeedGroups("t", [1.0], (hi_group, lo_group))], anchor_agreement=None)
    assert cs.bands["guidance"] == pytest.approx((87.5, 100.0))
    assert len(cs.warnings) == 1 and "guidance band [87.5, 100] is narrow" in cs.warnings[0]
    path = tmp_path / "cold_start.json"
    cs.save(path)
    assert ColdStart.load(path).warnings == cs.warnings
    assert derive(seed_tasks()).warnings == ()
