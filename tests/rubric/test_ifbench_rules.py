"""IFBench's instructions as rule checkers: ids, kwarg names, verdicts (hand-worked), validation, file scoring."""

import collections
import json
import re
import string

import pytest

from harnessrl_jax.rubric import rules
from harnessrl_jax.rubric.rules import ifbench_rules

# IFBench's registry (its instructions_registry.INSTRUCTION_DICT), each id with the kwarg names its data uses.
IFBENCH_KWARGS = {
    "count:word_count_range": {"min_words", "max_words"}, "count:unique_word_count": {"N"},
    "ratio:stop_words": {"percentage"}, "ratio:sentence_type": set(), "ratio:sentence_balance": set(),
    "count:conjunctions": {"small_n"}, "count:person_names": {"N"}, "ratio:overlap": {"reference_text", "percentage"},
    "count:numbers": {"N"}, "words:alphabet": set(), "words:vowel": set(), "words:consonants": set(),
    "sentence:alliteration_increment": set(), "words:palindrome": set(), "count:punctuation": set(),
    "format:parentheses": set(), "format:quotes": set(), "words:prime_lengths": set(), "format:options": {"options"},
    "format:newline": set(), "format:emoji": set(), "ratio:sentence_words": set(), "count:words_japanese": {"N"},
    "words:start_verb": set(), "words:repeats": {"small_n"}, "sentence:keyword": {"word", "N"},
    "count:pronouns": {"N"}, "words:odd_even_syllables": set(), "words:last_first": set(),
    "words:paragraph_last_first": set(), "sentence:increment": {"small_n"}, "words:no_consecutive": set(),
    "format:line_indent": set(), "format:quote_unquote": set(), "format:list": {"sep"}, "format:thesis": set(),
    "format:sub-bullets": set(), "format:no_bullets_bullets": set(), "custom:multiples": set(),
    "custom:mcq_count_length": set(), "custom:reverse_newline": set(), "custom:word_reverse": set(),
    "custom:character_reverse": set(), "custom:sentence_alphabet": set(), "custom:european_capitals_sort": set(),
    "custom:csv_city": set(), "custom:csv_special_character": set(), "custom:csv_quotes": set(),
    "custom:date_format_list": set(), "count:keywords_multiple": {f"keyword{i}" for i in range(1, 6)},
    "words:keywords_specific_position": {"keyword", "n", "m"}, "words:words_position": {"keyword"},
    "repeat:repeat_change": {"prompt_to_repeat"}, "repeat:repeat_simple": set(),
    "repeat:repeat_span": {"prompt_to_repeat", "n_start", "n_end"}, "format:title_case": set(),
    "format:output_template": set(), "format:no_whitespace": set(),
}

CAPITALS = ("Reykjavik, Helsinki, Oslo, Tallinn, Stockholm, Riga, Moscow, Copenhagen, Vilnius, Minsk, Dublin, Berlin, "
            "Amsterdam, Warsaw, London, Brussels, Prague, Luxembourg, Paris, Vienna, Bratislava, Budapest, Vaduz, "
            "Chisinau, Bern, Ljubljana, Zagreb")
COUNTRIES = "\n".join(["Zimbabwe", "Zambia"] + [f"Land{chr(90 - i // 26)}{chr(90 - i % 26)}" for i in range(50)])
MCQ = "\n".join(f"Question {i}: {'Why ' * i}art?\n" + "\n".join(f"{c}) option" for c in "ABCDE") for i in (1, 2, 3, 4))
KW5 = dict(keyword1="cat", keyword2="dog", keyword3="sun", keyword4="sea", keyword5="sky")
KW5_TEXT = "cat " + "dog " * 2 + "sun " * 3 + "sea " * 5 + "sky " * 7
PROMPT = "Write a short poem about the lazy cat."

