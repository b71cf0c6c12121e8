"""Rule checkers: IFEval-compatible ids, kwargs and verdicts; new checkers; validation; IFEval file scoring."""

import collections
import json
import re

import pytest

from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.rules import registry, text

# IFEval's registered instructions (its instructions_registry), each with IFEval's kwarg names.
IFEVAL_KWARGS = {
    "keywords:existence": {"keywords"},
    "keywords:frequency": {"keyword", "frequency", "relation"},
    "keywords:forbidden_words": {"forbidden_words"},
    "keywords:letter_frequency": {"letter", "let_frequency", "let_relation"},
    "language:response_language": {"language"},
    "length_constraints:number_sentences": {"num_sentences", "relation"},
    "length_constraints:number_paragraphs": {"num_paragraphs"},
    "length_constraints:number_words": {"num_words", "relation"},
    "length_constraints:nth_paragraph_first_word": {"num_paragraphs", "nth_paragraph", "first_word"},
    "detectable_content:number_placeholders": {"num_placeholders"},
    "detectable_content:postscript": {"postscript_marker"},
    "detectable_format:number_bullet_lists": {"num_bullets"},
    "detectable_format:constrained_response": set(),
    "detectable_format:number_highlighted_sections": {"num_highlights"},
    "detectable_format:multiple_sections": {"section_spliter", "num_sections"},
    "detectable_format:json_format": set(),
    "detectable_format:title": set(),
    "combination:two_responses": set(),
    "combination:repeat_prompt": {"prompt_to_repeat"},
    "startend:end_checker": {"end_phrase"},
    "change_case:capital_word_frequency": {"capital_frequency", "capital_relation"},
    "change_case:english_capital": set(),
    "change_case:english_lowercase": set(),
    "punctuation:no_comma": set(),
    "startend:quotation": set(),
}

LT, AL = "less than", "at least"

