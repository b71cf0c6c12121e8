"""launch/testbed.py end to end on a world file of the documented format other than the shipped one: two arms x two
seeds, the same command as the comparison, its tables printed and its testbed.json complete."""

import json
import os
import subprocess
import sys

import pytest

from harnessrl_jax.data.world import DEFAULT_WORLD, load_world

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow
def test_the_comparison_runs_on_another_world_file(tmp_path):
    # three of the default world's topics under new ids, one spurious criterion paying more: another world
    records = [json.loads(line) for line in open(DEFAULT_WORLD, encoding="utf-8") if line.strip()]
    picked = [r for r in records if r["id"] in ("cats", "ships", "rain")]
    for r in picked:
        r["id"] = f"lab-{r['id']}"
        for c in r["rubrics"] + r["oracle_rubrics"]:
            c["id"] = f"lab-{c['id']}"
            if c.get("planted") == "spurious":
                c["points"] = 4
    world = tmp_path / "lab.jsonl"
    world.write_text("".join(json.dumps(r) + "\n" for r in picked), encoding="utf-8")
    assert len(load_world(str(world)).tasks) == 3

    out = tmp_path / "testbed"
    proc = subprocess.run([sys.executable, os.path.join(REPO, "launch", "testbed.py"), f"--world={world}",
                           f"--out={out}", "--seeds=0,1", "--steps=2", "--arm=grpo", "--arm=harnessrl",
                           "--bootstrap=200"], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads((out / "testbed.json").read_text())
    printed = proc.stdout
    for heading in ("Share of each planted class still failing", "Attributor precision / recall",
                    "Final oracle score", "Expectations"):
        assert heading in printed, printed[-3000:]
    assert summary["world"] == str(world) and set(summary["arms"]) == {"grpo", "harnessrl"}
    assert summary["reference"] == "grpo" and len(summary["expectations"]) > 0
    for arm in ("grpo", "harnessrl"):  # each run trained on the lab world's tasks, its outcome kept for a rerun
        for seed in (0, 1):
            tasks = json.loads((out / f"{arm}-s{seed}" / "config.json").read_text())["tasks"]
            assert tasks["source"] == "world" and tasks["path"] == str(world)
            assert list((out / f"{arm}-s{seed}").glob("*.json"))
