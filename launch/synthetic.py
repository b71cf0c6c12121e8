"""Synthetic Rubric-Mix-like text for the memory benchmarks (launch/bench_memory.py, launch/bench_scale.py):
criterion texts from templates of its domains, and responses of pseudo-words with Zipf frequencies, which zlib
compresses about as well as English prose."""

from __future__ import annotations

import numpy as np

DOMAINS = {
    "medical": ["hypertension", "type 2 diabetes", "ibuprofen dosing", "a migraine", "chest pain", "asthma inhalers",
                "iron deficiency", "a sprained ankle", "antibiotic resistance", "sleep apnea", "a child's fever",
                "statin side effects", "seasonal allergies", "lower back pain", "vitamin D levels", "a skin rash"],
    "science": ["cellulose", "photosynthesis", "plate tectonics", "the Krebs cycle", "entropy", "enzyme kinetics",
                "ocean acidification", "black holes", "CRISPR editing", "the water cycle", "semiconductors",
                "natural selection", "buffer solutions", "radioactive decay", "protein folding", "lightning"],
    "writing": ["the opening paragraph", "the thesis statement", "the closing line", "the dialogue", "the imagery",
                "the argument", "the counterargument", "the story's pacing", "the narrator's voice", "the metaphor",
                "the cover letter", "the product description", "the summary", "the poem's rhyme", "the headline"],
    "roleplay": ["the pirate captain", "the detective", "the medieval innkeeper", "the starship engineer",
                 "the grumpy wizard", "the tour guide", "the customer support agent", "the chess coach",
                 "the museum curator", "the time traveller", "the barista", "the haunted house ghost"],
}
VERBS = ["Mentions that", "States that", "Explains that", "Notes that", "Clarifies that", "Emphasizes that",
         "Points out that", "Correctly says that", "Acknowledges that", "Makes clear that", "Accurately notes that"]
FACTS = ["{t} is often misunderstood by {a}", "{t} should be discussed with {a} before {b}",
         "{t} depends strongly on {b}", "{t} can be made worse by {b}", "the main risk with {t} is {b}",
         "{t} is not a substitute for {b}", "{a} should monitor {t} closely during {b}",
         "{t} usually improves with {b}", "{t} differs from {b} in an important way",
         "the evidence on {t} and {b} is mixed", "{t} needs to be explained to {a} in plain words",
         "{b} is the first thing to check about {t}"]
AUDIENCES = ["patients", "beginners", "students", "older adults", "parents", "caregivers", "experts", "readers",
             "new employees", "the user", "children", "non-native speakers"]
OBJECTS = ["regular exercise", "dietary changes", "a follow-up visit", "the dose", "temperature", "humidity",
           "prior knowledge", "the context", "the audience", "a second opinion", "long-term use", "the pH",
           "the time of day", "the source material", "the character's backstory", "emergency care", "safety rules",
           "the word limit", "a concrete example", "the underlying mechanism"]
CONSTRAINTS = ["Keeps the response under {n} words", "Uses exactly {n} bullet points", "Writes at least {n} sentences",
               "Includes {n} concrete examples", "Stays in character for all {n} turns",
               "Ends with a question and uses fewer than {n} words", "Mentions the keyword {w} at least {n} times",
               "Does not use the word {w} more than {n} times", "Splits the answer into {n} titled sections"]


def synthetic_texts(n: int, rng) -> list[str]:
    """n distinct criterion texts in the style of Rubric-Mix's domains."""
    topics = [t for ts in DOMAINS.values() for t in ts]
    words = [w for t in topics for w in t.split() if len(w) > 4]
    out, seen = [], set()
    while len(out) < n:
        if rng.random() < 0.8:
            t = VERBS[rng.integers(len(VERBS))] + " " + FACTS[rng.integers(len(FACTS))].format(
                t=topics[rng.integers(len(topics))], a=AUDIENCES[rng.integers(len(AUDIENCES))],
                b=OBJECTS[rng.integers(len(OBJECTS))])
        else:
            t = CONSTRAINTS[rng.integers(len(CONSTRAINTS))].format(n=int(rng.integers(2, 400)),
                                                                  w=repr(words[rng.integers(len(words))]))
        if t not in seen:
            seen.add(t)
            out.append(t)
    return out


class ZipfText:
    """Responses as slices of one long stream of pseudo-words with Zipf frequencies: distinct, about as
    compressible as prose, and free to cut (`words` words each, ~5.6 characters per word with its space)."""

    def __init__(self, rng, n_words: int = 2_000_000, vocab: int = 20_000):
        letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
        words = ["".join(letters[np.minimum(rng.geometric(0.25, rng.integers(2, 9)) - 1, 25)]) for _ in range(vocab)]
        zipf = 1.0 / np.arange(1, vocab + 1) ** 1.05
        self.text = " ".join(words[i] for i in rng.choice(vocab, n_words, p=zipf / zipf.sum()))
        self.rng = rng

    def responses(self, n: int, words: int) -> tuple[str, ...]:
        chars = int(words * 5.6)
        return tuple(self.text[o:o + chars] for o in self.rng.integers(0, len(self.text) - chars, n))