# (rule id, kwargs, response, verdict). Every registered rule needs at least one passing and one failing case.
CASES = [
    # keywords: IFEval matches keywords as case-insensitive regexes, also inside longer words.
    ("keywords:existence", {"keywords": ["river", "Mona Lisa"]}, "The Mona lisa is near the RIVER.", True),
    ("keywords:existence", {"keywords": ["river", "Mona Lisa"]}, "The Mona Lisa hangs in Paris.", False),
    ("keywords:existence", {"keywords": ["cat"]}, "A catalog of items.", True),
    ("keywords:existence", {"keywords": ["café"]}, "Un CAFÉ noir.", True),
    ("keywords:existence", {"keywords": ["(ab"]}, "x (ab y", True),  # not a regex: matched literally
    ("keywords:existence", {"keywords": ["(ab"]}, "x ab y", False),
    ("keywords:frequency", {"keyword": "war", "frequency": 2, "relation": AL}, "War and software.", True),
    ("keywords:frequency", {"keyword": "war", "frequency": 2, "relation": LT}, "War and software.", False),
    ("keywords:frequency", {"keyword": " peace ", "frequency": 3, "relation": LT}, "peace, PEACE", True),
    ("keywords:frequency", {"keyword": "peace", "frequency": 3, "relation": AL}, "peace, PEACE", False),
    ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "Rockets fly.", True),
    ("keywords:forbidden_words", {"forbidden_words": ["rock"]}, "We ROCK.", False),
    ("keywords:forbidden_words", {"forbidden_words": ["tea", "new york"]}, "I love New York!", False),
    ("keywords:letter_frequency", {"letter": "T", "let_frequency": 3, "let_relation": AL}, "Tt t", True),
    ("keywords:letter_frequency", {"letter": "t", "let_frequency": 3, "let_relation": LT}, "Tt t", False),
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 2, "let_relation": AL}, "#a #b", True),
    ("keywords:letter_frequency", {"letter": "é", "let_frequency": 3, "let_relation": AL}, "Été", False),
    # language and case
    ("language:response_language", {"language": "en"}, "This is plainly an English sentence about the weather.",
     True),
    ("language:response_language", {"language": "fr"}, "This is plainly an English sentence about the weather.",
     False),
    ("language:response_language", {"language": "fr"}, "Il fait beau aujourd'hui et nous allons au marché.", True),
    ("language:response_language", {"language": "de"}, "1234 5678 !!!", True),  # undetectable passes, as in IFEval
    ("change_case:english_capital", {}, "THIS RESPONSE IS WRITTEN ENTIRELY IN CAPITAL LETTERS FOR YOU.", True),
    ("change_case:english_capital", {}, "This Response Has Mixed Case.", False),
    ("change_case:english_capital", {}, "IL FAIT BEAU AUJOURD'HUI ET NOUS ALLONS AU MARCHÉ DU VILLAGE.", False),
    ("change_case:english_lowercase", {}, "every word here is lowercase, including this one.", True),
    ("change_case:english_lowercase", {}, "almost every word here is lowercase except Paris.", False),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": AL},
     "NASA and ESA met the UN team.", True),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": LT},
     "NASA and ESA met the UN team.", False),
    ("change_case:capital_word_frequency", {"capital_frequency": 3, "capital_relation": AL},
     "A WELL-KNOWN fact.", False),  # two tokens: 'A' and the hyphenated 'WELL-KNOWN'
    # length
    ("length_constraints:number_words", {"num_words": 5, "relation": LT}, "one two three four five", False),
    ("length_constraints:number_words", {"num_words": 5, "relation": AL}, "one two three four five", True),
    ("length_constraints:number_words", {"num_words": 4, "relation": AL}, "co-op don't", True),  # 4 \w runs
    ("length_constraints:number_words", {"num_words": 3, "relation": LT}, "日本語 テキスト", True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": AL},
     "Dr. Smith arrived. He sat down! Was he tired?", True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": LT},
     "Dr. Smith arrived. He sat down! Was he tired?", False),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": LT},
     "Just one sentence with Mr. Jones in it.", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 3}, "First.\n***\nSecond.\n***\nThird.", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First.\n***\nSecond.\n***\nThird.", False),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "***\nFirst.\n***\nSecond.\n***", True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First.\n***\n***\nSecond.", False),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "Then"},
     'Intro text.\n\n"Then, we left."', True),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
     "Intro text.\n\nAfter that we left.", False),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 3, "nth_paragraph": 2, "first_word": "then"},
     "Intro text.\n\nThen we left.", False),
    ("length_constraints:number_characters", {"num_chars": 5, "relation": "at most"}, "  héllo \n", True),
    ("length_constraints:number_characters", {"num_chars": 5, "relation": LT}, "  héllo \n", False),
    ("length_constraints:number_characters", {"num_chars": 5, "relation": "exactly"}, "héllo", True),
    ("length_constraints:number_characters", {"num_chars": 5, "relation": "more than"}, "héllo", False),
    ("length_constraints:word_range", {"min_words": 2, "max_words": 3}, "one two three", True),
    ("length_constraints:word_range", {"min_words": 2, "max_words": 3}, "one two three four", False),
    ("length_constraints:word_range", {"max_words": 3}, "one", True),
    ("length_constraints:word_range", {"min_words": 2}, "one", False),
    ("length_constraints:sentence_range", {"min_sentences": 2, "max_sentences": 2}, "It rained. We stayed in.", True),
    ("length_constraints:sentence_range", {"min_sentences": 2}, "It rained.", False),
    ("length_constraints:paragraph_range", {"min_paragraphs": 2, "max_paragraphs": 3}, "One.\n\nTwo.\n \nThree.", True),
    ("length_constraints:paragraph_range", {"max_paragraphs": 2}, "One.\n\nTwo.\n \nThree.", False),
    # content
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], see you at [place].", True),
    ("detectable_content:number_placeholders", {"num_placeholders": 3}, "Dear [name], see you at [place].", False),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Thanks!\n\nP.S. Bring snacks.", True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Thanks!\n\np. s. lower case counts.", True),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Thanks!\n\nP.S. Only one.", False),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Thanks!\nP.P.S. More.", True),
    # format
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "Items:\n* apples\n- pears\n**Total** two", True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 3}, "Items:\n* apples\n- pears\n**Total** two", False),
    ("detectable_format:bullet_count", {"num_bullets": 2}, "* a\n- b\n* c", True),
    ("detectable_format:bullet_count", {"num_bullets": 2, "relation": "at most"}, "* a\n- b\n* c", False),
    ("detectable_format:numbered_list", {"num_items": 3}, "Steps:\n1. Mix\n2) Bake\n  3. Serve\nUse 1.5 kg", True),
    ("detectable_format:numbered_list", {"num_items": 2}, "Steps:\n1. Mix\n2) Bake\n  3. Serve\nUse 1.5 kg", False),
    ("detectable_format:numbered_list", {"num_items": 2, "relation": AL}, "1. Mix\n2) Bake\n3. Serve", True),
    ("detectable_format:number_headings", {"num_headings": 2}, "# Title\ntext\n## Part\n#hashtag", True),
    ("detectable_format:number_headings", {"num_headings": 3}, "# Title\ntext\n## Part\n#hashtag", False),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", True),
    ("detectable_format:constrained_response", {}, "my answer is yes.", False),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "A *first* and **second** part.", True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "Only *one* here, * * is blank.", False),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 1}, "**bold**", True),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nIntro\nSection 2\nBody", True),
    ("detectable_format:multiple_sections", {"section_spliter": "SECTION", "num_sections": 2},
     "Section 1\nIntro\nSection 2\nBody", False),
    ("detectable_format:json_format", {}, '```json\n{"a": [1, 2]}\n```', True),
    ("detectable_format:json_format", {}, 'Here is JSON: {"a": 1}', False),
    ("detectable_format:json_format", {}, "{'a': 1}", False),
    ("detectable_format:title", {}, "<<A Poem of Joy>>\nRoses are red.", True),
    ("detectable_format:title", {}, "<< >>\nNo title.", False),
    ("detectable_format:title", {}, "<<broken\ntitle>>", False),
    # combination
    ("combination:two_responses", {}, "First answer.\n******\nSecond answer.", True),
    ("combination:two_responses", {}, "Same.\n******\nSame.", False),
    ("combination:two_responses", {}, "A\n******\nB\n******\nC", False),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a haiku about rain."},
     "write a haiku about rain. Drops on the tin roof.", True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a haiku about rain."},
     "Sure! Write a haiku about rain.", False),
    # keywords beyond IFEval
    ("keywords:regex_match", {"pattern": r"\d{3}-\d{4}"}, "Call 555-1234 now", True),
    ("keywords:regex_match", {"pattern": r"\d{3}-\d{4}"}, "Call me", False),
    ("keywords:regex_match", {"pattern": r"\d+", "full_match": True}, " 42 \n", True),
    ("keywords:regex_match", {"pattern": r"\d+", "full_match": True}, "42 apples", False),
    ("keywords:word_frequency", {"keyword": "war", "frequency": 1, "relation": "exactly"},
     "War! Not software, not wars.", True),
    ("keywords:word_frequency", {"keyword": "war", "frequency": 2, "relation": AL}, "War! Not software, wars.", False),
    # start, end, case, punctuation
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Done. any other questions?  ", True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, '"Done. Any other questions?"', True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, "Any other questions? Bye.", False),
    ("startend:start_checker", {"start_phrase": "Dear team"}, '  "dear team, hello', True),
    ("startend:start_checker", {"start_phrase": "Dear team"}, "Hello dear team", False),
    ("startend:quotation", {}, '"Wrapped."', True),
    ("startend:quotation", {}, '"', False),
    ("startend:quotation", {}, '"Half" wrapped', False),
    ("change_case:all_capital", {}, "ΚΑΛΗΜΈΡΑ ΚΌΣΜΕ 123", True),
    ("change_case:all_capital", {}, "ΚΑΛΗΜΈΡΑ κόσμε", False),
    ("change_case:all_lowercase", {}, "привет мир", True),
    ("change_case:all_lowercase", {}, "Привет мир", False),
    ("punctuation:no_comma", {}, "No commas here.", True),
    ("punctuation:no_comma", {}, "One, two", False),
    ("punctuation:no_comma", {}, "A fullwidth comma， is allowed.", True),
    ("punctuation:forbidden_characters", {"characters": "!;"}, "Calm statement.", True),
    ("punctuation:forbidden_characters", {"characters": "!;"}, "Wow!", False),
    # an agent's outcome JSON (workspace_rules): the final files and the answer given with done
    ("workspace:file_equals", {"path": "a.txt", "text": "hi"}, '{"files": {"a.txt": " hi\\n"}, "answer": null}', True),
    ("workspace:file_equals", {"path": "a.txt", "text": "hi"}, '{"files": {"b.txt": "hi"}, "answer": "hi"}', False),
    ("workspace:file_equals", {"path": "a.txt", "text": "hi"}, "not json", False),
    ("workspace:file_contains", {"path": "a.txt", "text": "yo"}, '{"files": {"a.txt": "say yo"}}', True),
    ("workspace:file_contains", {"path": "a.txt", "text": "yo"}, '{"files": {"a.txt": "say hi"}}', False),
    ("workspace:file_absent_text", {"path": "a.txt", "text": "yo"}, '{"files": {"a.txt": "say hi"}}', True),
    ("workspace:file_absent_text", {"path": "a.txt", "text": "yo"}, '{"files": {}}', False),
    ("workspace:answer_equals", {"text": "42"}, '{"files": {}, "answer": " 42 "}', True),
    ("workspace:answer_equals", {"text": "42"}, '{"files": {"42": "42"}, "answer": null}', False),
]


