"""Rule checkers take an integral float wherever they take an integer (IFBench's release stores `"N": 5.0`): the
verdict equals the integer's, the checker receives an int, and a non-integral float is still refused."""

import inspect

import pytest

from harnessrl_jax.rubric import rules

RESPONSE = "One river. Two stones, three lights!\n\n* four winds\n* five homes\n\nWhy? Because."


def _int_kwargs(rule):
    """The names of `rule`'s integer kwargs."""
    return [k for k, p in rule.params.items() if "int" in str(p.annotation)]


@pytest.mark.parametrize("rule_id", [r for r in rules.registered() if _int_kwargs(rules.get_rule(r))])
def test_integral_float_is_the_integer(rule_id):
    rule = rules.get_rule(rule_id)
    samples = {"relation": "at least", "let_relation": "at least", "keyword": "river", "keywords": ["river"],
               "forbidden_words": ["ocean"], "letter": "r", "language": "en", "section_spliter": "Section",
               "prompt_to_repeat": "One river flows here today.", "end_phrase": "Because.", "word": "river",
               "first_word": "one", "keyword1": "river", "keyword2": "stone", "keyword3": "light", "keyword4": "wind",
               "keyword5": "home", "reference_text": "One river. Two stones.", "options": "yes/no", "sep": "*",
               "capital_relation": "at least", "pattern": "river", "relation_words": "at least"}
    ints = {"min_words": 1, "max_words": 50, "n_start": 0, "n_end": 2, "n": 1, "m": 1, "N": 2}
    kwargs = {}
    for k, p in rule.params.items():
        if "int" in str(p.annotation):  # optional ones too: range rules need one of theirs
            kwargs[k] = ints.get(k, 1 if k.startswith("min") else 50 if k.startswith("max") else 2)
            continue
        if p.default is not inspect.Parameter.empty:
            continue
        if k in samples:
            kwargs[k] = samples[k]
        else:
            pytest.skip(f"no sample value for {rule_id}'s kwarg {k!r}")
    try:
        expected = rules.check(rule_id, kwargs, RESPONSE, prompt="One river flows here today.")
    except LookupError:
        pytest.skip("needs NLTK data that no package ships")
    as_float = {k: float(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in kwargs.items()}
    assert rules.check(rule_id, as_float, RESPONSE, prompt="One river flows here today.") == expected
    validated = rules.validate_kwargs(rule_id, as_float, prompt="One river flows here today.")
    assert all(type(validated[k]) is int for k in kwargs if isinstance(kwargs[k], int))
    k = next(k for k, v in kwargs.items() if isinstance(v, int) and not isinstance(v, bool))
    with pytest.raises(ValueError, match=rf"kwarg '{k}' must be an integer, got 2.5"):
        rules.validate_kwargs(rule_id, {**as_float, k: 2.5}, prompt="x")