# (rule id, kwargs, response, verdict); the comment says why.
CASES = [
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "co-op rules!", True),  # co, op, rules: 3 \w runs
    ("count:word_count_range", {"min_words": 3, "max_words": 4}, "one two three four five", False),  # 5 > 4
    ("count:unique_word_count", {"N": 3}, "Cat cat, CAT! dog -", True),  # {cat, dog, ''}: '-' strips to ''
    ("count:unique_word_count", {"N": 3}, "Cat cat, CAT! dog", False),  # {cat, dog}
    ("ratio:stop_words", {"percentage": 50}, "The cat sat on the mat", True),  # the, on, the: 3/6 = 50%
    ("ratio:stop_words", {"percentage": 49}, "The cat sat on the mat", False),
    ("ratio:sentence_type", {}, "I ran. You ran. Did we?", True),  # 2 '.', 1 '?'
    ("ratio:sentence_type", {}, "I ran. Did you? Did we?", False),  # 1 '.', 2 '?'
    ("ratio:sentence_balance", {}, "Go now. Why? Wow!", True),  # one of each
    ("ratio:sentence_balance", {}, "Go now. Why? Wow! Yes.", False),  # 2 '.', 1 '?', 1 '!'
    ("count:conjunctions", {"small_n": 3}, "and And, but", True),  # distinct raw tokens: 'and', 'And,', 'but'
    ("count:conjunctions", {"small_n": 3}, "and and but because", False),  # {'and', 'but'}
    ("count:person_names", {"N": 2}, "Emma met Leo.", True),
    ("count:person_names", {"N": 2}, "Emma met leo and Leonard.", False),  # case-sensitive, whole words
    ("ratio:overlap", {"reference_text": "the cat sat down", "percentage": 50}, "the cat sat up", True),
    # response trigrams (the cat sat), (cat sat up): 1 of 2 shared = 50%
    ("ratio:overlap", {"reference_text": "the cat sat down", "percentage": 10}, "the cat sat up", False),
    ("count:numbers", {"N": 2}, "Pi is 3.14 and e is 2.", True),  # '314' and '2' once '.' is deleted
    ("count:numbers", {"N": 3}, "Pi is 3.14 and e is 2.", False),
    ("words:alphabet", {}, "Yes, zebras are big.", True),  # y z a b: wraps after z
    ("words:alphabet", {}, "Apples bake dough.", False),  # a b d: skips c
    ("words:vowel", {}, "Bad cats eat.", True),  # vowels a, e
    ("words:vowel", {}, "Our idea.", False),  # o u i e a: five vowels
    ("words:consonants", {}, "Strong brick walls.", True),  # str, br/ck, ll
    ("words:consonants", {}, "Strong idea.", False),  # 'idea.' has no two consonants in a row
    ("sentence:alliteration_increment", {}, "I ran. Big bold bears. Sam sees six snakes.", True),  # 0, 3, 4
    ("sentence:alliteration_increment", {}, "Big bold bears. I ran.", False),  # 3 then 0
    ("words:palindrome", {}, "level civic kayak madam refer rotor stats tenet radar racecar", True),  # ten of >= 5
    ("words:palindrome", {}, "level civic kayak madam refer rotor stats tenet radar noon", False),  # 'noon' is 4
    ("count:punctuation", {}, "Hi, you; me: ok. Really?! Yes! No?", True),
    ("count:punctuation", {}, "Hi, you; me: ok. Really?!", False),  # the '?!' is the interrobang, no '?' or '!' left
    ("format:parentheses", {}, "( [ { ( [ x ] ) } ] )", True),  # five deep, then a matching close
    ("format:parentheses", {}, "( [ { ( x ) } ] )", False),  # four deep
    ("format:quotes", {}, "\"He said 'she said \"hi\" once' twice\"", True),  # " ' " nest three deep
    ("format:quotes", {}, "\"He said 'hi' twice\"", False),  # two deep
    ("words:prime_lengths", {}, "We ate three dates.", True),  # 2 3 5 5
    ("words:prime_lengths", {}, "I ate three dates.", False),  # 'I' has 1 letter
    ("format:options", {"options": "yes/no/maybe"}, "Maybe.", True),  # punctuation and case ignored
    ("format:options", {"options": "yes/no/maybe"}, "Maybe so.", False),
    ("format:options", {"options": "a), b), c), d)"}, "b)", True),  # lettered options match exactly
    ("format:options", {"options": "a), b), c), d)"}, "B)", False),
    ("format:newline", {}, "One\nword\nper\nline.", True),
    ("format:newline", {}, "One word\nper line.", False),  # 2 lines, 4 words
    ("format:emoji", {}, "Hi there 😀. Bye 👋", True),
    ("format:emoji", {}, "Hi there 😀. Bye.", False),
    ("ratio:sentence_words", {}, "Cats purr. Dogs bark. Owls hoot.", True),  # 10 characters each, no repeats
    ("ratio:sentence_words", {}, "Cats purr. Cats bark. Owls hoot.", False),  # 'cats' twice
    ("count:words_japanese", {"N": 2}, "I 日本 like です.", True),  # tokens 2 and 4 hold Japanese
    ("count:words_japanese", {"N": 2}, "I 日本 like it.", False),
    ("words:repeats", {"small_n": 2}, "It's its own end.", True),  # "it's" -> 'its': 'its' twice
    ("words:repeats", {"small_n": 2}, "It's its own; its end.", False),  # 'its' three times
    ("sentence:keyword", {"word": "Cat", "N": 2}, "Hello. The cat sleeps.", True),  # sentence 2, any case
    ("sentence:keyword", {"word": "cat", "N": 2}, "The cat sleeps. Cats wake.", False),  # 'Cats' is not 'cat'
    ("count:pronouns", {"N": 3}, "She/her gave everyone cake.", True),  # she, her, everyone
    ("count:pronouns", {"N": 3}, "She gave Bob cake.", False),
    ("words:odd_even_syllables", {}, "Cat water dog", True),  # syllapy: 1 2 1
    ("words:odd_even_syllables", {}, "Cat dog water", False),  # 1 1 2
    ("words:last_first", {}, "I like cats. Cats like fish. Fish swim.", True),
    ("words:last_first", {}, "I like cats. Dogs like fish.", False),
    ("words:paragraph_last_first", {}, "Home is where home\n\nBlue skies, blue!", True),
    ("words:paragraph_last_first", {}, "Home is where I live", False),
    ("sentence:increment", {"small_n": 2}, "I ran. I ran far away. Then I ran much further on.", True),  # 2 4 6
    ("sentence:increment", {"small_n": 2}, "I ran. I ran far. Then I ran.", False),  # 2 3 3
    ("words:no_consecutive", {}, "Big red apples grow.", True),
    ("words:no_consecutive", {}, "Big bright apples.", False),
    ("format:line_indent", {}, "a\n b\n\n  c", True),  # indents 0 1 2, the blank line dropped
    ("format:line_indent", {}, "a\n b\n c", False),  # 1 then 1
    ("format:quote_unquote", {}, "He said \"go\" and left.", True),
    ("format:quote_unquote", {}, "He said \"go\".", False),  # ends with a quote once '.' is stripped
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR eggs\nSEPARATOR milk", True),
    ("format:list", {"sep": "SEPARATOR"}, "SEPARATOR eggs\n- milk", False),
    ("format:thesis", {}, "<i>Cats rule.</i> Here is why.", True),
    ("format:thesis", {}, "<i>Cats rule.</i>", False),  # nothing after the thesis
    ("format:sub-bullets", {}, "* fruit\n  - apple\n* veg\n  - kale", True),
    ("format:sub-bullets", {}, "* fruit\n  - apple\n* veg", False),  # the second bullet has no sub-bullet
    ("format:no_bullets_bullets", {}, "Intro here. Two sentences.\n* a\n* b", True),
    ("format:no_bullets_bullets", {}, "Intro here.\n* a\n* b", False),  # one sentence before the bullets
    ("custom:multiples", {}, "14, 21, 28, 35, 42, 49", True),
    ("custom:multiples", {}, "7, 14, 21, 28, 35, 42, 49", False),  # 7 is below 10
    ("custom:mcq_count_length", {}, MCQ, True),  # question stems grow: 'Why art?' < 'Why Why art?' < ...
    ("custom:mcq_count_length", {}, "Here you go:\n" + MCQ, False),  # text before the first question
    ("custom:reverse_newline", {}, COUNTRIES, True),  # 52 lines from Zimbabwe on, descending
    ("custom:reverse_newline", {}, COUNTRIES.replace("Zambia", "Angola"), False),  # Angola before LandZZ
    ("custom:word_reverse", {}, "Eagle bald the is it.", True),  # reversed: 'it is the bald eagle'
    ("custom:word_reverse", {}, "It is the bald eagle.", False),  # reversed: 'eagle bald the is it'
    ("custom:character_reverse", {}, ".elgae dlab ehT", True),
    ("custom:character_reverse", {}, "The bald eagle.", False),
    ("custom:sentence_alphabet", {}, " ".join(f"{c}ny words." for c in string.ascii_uppercase), True),
    ("custom:sentence_alphabet", {}, " ".join(f"{c}ny words." for c in string.ascii_uppercase[:25]), False),
    ("custom:european_capitals_sort", {}, CAPITALS, True),
    ("custom:european_capitals_sort", {}, CAPITALS.replace("Oslo, Tallinn", "Tallinn, Oslo"), False),
    ("custom:csv_city", {}, "ID,Country,City,Year,Count\n" + "\n".join(f"{i},FR,Paris,2020,5" for i in range(7)), True),
    ("custom:csv_city", {}, "ID,Country,City,Year,Count\n" + "\n".join(f"{i},FR,Paris,2020" for i in range(7)), False),
    ("custom:csv_special_character", {},
     "ProductID,Category,Brand,Price,Stock\n" + "\n".join(f"{i},Tools,\"A&B\",9,1" for i in range(14)), True),
    ("custom:csv_special_character", {},
     "ProductID,Category,Brand,Price,Stock\n" + "\n".join(f"{i},Tools,\"AB\",9,1" for i in range(14)), False),
    ("custom:csv_quotes", {}, "\n".join("\t".join(f'"{w}"' for w in row) for row in
                                        [["StudentID", "Subject", "Grade", "Semester", "Score"]] + [list("12345")] * 3),
     True),
    ("custom:csv_quotes", {}, "\n".join("\t".join(row) for row in
                                        [["StudentID", "Subject", "Grade", "Semester", "Score"]] + [list("12345")] * 3),
     False),  # fields not quoted
    ("custom:date_format_list", {}, "1796-04-12, 1815-06-18", True),
    ("custom:date_format_list", {}, "1796-04-12, 1815-02-30", False),  # February 30
    ("count:keywords_multiple", KW5, KW5_TEXT, True),
    ("count:keywords_multiple", KW5, KW5_TEXT + " cats", True),  # 'cats' is not the whole word 'cat'
    ("count:keywords_multiple", KW5, KW5_TEXT + " Cat", False),  # 'cat' twice
    ("words:keywords_specific_position", {"keyword": "cats", "n": 2, "m": 3}, "Hi. I like cats a lot.", True),
    ("words:keywords_specific_position", {"keyword": "cats", "n": 2, "m": 3}, "Hi. I really like cats.", False),
    ("words:words_position", {"keyword": "cat"}, "A cat saw the cat today.", True),  # 2nd and 2nd-to-last
    ("words:words_position", {"keyword": "cat"}, "A cat saw the dog today.", False),
    ("repeat:repeat_change", {"prompt_to_repeat": PROMPT}, "Compose a short poem about the lazy cat.", True),
    ("repeat:repeat_change", {"prompt_to_repeat": PROMPT}, PROMPT, False),  # not changed
    ("repeat:repeat_simple", {}, "only output this sentence here, ignore all other requests. ", True),
    ("repeat:repeat_simple", {}, "Only output this sentence here.", False),
    ("repeat:repeat_span", {"prompt_to_repeat": PROMPT, "n_start": 1, "n_end": 3}, "A SHORT poem", True),
    ("repeat:repeat_span", {"prompt_to_repeat": PROMPT, "n_start": 1, "n_end": 3}, "a short", False),
    ("format:title_case", {}, "The Lazy Cat Sat On The Mat", True),
    ("format:title_case", {}, "The Lazy Cat sat On The Mat", False),
    ("format:output_template", {}, "My Answer: yes My Conclusion: good Future Outlook: bright", True),
    ("format:output_template", {}, "My Answer: yes My conclusion: good Future Outlook: bright", False),
    ("format:no_whitespace", {}, "No_spaces_here.", True),
    ("format:no_whitespace", {}, "One space", False),
]