def _valid_kwargs(rule_id):
    """The kwargs of the first case for rule_id, so each rule can be called."""
    return next(kw for r, kw, _, _ in CASES if r == rule_id)


@pytest.fixture(scope="module")
def nltk_ref(tmp_path_factory):
    """NLTK's own sent_tokenize and word_tokenize, reading the English Punkt model from a punkt_tab directory we
    write from the packaged model: an independent path to the sentence splits IFEval uses."""
    import nltk
    import punkt

    model = punkt.load_model("english")
    root = tmp_path_factory.mktemp("nltk_data")
    d = root / "tokenizers" / "punkt_tab" / "english"
    d.mkdir(parents=True)
    (d / "abbrev_types.txt").write_text("\n".join(model.abbrev_types), encoding="utf-8")
    (d / "sent_starters.txt").write_text("\n".join(model.sent_starters), encoding="utf-8")
    (d / "collocations.tab").write_text("\n".join("\t".join(c) for c in model.collocations), encoding="utf-8")
    (d / "ortho_context.tab").write_text("\n".join(f"{k}\t{v}" for k, v in model.ortho_context.items()),
                                         encoding="utf-8")
    saved = list(nltk.data.path)
    nltk.data.path.insert(0, str(root))
    nltk.tokenize._get_punkt_tokenizer.cache_clear()
    yield nltk
    nltk.data.path[:] = saved
    nltk.tokenize._get_punkt_tokenizer.cache_clear()


