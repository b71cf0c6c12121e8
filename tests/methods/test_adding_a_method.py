"""docs/design.md's worked example of adding a method, run as written: its code block becomes a module outside the
package, named by module path in the config, and one step of it trains through launch/train.py."""

import json
import os
import re
import subprocess
import sys

import pytest

from harnessrl_jax import checks, methods, settings
from harnessrl_jax.methods.parts import MethodParts, PartsContext

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture()
def my_lab(tmp_path, monkeypatch):
    """The example's code block as my_lab/brief.py under tmp_path, importable."""
    text = open(os.path.join(REPO, "docs", "design.md"), encoding="utf-8").read()
    section = text[text.index("## Adding a method"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    package = tmp_path / "my_lab"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "brief.py").write_text(code)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_the_documented_method_trains_one_step_through_the_launch_script(my_lab, tmp_path):
    workdir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(my_lab), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, os.path.join(REPO, "launch", "train.py"),
                           "--config=experiments/tiny_cpu.py:method=my_lab.brief", "--config.total_steps=1",
                           "--config.report=False", f"--workdir={workdir}"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (metrics,) = [json.loads(line) for line in open(workdir / "metrics.jsonl")]
    config = json.load(open(workdir / "config.json"))
    assert config["method"] == "my_lab.brief"
    # the writer's prompts reached the engine: every drawn task was sampled under its system turn
    assert metrics["brief/prompted_tasks"] == metrics["guidance/guided_groups"] == config["tasks_per_step"]


def test_the_documented_method_is_described_and_checked_like_a_registered_one(my_lab):
    config = settings.load(os.path.join(REPO, "experiments", "tiny_cpu.py") + ":method=my_lab.brief")
    assert checks.check(config) == []
    method = methods.describe(config)
    assert method.name == "brief" and method.mounts_guidance and method.frozen
    parts = MethodParts(method, PartsContext(config, [], method))
    assert parts.prompts.instruction == "Answer in one short sentence."
    with config.unlocked():
        config.brief = {"instruction": " "}
    assert checks.check(config) == ["--config.brief.instruction is empty"]
    with config.unlocked():
        config.brief = {"instruction": "x" * 10_000}
    assert checks.check(config) == ["--config.brief.instruction: longer than --config.harness.max_guidance_tokens "
                                    "allows"]
    config.method = "my_lab.no_such_module"
    assert checks.check(config)[0].startswith("--config.method='my_lab.no_such_module': cannot import")
