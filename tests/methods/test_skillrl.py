"""SkillRL's skill bank against a NumPy re-derivation of its published rule: retrieval (every general skill, the
K = 6 task-specific skills with cosine >= 0.4), distillation from a group's successes and failures, the skills
block after the prompt, and the bank's evolution."""

import numpy as np
import pytest

from harnessrl_jax import toy
from harnessrl_jax.methods.guidance import PromptBudget
from harnessrl_jax.methods.skillrl import Skill, SkillRLConfig, SkillRLGuidance, retrieve, rule_skills, split_group
from harnessrl_jax.rubric.schema import Criterion, Task


def unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def test_retrieval_takes_every_general_skill_and_the_best_six_specific_ones_over_the_threshold():
    rng = np.random.default_rng(3)
    d = 16
    task = unit(rng.normal(size=d))
    # specific skills with chosen cosines to the task: a unit vector at angle arccos(c) from it
    other = unit(rng.normal(size=d) - task * (rng.normal(size=d) @ task))
    other = unit(other - task * (other @ task))
    cosines = [0.9, 0.41, 0.4, 0.3999, 0.95, 0.7, 0.5, 0.45, 0.2, -0.5, 0.6]
    vecs = [c * task + np.sqrt(1 - c * c) * other for c in cosines]
    general = [False] * len(cosines)
    vecs += [unit(rng.normal(size=d)) for _ in range(2)]  # two general skills, whatever their cosine
    general += [True, True]
    got = retrieve(task, np.stack(vecs), general, top_k=6, min_cosine=0.4)
    cos = np.stack(vecs) @ task
    spec = sorted((i for i in range(len(cosines)) if cos[i] >= 0.4 - 1e-12), key=lambda i: -cos[i])[:6]
    assert got == [11, 12] + spec
    assert 3 not in got and [cosines[i] for i in got[2:]] == [0.95, 0.9, 0.7, 0.6, 0.5, 0.45]
    assert retrieve(task, np.stack(vecs), general, top_k=6, min_cosine=0.99) == [11, 12]


def test_successes_and_failures_are_the_group_quartiles():
    r = [0, 10, 20, 30, 40, 50, 60, 70]
    good, bad = split_group(r, 0.75, 0.25)
    assert good == [j for j in range(8) if r[j] >= np.quantile(r, 0.75)] == [6, 7]
    assert bad == [j for j in range(8) if r[j] <= np.quantile(r, 0.25)] == [0, 1]
    assert split_group([5, 5, 5], 0.75, 0.25) == ([], [])  # no contrast, nothing to learn from


def group_tasks():
    shared = Criterion("x/short", "The response is under 50 words.", 1.0)
    a = Task("a", "med", ({"role": "user", "content": "explain fever"},),
             (Criterion("a/fever", "The response names fever.", 2.0), shared,
              Criterion("a/rude", "The response is rude.", -1.0)))
    b = Task("b", "sci", ({"role": "user", "content": "explain photosynthesis"},),
             (Criterion("b/light", "The response mentions light.", 2.0), shared))
    return a, b


def test_the_rule_teacher_turns_what_successes_achieve_and_failures_miss_into_skills():
    a, b = group_tasks()
    S_a = np.array([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 0]], float)  # fever splits, rude hurts
    S_b = np.array([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 0, 0]], float)
    skills = dict((s.name, (c, s)) for c, s in
                  [(c, s) for c, s in rule_skills([(a, a.criteria, S_a, ["r"] * 6), (b, b.criteria, S_b, ["r"] * 6)],
                                                  success_q=0.75, failure_q=0.25, step=0)])
    assert set(skills) == {"aim for: The response names fever.", "avoid: The response is rude.",
                           "aim for: The response mentions light.", "aim for: The response is under 50 words."}
    # contrast = success rate - failure rate (polarity-aware), re-derived
    r = 100 * (np.array([2, 1, -1]) @ S_a) / 3
    good, bad = split_group(r, 0.75, 0.25)
    met_rude = 1 - S_a[2]
    c, s = skills["avoid: The response is rude."]
    assert c == pytest.approx(met_rude[good].mean() - met_rude[bad].mean()) and s.domain == "med"
    c, s = skills["aim for: The response is under 50 words."]
    assert s.general and s.applicability == "any task"  # its text is in both tasks' rubrics


