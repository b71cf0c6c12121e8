"""harnessrl_jax: rubric-based RL of language models in JAX, with a training-time harness (HarnessRL)."""
