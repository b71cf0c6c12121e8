"""Rubrics: task schema, reward, rule checkers and judges."""
