"""RL core: advantages and losses (grpo.py), the sharded train step, optimiser and checkpoints."""
