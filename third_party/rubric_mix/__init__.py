"""Rubric-Mix-10k (HarnessRL, sec. 5.1): one converter per public source, each turning that source's released files into
harnessrl_jax task records; `launch/build_rubric_mix.py` mixes, deduplicates and splits them.

    SOURCES[name].convert(folder) -> iterator of rubric.schema.Task      (domain set, id prefixed by the source)

Each source folder has a README naming the source, the release read and its licence. Nothing downloads: the
release files are placed under <sources_dir>/<name>/ by hand.
"""

from third_party.rubric_mix import healthbench, longwriter_zero, rar, researchqa, rubrichub
from third_party.rubric_mix.common import ConversionError

# name -> converter module; the folder under --sources_dir has the same name.
SOURCES = {
    "healthbench": healthbench,
    "rar_medicine": rar.medicine,
    "rar_science": rar.science,
    "researchqa": researchqa,
    "rubrichub": rubrichub,
    "longwriter_zero": longwriter_zero,
}

__all__ = ["ConversionError", "SOURCES"]