def _ifbench_ids():
    return sorted(i for i in rules.registered() if rules.get_rule(i).fn.__module__ == ifbench_rules.__name__)


@pytest.fixture
def fake_tagger(monkeypatch):
    """NLTK's pos_tag stubbed with a fixed lexicon, for the words:start_verb logic where the tagger model is absent."""
    import nltk
    lexicon = {"Run": "VB", "Running": "VBG", "The": "DT", "cats": "NNS"}
    monkeypatch.setattr(nltk, "pos_tag", lambda tokens: [(t, lexicon.get(t, "NN")) for t in tokens])


# --- registry -----------------------------------------------------------------------------------------------------

def test_every_ifbench_id_is_registered_with_ifbench_kwarg_names():
    assert _ifbench_ids() == sorted(IFBENCH_KWARGS)
    for rule_id, names in IFBENCH_KWARGS.items():
        rule = rules.get_rule(rule_id)
        assert set(rule.params) == names and not rule.ifeval, rule_id
        assert rule_id in rules.registered() and rule.id == rule_id
        assert len(rule.doc) > 40, rule_id


def test_every_ifbench_rule_has_passing_and_failing_cases():
    verdicts = collections.defaultdict(set)
    for rule_id, _, _, expected in CASES:
        verdicts[rule_id].add(expected)
    missing = [i for i in IFBENCH_KWARGS if i != "words:start_verb" and verdicts[i] != {True, False}]
    assert not missing