def test_skills_are_mounted_after_the_prompt_and_the_bank_evolves(tmp_path):
    a, b = group_tasks()
    vec = {"a": [1, 0, 0], "b": [0, 1, 0]}

    def embed(texts):  # tasks and skills: by the domain they talk about
        return np.array([unit(vec["a"] if ("fever" in t or "med" in t) else vec["b"] if ("light" in t or "photo" in t)
                              else [0, 0, 1]) for t in texts], np.float32)

    g = SkillRLGuidance(SkillRLConfig(evolve_every=3), tasks=[a, b], embed=embed)
    S_a = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], float)
    S_b = np.array([[1, 0, 0, 0], [1, 1, 1, 1]], float)
    g.learn(0, [(a, a.criteria, S_a, ["r"] * 4), (b, b.criteria, S_b, ["r"] * 4)])
    names = [s.name for s in g.skills]
    assert "aim for: The response names fever." in names and "aim for: The response mentions light." in names
    budget = PromptBudget(toy.char_tokenizer(), 10_000)
    (p,) = g.prompts(None, [0], [a], step=1, seed=0, budget=budget)
    (m,) = p.messages
    text = m[-1]["content"]
    assert p.guided and text.startswith("explain fever\n\n<skills>\n") and text.endswith("</skills>")
    assert "names fever" in text and "mentions light" not in text  # the other domain's skill is not similar
    # every rollout of the group sees the same prompt: one message list per task
    assert len(p.messages) == 1
    # the bank evolves every E = 3 steps, not in between, for the domains strictly below the median; the state
    # round-trips
    before = len(g.skills)
    S_b2 = np.array([[1, 1, 0, 0], [1, 0, 1, 0]], float)
    g.learn(1, [(b, b.criteria, S_b2, ["r"] * 4)])
    assert len(g.skills) == before and g.metrics()["skillrl/added"] == 0
    g.learn(3, [(b, b.criteria, S_b2, ["r"] * 4)])  # one domain alone is not below its own median
    assert len(g.skills) == before and g.last_evolution == 3 and g.metrics()["skillrl/evolved_domains"] == 0
    S_a2 = np.array([[1, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 0]], float)  # med well above sci
    g.learn(6, [(a, a.criteria, S_a2, ["r"] * 4), (b, b.criteria, S_b2, ["r"] * 4)])
    new = g.skills[before:]
    assert new and {s.domain for s in new} == {"sci"} and g.metrics()["skillrl/evolved_domains"] == 1
    assert g.last_evolution == 6
    h = SkillRLGuidance(SkillRLConfig(evolve_every=3), embed=embed)
    h.load_state_dict(g.state_dict())
    assert h.skills == g.skills and h.last_evolution == 6
    # over the budget: the least similar skills go first, and nothing is mounted if none fits
    tok = toy.char_tokenizer()
    bare = len(tok.apply_chat_template(list(a.prompt), add_generation_prompt=True, tokenize=True))
    (p,) = g.prompts(None, [0], [a], step=1, seed=0, budget=PromptBudget(tok, bare + 5))
    assert p.messages == (tuple(dict(x) for x in a.prompt),) and p.over_budget and not p.guided


def test_skills_have_a_json_form():
    s = Skill("n", "p", "a", None, 3, "llm")
    assert Skill(**s.to_dict()) == s and s.general and s.line() == "- n: p"


def test_the_teacher_is_the_evolver_model_when_there_is_one():
    import json

    from harnessrl_jax.rubric.judges.llm import Completion

    class Client:
        def __init__(self):
            self.prompts = []

        def complete(self, messages, schema, key=None):
            self.prompts.append(messages[0]["content"])
            out = {"skills": [{"name": "define terms", "principle": "Define each term first.",
                               "applicability": "explanations", "general": True},
                              {"name": "name the symptom", "principle": "Say which symptom it is.",
                               "applicability": "medical questions"}]}
            return Completion(json.dumps(out), "ok", "stop", 0.0, False, 1)

    a, b = group_tasks()
    client = Client()
    g = SkillRLGuidance(SkillRLConfig(), tasks=[a, b], client=client, embed=lambda t: np.ones((len(t), 2)) / 2 ** .5)
    S_a = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], float)
    g.learn(0, [(a, a.criteria, S_a, ["good one", "good two", "bad one", "bad two"])])
    (prompt,) = client.prompts  # one call per domain with a contrast
    assert "med tasks" in prompt and "good one" in prompt and "bad two" in prompt
    assert [(s.name, s.domain, s.source) for s in g.skills] == [("define terms", None, "llm"),
                                                                ("name the symptom", "med", "llm")]