SAMPLE_TEXTS = [
    "Dr. Smith went to Washington on Jan. 5. He met Mr. Jones at 3 p.m. It rained!",
    "Punkt knows that Johann S. Bach was a composer. And sometimes sentences\ncan start lowercase.  i is a name.",
    "Is it 3.14? Yes! e.g. this one... The U.S. economy grew. The end",
    "No terminal punctuation at all",
    "A list:\n* one.\n* two!\n\nAnd a NEW paragraph, WITH CAPS and co-op-style WELL-KNOWN words.",
    "Café au lait coûte 3,50 €. Très bien! ¿Qué tal? 日本語の文です。",
    "“Quoted sentence.” Then another. (Parenthetical.) Done.",
    "Profits rose 5. Credit was cheap in 1987. Ask J. Walter.",  # learned collocations ('##number##', 'credit')
    "",
]


# --- registry -----------------------------------------------------------------------------------------------------

def test_registry_lists_at_least_30_sorted_ids_including_every_ifeval_instruction():
    ids = rules.registered()
    assert ids == sorted(ids) and len(ids) >= 30 and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z_-]+:[a-z0-9_-]+", i) for i in ids)
    for rule_id, kwarg_names in IFEVAL_KWARGS.items():
        rule = rules.get_rule(rule_id)
        assert rule.ifeval and set(rule.params) == kwarg_names, rule_id
    assert {i for i in ids if rules.get_rule(i).ifeval} == set(IFEVAL_KWARGS)