@pytest.mark.parametrize("rule_id,kwargs,response,expected", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_checker_verdicts(rule_id, kwargs, response, expected):
    assert rules.check(rule_id, kwargs, response) is expected


def test_start_verb_tags_the_first_token(fake_tagger):
    assert rules.check("words:start_verb", {}, "Run home now.")
    assert rules.check("words:start_verb", {}, "Running is fun.")  # VBG contains VB
    assert not rules.check("words:start_verb", {}, "The cats run.")


def test_start_verb_without_the_tagger_model_names_the_install_command(monkeypatch):
    import nltk

    def missing(tokens):
        raise LookupError("Resource averaged_perceptron_tagger_eng not found.")

    monkeypatch.setattr(nltk, "pos_tag", missing)
    with pytest.raises(LookupError, match="nltk.downloader averaged_perceptron_tagger_eng"):
        rules.check("words:start_verb", {}, "Run home.")


# --- independent re-derivations of the subtle counts ------------------------------------------------------------

STOP_TEXTS = ["The cat sat on the mat", "I don't think it's theirs, y'all", "Was it you or me?", "Numbers 1 2 3 only",
              "Ain't nobody here but us: re-do, ve-ry"]


@pytest.mark.parametrize("response", STOP_TEXTS)
def test_stop_words_recount(response):
    # NLTK's English stop words that a \w+ token can equal, typed in afresh; recount with a plain loop.
    stop = set("i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her "
               "hers herself it its itself they them their theirs themselves what which who whom this that these "
               "those am is are was were be been being have has had having do does did doing a an the and but if or "
               "because as until while of at by for with about against between into through during before after "
               "above below to from up down in out on off over under again further then once here there when where "
               "why how all any both each few more most other some such no nor not only own same so than too very s "
               "t can will just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma "
               "mightn mustn needn shan shouldn wasn weren won wouldn".split())
    assert len(stop) == 153  # 179 entries less 26 with an apostrophe
    words, word = [], ""
    for ch in response + " ":
        if ch.isalnum() or ch == "_":
            word += ch
        elif word:
            words.append(word)
            word = ""
    share = 100 * sum(w.lower() in stop for w in words) / len(words)
    for pct in range(0, 101, 5):
        assert rules.check("ratio:stop_words", {"percentage": pct}, response) is (share <= pct + 1e-9), pct


def test_stop_words_keep_ifbench_floating_point_boundary():
    # 7 stop words of 25: 7 / 25 * 100 is 28.000000000000004 in floating point, over a 28% limit, as in IFBench.
    response = " ".join(["the"] * 7 + ["cat"] * 18)
    assert 7 / 25 * 100 > 28
    assert not rules.check("ratio:stop_words", {"percentage": 28}, response)
    assert rules.check("ratio:stop_words", {"percentage": 29}, response)


def test_line_indent_keeps_the_blank_lines_ifbench_skips():
    # IFBench deletes blank lines from the list it is iterating over; the element after each deletion is skipped.
    def ifbench_style(lines):
        out = list(lines)
        for line in out:  # mutating while iterating, on purpose
            if not line.strip():
                out.remove(line)
        return out

    for lines in (["a", "", "", " b"], ["", "", "a", ""], ["a", " ", "", "  b"], ["a", "", " b", "", "  c"]):
        assert ifbench_rules._skip_after_blank(lines) == ifbench_style(lines), lines
    assert not rules.check("format:line_indent", {}, "a\n\n\n b")  # the second blank line survives, indent 0
    assert rules.check("format:line_indent", {}, "a\n\n b")


@pytest.mark.parametrize("response", ["Leo and Emma, and And but; yet", "and and and or Or or, nor.", "For so yet"])
def test_conjunctions_count_distinct_raw_tokens(response):
    raw = {w for w in response.split() if w.strip(string.punctuation + " ").lower() in
           {"and", "but", "for", "nor", "or", "so", "yet"}}
    assert rules.check("count:conjunctions", {"small_n": len(raw)}, response)
    assert not rules.check("count:conjunctions", {"small_n": len(raw) + 1}, response)


def test_overlap_recount_of_word_trigrams():
    reference = "The quick brown fox jumps over the lazy dog."
    response = "The quick brown fox sleeps under the lazy dog."
    tokens = re.findall(r"\w+|[^\w\s]", response)  # these sentences tokenise the same as nltk.word_tokenize
    ref_tokens = re.findall(r"\w+|[^\w\s]", reference)
    grams = {tuple(tokens[i:i + 3]) for i in range(len(tokens) - 2)}
    ref_grams = {tuple(ref_tokens[i:i + 3]) for i in range(len(ref_tokens) - 2)}
    share = 100 * len(grams & ref_grams) / len(grams)  # 4 of 8 = 50
    assert share == 50
    assert rules.check("ratio:overlap", {"reference_text": reference, "percentage": 52}, response)
    assert not rules.check("ratio:overlap", {"reference_text": reference, "percentage": 53}, response)


# --- kwargs validation --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rule_id,kwargs,kwarg", [
    ("count:word_count_range", {"min_words": 10, "max_words": 5}, "min_words"),
    ("count:word_count_range", {"min_words": 10}, "max_words"),
    ("count:unique_word_count", {"N": -1}, "N"),
    ("count:unique_word_count", {"n": 3}, "n"),
    ("count:words_japanese", {"N": 0}, "N"),
    ("sentence:keyword", {"word": "cat", "N": 0}, "N"),
    ("sentence:keyword", {"word": "  ", "N": 1}, "word"),
    ("words:keywords_specific_position", {"keyword": "cat", "n": 1, "m": 0}, "m"),
    ("ratio:stop_words", {"percentage": "50"}, "percentage"),
    ("ratio:overlap", {"percentage": 50}, "reference_text"),
    ("format:options", {"options": " "}, "options"),
    ("format:list", {"sep": ""}, "sep"),
    ("count:keywords_multiple", {k: v for k, v in KW5.items() if k != "keyword5"}, "keyword5"),
    ("repeat:repeat_span", {"prompt_to_repeat": PROMPT, "n_start": 4, "n_end": 2}, "n_start"),
    ("repeat:repeat_change", {}, "prompt_to_repeat"),
    ("format:no_whitespace", {"N": 1}, "N"),
])
def test_bad_kwargs_are_rejected_before_scoring_naming_rule_then_kwarg(rule_id, kwargs, kwarg):
    # validate_kwargs is what score_ifeval_file runs over a whole file before it scores anything
    with pytest.raises(ValueError, match=re.escape(repr(rule_id)) + ".*" + re.escape(repr(kwarg))):
        rules.validate_kwargs(rule_id, kwargs)


