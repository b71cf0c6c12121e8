"""Shared fixtures. XLA_FLAGS must be set before jax is first imported: 8 fake CPU devices for sharding tests, and
the launch scripts' own XLA flags (`_xla_flags`).

Compiled programs are cached on disk (JAX's persistent compilation cache, in the launch scripts' directory, inherited
by the launch scripts the tests start as subprocesses), so a shape compiled once is not compiled again by a later
test, a later session or another clone on the same machine.

`sglang_server`: the real SGLang server (third_party/sglang/cpu_server.py, in the environment `make sglang-env`
builds) serving SmolLM2 as this project exports it, started once per session by the first test that asks for it.

`llama_server`: a real OpenAI-compatible server (llama.cpp through llama-cpp-python serving the SmolLM2 GGUF) for
the HTTP judge and evolver-model tests, started once per session on a free loopback port, only by tests that ask
for it, and stopped after. A missing llama-cpp-python is a test failure, not a skip: CI installs it through
setup.py's `dev` extra.
"""

import os
import sys

from harnessrl_jax import cli  # imports no jax, so the settings below still take effect


def _xla_flags() -> str:
    """8 fake CPU devices for the sharding tests, and the launch scripts' own XLA flags (harnessrl_jax/cli.py: XLA's
    older CPU fusion emitters on the jaxlib versions they were measured on), so the tests compile what the launch
    scripts run. About half the suite's time is XLA compiling ~2,500 programs; on jaxlib 0.10 the older emitters
    compile a tiny config's train step in 2.3 s instead of 3.1 and start a tiny train.py run in 10.4 s instead of
    15.3."""
    return f"--xla_force_host_platform_device_count=8 {cli.default_xla_flags()}".strip()


if "XLA_FLAGS" not in os.environ:
    os.environ["XLA_FLAGS"] = _xla_flags()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# The launch scripts' cache (cli.compilation_cache_dir: ~/.cache/harnessrl_jax/xla), outside the checkout, so a fresh
# clone's suite on a machine that ran it before loads the programs no change touched. JAX keys each program by
# XLA_FLAGS too (the tests' 8 fake devices among them): the tests' entries never stand in for a launch script's.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", cli.compilation_cache_dir())
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")

import importlib.util  # noqa: E402
import subprocess  # noqa: E402

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: end-to-end tests (over ~20 s); `make test` runs them, `make test-fast` "
                            "skips them")


# Session fixtures that cost tens of seconds (a real model loaded, a model server started, a run trained). Under
# pytest-xdist each worker builds its own copy of a session fixture, so the tests that use one (or share a test with
# one that does) are kept on one worker (`make test` runs `--dist loadgroup`) and each is built once per run.
SHARED_FIXTURES = ("smollm2", "hf_smollm2", "llama_server", "letters_run", "harnessrl_run", "sglang_server")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the marks
def pytest_collection_modifyitems(config, items):
    parent = {name: name for name in SHARED_FIXTURES}

    def root(name):
        while parent[name] != name:
            name = parent[name]
        return name

    uses = [[f for f in SHARED_FIXTURES if f in item.fixturenames] for item in items]
    for names in uses:
        for other in names[1:]:
            parent[root(other)] = root(names[0])
    for item, names in zip(items, uses):
        if names:
            item.add_marker(pytest.mark.xdist_group(root(names[0])))


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tiny_config(arg: str = "method=harnessrl,tasks=harness", **harness):
    """experiments/tiny_cpu.py with `arg`, and config.harness settings."""
    sys.path.insert(0, REPO)
    from experiments import tiny_cpu

    config = tiny_cpu.get_config(arg)
    config.harness.update(harness)
    return config


@pytest.fixture(scope="session")
def tiny_config():
    """A function: tiny_config(arg="method=harnessrl,tasks=harness", **harness) -> the tiny config."""
    return _tiny_config


@pytest.fixture(scope="session")
def tiny_setup():
    """build.setup of the tiny HarnessRL config (toy tasks with a varying, a saturated and a blind criterion),
    shared by the in-process step tests: its trainer and engine compile once per session."""
    from harnessrl_jax import build

    run = build.setup(_tiny_config())
    yield run
    run.close()