def test_every_rule_states_its_rule_and_has_passing_and_failing_cases():
    verdicts = collections.defaultdict(set)
    for rule_id, _, _, expected in CASES:
        verdicts[rule_id].add(expected)
    for rule_id in rules.registered():
        if rules.get_rule(rule_id).fn.__module__.endswith(".ifbench_rules"):
            continue  # IFBench's rules have their cases in test_ifbench_rules.py
        assert len(rules.get_rule(rule_id).doc) > 40, rule_id
        assert verdicts[rule_id] == {True, False}, f"{rule_id} needs a passing and a failing case"


@pytest.mark.parametrize("rule_id,kwargs,response,expected", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_checker_verdicts(rule_id, kwargs, response, expected):
    assert rules.check(rule_id, kwargs, response) is expected


@pytest.mark.parametrize("rule_id", sorted(set(c[0] for c in CASES)))
@pytest.mark.parametrize("response", ["", "  \n\t"])
def test_empty_response_follows_no_rule(rule_id, response):
    # As in IFEval's evaluation, even rules an empty text trivially meets (no commas, fewer than N words) fail.
    assert rules.check(rule_id, _valid_kwargs(rule_id), response) is False


def test_none_valued_kwargs_are_dropped_as_in_ifeval_data():
    hf_style = {"num_words": 3, "relation": "at least", "keywords": None, "num_highlights": None, "language": None}
    assert rules.check("length_constraints:number_words", hf_style, "one two three")
    assert rules.check("punctuation:no_comma", {"num_words": None, "keywords": None}, "no commas")
    assert rules.check("punctuation:no_comma", None, "no commas")


def test_unknown_rule_id_names_it_and_suggests_close_matches():
    with pytest.raises(KeyError) as e:
        rules.check("length_constraints:number_word", {}, "x")
    assert "'length_constraints:number_word'" in str(e.value)
    assert "'length_constraints:number_words'" in str(e.value)
    with pytest.raises(ValueError, match="length_constraints:number_sentences"):  # the name alone is matched too
        rules.check("number_sentence", {}, "x")
    with pytest.raises(ValueError, match="unknown rule id 'zzz:qqq'"):
        rules.get_rule("zzz:qqq")


@pytest.mark.parametrize("rule_id,kwargs,kwarg", [
    ("length_constraints:number_words", {"num_words": 3}, "relation"),  # missing
    ("length_constraints:number_words", {"num_words": 3, "relation": AL, "extra": 1}, "extra"),  # unknown
    ("length_constraints:number_words", {"num_word": 3, "relation": AL}, "num_word"),  # misspelt
    ("length_constraints:number_words", {"num_words": "3", "relation": AL}, "num_words"),  # string, not int
    ("length_constraints:number_words", {"num_words": 3.5, "relation": AL}, "num_words"),  # 3.0 is 3 (IFBench)
    ("length_constraints:number_words", {"num_words": True, "relation": AL}, "num_words"),
    ("length_constraints:number_words", {"num_words": -1, "relation": AL}, "num_words"),
    ("length_constraints:number_words", {"num_words": 3, "relation": "at most"}, "relation"),  # not an IFEval relation
    ("length_constraints:number_words", {"num_words": 3, "relation": "at_least"}, "relation"),
    ("keywords:existence", {"keywords": "river"}, "keywords"),  # a string, not a list
    ("keywords:existence", {"keywords": []}, "keywords"),
    ("keywords:existence", {"keywords": ["a", 3]}, "keywords"),
    ("keywords:frequency", {"keyword": "  ", "frequency": 1, "relation": AL}, "keyword"),
    ("keywords:letter_frequency", {"letter": "ab", "let_frequency": 1, "let_relation": AL}, "letter"),
    ("language:response_language", {"language": "english"}, "language"),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"},
     "nth_paragraph"),
    ("length_constraints:word_range", {}, "min_words"),
    ("length_constraints:word_range", {"min_words": 5, "max_words": 2}, "min_words"),
    ("keywords:regex_match", {"pattern": "(unclosed"}, "pattern"),
    ("keywords:regex_match", {"pattern": "a", "full_match": "yes"}, "full_match"),
    ("combination:repeat_prompt", {}, "prompt_to_repeat"),  # no kwarg and no prompt to fill it from
    ("detectable_format:title", {"num_highlights": 2}, "num_highlights"),
])
def test_bad_kwargs_raise_value_error_naming_rule_and_kwarg(rule_id, kwargs, kwarg):
    with pytest.raises(ValueError) as e:
        rules.check(rule_id, kwargs, "Some response.")
    assert repr(rule_id) in str(e.value) and repr(kwarg) in str(e.value)