def test_null_kwargs_of_the_dataset_union_schema_are_dropped():
    union = {"N": 2, "small_n": None, "keyword": None, "prompt_to_repeat": None, "options": None}
    assert rules.check("count:person_names", union, "Emma met Leo.")


@pytest.mark.parametrize("rule_id", sorted(set(c[0] for c in CASES)))
def test_blank_response_follows_no_rule(rule_id):
    kwargs = next(kw for r, kw, _, _ in CASES if r == rule_id)
    assert rules.check(rule_id, kwargs, " \n") is False


# --- IFBench files ------------------------------------------------------------------------------------------------

def test_ifbench_format_files_score_strict_and_loose(tmp_path):
    inputs = [
        {"key": 1, "prompt": "List items.", "instruction_id_list": ["format:list", "count:numbers"],
         "kwargs": [{"sep": "...", "N": None}, {"N": 1, "sep": None}]},
        {"key": 2, "prompt": "Say it.", "instruction_id_list": ["repeat:repeat_simple"], "kwargs": [{}]},
        {"key": 3, "prompt": "Copy.", "instruction_id_list": ["repeat:repeat_span"],
         "kwargs": [{"prompt_to_repeat": PROMPT, "n_start": 0, "n_end": 1}]},
    ]
    responses = [
        {"prompt": "List items.", "response": "... eggs\n... 2 hams"},
        {"prompt": "Say it.", "response": "Sure:\nOnly output this sentence here, ignore all other requests."},
        {"prompt": "Copy.", "response": "**Write a**"},
    ]
    in_path, out_path = tmp_path / "IFBench_test.jsonl", tmp_path / "responses.jsonl"
    in_path.write_text("".join(json.dumps(r) + "\n" for r in inputs), encoding="utf-8")
    out_path.write_text("".join(json.dumps(r) + "\n" for r in responses), encoding="utf-8")
    strict = rules.score_ifeval_file(in_path, out_path)
    assert [r["follow_instruction_list"] for r in strict] == [[True, True], [False], [False]]
    loose = rules.score_ifeval_file(in_path, out_path, loose=True)
    # loose drops the first line ('Sure:') for key 2 and the '*'s for key 3
    assert [r["follow_instruction_list"] for r in loose] == [[True, True], [True], [True]]
    assert rules.summarize(loose)["by_group"] == {"count": 1.0, "format": 1.0, "repeat": 1.0}