def test_a_skill_distilled_again_under_its_name_is_revised_not_duplicated():
    g = SkillRLGuidance(SkillRLConfig(), embed=lambda texts: np.array([unit([len(t), 1.0]) for t in texts]))
    assert g.merge([Skill("cite", "Cite a source.", "claims"), Skill("short", "Be short.", "any")]) == (2, 0)
    assert g.merge([Skill("cite", "Cite a primary source, with its date.", "factual claims")]) == (0, 1)
    assert [s.principle for s in g.skills] == ["Cite a primary source, with its date.", "Be short."]
    np.testing.assert_allclose(g.vectors[0], unit([len("cite. factual claims"), 1.0]), rtol=1e-6)
    assert g.merge([Skill("cite", "Cite a primary source, with its date.", "factual claims")]) == (0, 0)


def test_the_first_bank_comes_from_the_cold_starts_seed_groups_before_step_0(tmp_path, tiny_config):
    from harnessrl_jax.evolver.cold_start import SeedGroups, save_seed_groups
    from harnessrl_jax.methods.parts import PartsContext

    a, b = group_tasks()
    S_a = np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], float)
    path = tmp_path / "cold_start.groups.jsonl"
    save_seed_groups(path, [SeedGroups("a", [c.points for c in a.criteria], (S_a,), (),
                                       tuple(c.id for c in a.criteria), ("g1", "g2", "b1", "b2"))])
    config = tiny_config("method=skillrl")
    g = SkillRLGuidance.build(PartsContext(config, [a, b], None),
                              settings=SkillRLConfig(seed_groups=str(path), embedder="lexical"))
    assert g.last_evolution == 0 and "aim for: The response names fever." in [s.name for s in g.skills]
    # the same bank as distilling those groups at step 0, which is what happens without a cold start
    h = SkillRLGuidance(SkillRLConfig(embedder="lexical"), tasks=[a, b])
    h.learn(0, [(a, a.criteria, S_a, ["g1", "g2", "b1", "b2"])])
    assert h.skills == g.skills
    config.skillrl.seed_groups = str(tmp_path / "missing.jsonl")
    from harnessrl_jax import checks

    assert any(p.startswith("--config.skillrl.seed_groups=") for p in checks.check(config))


def test_an_evolution_rolls_out_the_validation_sample_under_the_bank():
    """At an evolution the frozen policy answers a fixed validation sample of the training tasks in prompts that
    carry the bank, judged under the harness's rubric; its domains strictly below the median get skills."""
    from harnessrl_jax.evolver.critic import CriticHooks
    from harnessrl_jax.harness import HarnessState

    a, b = group_tasks()
    H = HarnessState.from_tasks([a, b])
    g = SkillRLGuidance(SkillRLConfig(evolve_every=2, validation_per_domain=1, embedder="lexical"), tasks=[a, b])
    g.learn(0, [(a, a.criteria, np.array([[1, 1, 0, 0], [1, 1, 1, 1], [0, 0, 0, 0]], float), ["r"] * 4)])
    g.prompts(H, [0], [a], step=0, seed=0, budget=PromptBudget(toy.char_tokenizer(), 10_000))
    seen = []

    def sample(tasks, prompts):
        seen.extend((t.id, p) for t, p in zip(tasks, prompts))
        return [["y"] * 4 for _ in tasks]

    def regrade(items):  # med all met, sci half: sci is below the median of the two domains
        return [np.ones((len(c), 4)) if t.domain == "med" else np.array([[1, 1, 0, 0]] * len(c), float)
                for t, _, c in items]

    hooks = CriticHooks(regrade_batch=regrade, sample_prompts=sample)
    g.observe(2, [], H, None, hooks)
    assert [t for t, _ in seen] == ["a", "b"]  # one validation task per domain
    assert "<skills>" in seen[0][1].messages[0][-1]["content"]  # rolled out under the bank
    assert g.metrics()["skillrl/validation_rollouts"] == 8 and g.metrics()["skillrl/evolved_domains"] == 1
    assert g.last_evolution == 2
