"""CoCA's rewrite audit: the valid rewrites of a coca.jsonl, the auditor's prompt per direction and polarity, and
IPR / DDA as the yes-rates over the answered rewrites (the auditor through the judge protocol, canned answers)."""

import json

import numpy as np

from harnessrl_jax.eval import coca_audit
from harnessrl_jax.rubric.judges.llm import Completion


class Auditor:
    def __init__(self):
        self.prompts = []

    def complete(self, messages, schema, key=None):
        text = messages[0]["content"]
        self.prompts.append(text)
        if "Rewrite: broken" in text:
            return Completion("no json here", "ok", "stop", 0.0, False, 1)
        same = "Rewrite: an unrelated" not in text
        ok = "Rewrite: easier words" not in text
        return Completion(json.dumps({"same_target": same, "direction_ok": ok}), "ok", "stop", 0.0, False, 1)


def test_audit_rates(tmp_path):
    lines = [{"step": 0, "task_id": "t", "rewrites": [
        {"id": "a", "direction": "strengthen", "old": "Mentions screening.", "new": "Mentions repeat screening.",
         "valid": True, "outcome": "ok", "points": 2.0},
        {"id": "b", "direction": "weaken", "old": "Is rude.", "new": "Is openly rude.", "valid": True,
         "outcome": "ok", "points": -1.0},
        {"id": "c", "direction": "weaken", "old": "x", "new": "x", "valid": False, "outcome": "failed",
         "points": 1.0}]},
        {"step": 1, "task_id": "t", "rewrites": [
            {"id": "d", "direction": "strengthen", "old": "Says hi.", "new": "an unrelated demand", "valid": True,
             "outcome": "ok", "points": 1.0},
            {"id": "e", "direction": "strengthen", "old": "Says hi.", "new": "easier words", "valid": True,
             "outcome": "ok", "points": 1.0},
            {"id": "f", "direction": "strengthen", "old": "Says hi.", "new": "broken", "valid": True,
             "outcome": "ok", "points": 1.0}]}]
    path = tmp_path / "coca.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    rewrites = coca_audit.valid_rewrites(str(path))
    assert [r["id"] for r in rewrites] == ["a", "b", "d", "e", "f"]
    auditor = Auditor()
    out = coca_audit.audit(rewrites, auditor)
    assert (out["asked"], out["answered"]) == (5, 4)  # "broken" got no parseable answer
    np.testing.assert_allclose([out["ipr"], out["dda"]], [3 / 4, 3 / 4])
    pitfall = next(p for p in auditor.prompts if "Is openly rude" in p)
    assert "easier" in pitfall and "pitfall" in pitfall and "committed less often" in pitfall
    assert "harder" in next(p for p in auditor.prompts if "repeat screening" in p)
    assert len(coca_audit.audit(rewrites, Auditor(), sample=2, seed=1)["rewrites"]) == 2