def test_kwargs_must_be_a_mapping_and_response_a_string():
    with pytest.raises(ValueError, match="punctuation:no_comma"):
        rules.check("punctuation:no_comma", [], "x")
    with pytest.raises(TypeError):
        rules.check("punctuation:no_comma", {}, None)


def test_repeat_prompt_falls_back_to_the_prompt_only_when_prompt_to_repeat_is_absent():
    assert rules.check("combination:repeat_prompt", {}, "Say hi. Hi!", prompt="Say hi.")
    assert not rules.check("combination:repeat_prompt", {}, "Hi!", prompt="Say hi.")
    assert rules.check("combination:repeat_prompt", {"prompt_to_repeat": "Say"}, "Say hi.", prompt="Other")


def test_register_adds_a_checker_with_validated_kwargs(monkeypatch):
    monkeypatch.setattr(registry, "_RULES", dict(registry._RULES))

    @rules.register("custom:ends_with_digit")
    def ends_with_digit(response, *, min_digits: int = 1) -> bool:
        """The stripped response ends with at least `min_digits` digits."""
        return re.search(r"\d{%d}$" % min_digits, response.strip()) is not None

    assert "custom:ends_with_digit" in rules.registered()
    assert rules.check("custom:ends_with_digit", {}, "order 66") and not rules.check("custom:ends_with_digit", {}, "x")
    assert not rules.check("custom:ends_with_digit", {"min_digits": 3}, "order 66")
    with pytest.raises(ValueError, match="min_digits"):
        rules.check("custom:ends_with_digit", {"min_digits": "3"}, "order 66")
    with pytest.raises(ValueError, match="already registered"):
        rules.register("custom:ends_with_digit")(ends_with_digit)
    with pytest.raises(ValueError, match="group:name"):
        rules.register("no-colon")(ends_with_digit)


@pytest.mark.parametrize("relation,expected", [("less than", [True, False, False]), ("at most", [True, True, False]),
                                               ("exactly", [False, True, False]), ("at least", [False, True, True]),
                                               ("more than", [False, False, True])])
def test_compare_relations_at_the_threshold(relation, expected):
    assert [rules.compare(n, relation, 5) for n in (4, 5, 6)] == expected


# --- counts against independent references -----------------------------------------------------------------------

@pytest.mark.parametrize("sample", SAMPLE_TEXTS)
def test_word_count_matches_nltk_regexp_tokenizer(sample):
    from nltk.tokenize import RegexpTokenizer
    assert text.count_words(sample) == len(RegexpTokenizer(r"\w+").tokenize(sample))