def train_subprocess(workdir, *args, timeout=600) -> str:
    """launch/train.py in a subprocess (its own flags and JAX set-up); returns its stderr (the progress log)."""
    cmd = [sys.executable, os.path.join(REPO, "launch", "train.py"), f"--workdir={workdir}", *args]
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-4000:]
    return out.stderr


@pytest.fixture(scope="session")
def train_script():
    """A function: train_script(workdir, *args) runs launch/train.py and returns its log."""
    return train_subprocess


@pytest.fixture(scope="session")
def letters_run(tmp_path_factory):
    """(workdir, log) of one tiny GRPO run that learns the letter task in 30 steps (checkpoints at 15 and 30),
    shared by the tests that need a trained policy."""
    workdir = str(tmp_path_factory.mktemp("letters") / "run")
    log = train_subprocess(workdir, "--config=experiments/tiny_cpu.py", "--config.total_steps=30",
                           "--config.checkpoint.every=15", "--config.report=False")
    return workdir, log


@pytest.fixture(scope="session")
def harnessrl_run(tmp_path_factory):
    """(workdir, log) of one tiny HarnessRL run through launch/train.py (6 steps, report written), in a
    compare-style directory (`<root>/harnessrl-s0`), shared by the tests that read a run's files."""
    workdir = str(tmp_path_factory.mktemp("runs") / "harnessrl-s0")
    log = train_subprocess(workdir, "--config=experiments/tiny_cpu.py:method=harnessrl,tasks=harness")
    return workdir, log


@pytest.fixture(scope="session")
def smollm2_path():
    from harnessrl_jax.models.presets import smollm2_gguf_path

    return smollm2_gguf_path()


@pytest.fixture(scope="session")
def smollm2(smollm2_path):
    """(config, params, tokenizer) of SmolLM2-135M-Instruct, loaded by this project from the GGUF."""
    from harnessrl_jax.models import load_pretrained

    return load_pretrained("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def hf_smollm2(smollm2_path):
    """transformers' own model and tokenizer from the same GGUF: the independent reference."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    directory, name = os.path.split(smollm2_path)
    model = AutoModelForCausalLM.from_pretrained(directory, gguf_file=name, dtype=torch.float32)
    model.eval()
    return model, AutoTokenizer.from_pretrained(directory, gguf_file=name)


SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
STARTUP_TIMEOUT_S = 120.0


@pytest.fixture(scope="session")
def llama_server(smollm2_path):
    """local_server.llama_server on the SmolLM2 GGUF: (base_url, model) once /v1/models answers."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"llama.cpp's OpenAI-compatible server is not installed (missing {', '.join(missing)}): "
                    f"pip install 'llama-cpp-python[server]' (it is in setup.py's dev extra)", pytrace=False)
    from harnessrl_jax.rubric.judges.local_server import llama_server

    try:
        with llama_server(smollm2_path, alias="smollm2", startup_s=STARTUP_TIMEOUT_S) as server:
            yield server
    except RuntimeError as e:  # it did not start; the message ends with the server's log
        pytest.fail(str(e), pytrace=False)


@pytest.fixture(scope="session")
def sglang_server(tmp_path_factory):
    """SGLang serving SmolLM2-135M-Instruct from `model_dir`, an HF directory this project exported from the GGUF.
    The fixture returns while the server starts (25-75 s, the machine quiet to busy): `url` waits until it is
    healthy. A missing SGLang environment is a failure, not a skip."""
    sys.path.insert(0, REPO)
    from third_party.sglang import cpu_server

    try:
        cpu_server.check_installed()
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    from harnessrl_jax.models import load_pretrained
    from harnessrl_jax.models.export import export_hf

    root = tmp_path_factory.mktemp("sglang")
    config, params, tokenizer = load_pretrained("smollm2-135m-instruct")
    model_dir = export_hf(config, params, str(root / "smollm2"), tokenizer)
    del params
    with cpu_server.running(model_dir, str(root / "server.log"), wait=False) as server:
        yield _WhenHealthy(server)


class _WhenHealthy:
    """A starting cpu_server.Server whose `url` waits for it (a start-up failure fails the test that asks)."""

    def __init__(self, server):
        self._server, self.model_dir = server, server.model_path

    @property
    def url(self) -> str:
        try:
            return self._server.wait().url
        except RuntimeError as e:
            pytest.fail(str(e), pytrace=False)
