"""Shared fixtures. XLA_FLAGS must be set before jax is first imported: 8 fake CPU devices for sharding tests."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: end-to-end tests that take more than a minute")


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