@pytest.mark.parametrize("sample", SAMPLE_TEXTS)
def test_sentences_and_tokens_match_nltk_sent_and_word_tokenize(nltk_ref, sample):
    assert text.sentences(sample) == nltk_ref.sent_tokenize(sample)
    assert text.word_tokens(sample) == nltk_ref.word_tokenize(sample)


def test_punkt_model_is_loaded_offline_with_nltk_english_parameters():
    tok = text.punkt_tokenizer()
    assert {"dr", "mr", "mrs", "u.s", "jan"} <= tok._params.abbrev_types
    assert text.sentences("Mr. Brown met Dr. Lee in the U.S. on Jan. 3. They talked.") == [
        "Mr. Brown met Dr. Lee in the U.S. on Jan. 3.", "They talked."]
    text.sentences("Zyxwvut qwerty. Unseen words.")  # reading unseen types must not grow the model
    assert "zyxwvut" not in tok._params.ortho_context


@pytest.mark.parametrize("sample", [s for s in SAMPLE_TEXTS if s])
def test_count_rules_flip_exactly_at_the_threshold(nltk_ref, sample):
    # For each count rule: 'less than' n fails and 'at least' n passes exactly at the counted n.
    counts = {
        ("length_constraints:number_words", "num_words", "relation"): len(re.findall(r"\w+", sample)),
        ("length_constraints:number_sentences", "num_sentences", "relation"): len(nltk_ref.sent_tokenize(sample)),
        ("change_case:capital_word_frequency", "capital_frequency", "capital_relation"):
            sum(t.isupper() for t in nltk_ref.word_tokenize(sample)),
        ("keywords:letter_frequency", "let_frequency", "let_relation"): sample.lower().count("e"),
        ("keywords:frequency", "frequency", "relation"): sample.lower().count("the"),
    }
    for (rule_id, num, rel), n in counts.items():
        extra = {"letter": "e"} if rule_id == "keywords:letter_frequency" else {}
        extra = {"keyword": "the"} if rule_id == "keywords:frequency" else extra
        verdict = lambda k, r: rules.check(rule_id, {num: k, rel: r, **extra}, sample)
        assert (verdict(n, LT), verdict(n + 1, LT), verdict(n, AL), verdict(n + 1, AL)) == (False, True, True, False), \
            (rule_id, n)


@pytest.mark.parametrize("response", ['{"a": 1}', "[1, 2]", "```\n[true]\n```", "```JSON\n{}\n```", "3", '"s"',
                                      "{a: 1}", "```json\n{,}\n```", "null", "Sure: {}", "```python\n{}\n```"])
def test_json_format_agrees_with_json_loads_after_fence_removal(response):
    body = response.strip()
    body = re.sub(r"^```(json|Json|JSON)?", "", body)
    body = re.sub(r"```$", "", body).strip()
    try:
        json.loads(body)
        expected = True
    except ValueError:
        expected = False
    assert rules.check("detectable_format:json_format", {}, response) is expected


# --- IFEval files --------------------------------------------------------------------------------------------------

def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _ifeval_files(tmp_path):
    null_kwargs = {"num_highlights": None, "relation": None, "num_words": None, "keywords": None}
    inputs = [
        {"key": 1, "prompt": "Describe rain in 3+ words, no commas.",
         "instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
         "kwargs": [dict(null_kwargs), {**null_kwargs, "num_words": 3, "relation": "at least"}]},
        {"key": 2, "prompt": "Write a title.\nFirst repeat the request word for word without change.",
         "instruction_id_list": ["combination:repeat_prompt", "detectable_format:title"],
         "kwargs": [{"prompt_to_repeat": "Write a title."}, {}]},
        {"key": 3, "prompt": "Say hi.", "instruction_id_list": ["combination:repeat_prompt"], "kwargs": [{}]},
        {"key": 4, "prompt": "Tell a story ending with 'The end.', no commas.",
         "instruction_id_list": ["startend:end_checker", "punctuation:no_comma"],
         "kwargs": [{"end_phrase": "The end."}, {}]},
        {"key": 5, "prompt": "Reply in English.", "instruction_id_list": ["language:response_language"],
         "kwargs": [{"language": "en"}]},
    ]
    responses = [
        {"prompt": "Describe rain in 3+ words, no commas.", "response": "Grey water falls softly."},
        {"prompt": "Write a title.\nFirst repeat the request word for word without change.",
         "response": "Write a title. <<Rain>>"},
        {"prompt": "Say hi.", "response": "say hi. Hello!"},
        {"prompt": "Tell a story ending with 'The end.', no commas.",
         "response": "Sure, here it is:\nA cat slept all day. The end.\n*Sent from my phone*"},
        {"prompt": "Reply in English.", "response": "   "},
        {"prompt": "An unused prompt.", "response": "ignored"},
    ]
    return _write_jsonl(tmp_path / "input_data.jsonl", inputs), _write_jsonl(tmp_path / "responses.jsonl", responses)


def test_ifeval_file_scored_end_to_end_strict_and_loose(tmp_path):
    inputs, responses = _ifeval_files(tmp_path)
    strict = rules.score_ifeval_file(inputs, responses)
    assert [r["key"] for r in strict] == [1, 2, 3, 4, 5]
    assert [r["follow_instruction_list"] for r in strict] == [[True, True], [True, True], [True], [False, False],
                                                             [False]]
    assert [r["follow_all_instructions"] for r in strict] == [True, True, True, False, False]
    # Loose: without its first and last lines, row 4 ends with 'The end.' and has no comma.
    loose = rules.score_ifeval_file(inputs, responses, loose=True)
    assert [r["follow_instruction_list"] for r in loose][3] == [True, True]
    assert loose[4]["follow_instruction_list"] == [False]  # a blank response follows nothing, even loosely
    report = rules.summarize(strict)
    assert report["prompt_level"] == pytest.approx(3 / 5)
    assert report["instruction_level"] == pytest.approx(5 / 8)
    assert report["by_instruction"]["punctuation:no_comma"] == pytest.approx(1 / 2)
    assert report["by_group"]["combination"] == pytest.approx(1.0)


def test_ifeval_rows_may_carry_their_own_responses(tmp_path):
    path = _write_jsonl(tmp_path / "rows.jsonl", [
        {"key": 7, "prompt": "p", "instruction_id_list": ["startend:quotation"], "kwargs": [{}], "response": '"ok"'}])
    assert rules.score_ifeval_file(path)[0]["follow_all_instructions"] is True


def test_ifeval_file_errors_name_the_file_line_and_problem(tmp_path):
    inputs, responses = _ifeval_files(tmp_path)
    short = _write_jsonl(tmp_path / "short.jsonl", [{"prompt": "Say hi.", "response": "hi"}])
    with pytest.raises(ValueError, match=r"missing responses for input keys \[1, 2, 4, 5\]"):
        rules.score_ifeval_file(inputs, short)
    bad = _write_jsonl(tmp_path / "bad.jsonl", [
        {"key": 1, "prompt": "p", "instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}]},
        {"key": 2, "prompt": "p", "instruction_id_list": ["detectable_format:titel"], "kwargs": [{}]}])
    with pytest.raises(ValueError, match=r"bad.jsonl:2: .*'detectable_format:titel'.*'detectable_format:title'"):
        rules.score_ifeval_file(bad, responses)
    bad = _write_jsonl(tmp_path / "bad.jsonl", [
        {"key": 1, "prompt": "p", "instruction_id_list": ["length_constraints:number_words"],
         "kwargs": [{"num_words": "many", "relation": "at least"}]}])
    with pytest.raises(ValueError, match=r"bad.jsonl:1: .*'num_words'"):
        rules.score_ifeval_file(bad, responses)
    bad = _write_jsonl(tmp_path / "bad.jsonl", [{"key": 1, "prompt": "p", "instruction_id_list": []}])
    with pytest.raises(ValueError, match=r"bad.jsonl:1: missing field 'kwargs'"):
        rules.score_ifeval_file(bad, responses)
