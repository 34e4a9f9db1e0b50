"""Shakespeare's sonnets as one string, the corpus of the character-level language models.

The text is Sonnets I-LI by William Shakespeare (1609), public domain, as modernised in the
Project Gutenberg edition. It ships inside the package (`singa_tensor/datasets/data/`) and is
read through importlib.resources, so it is found the same way from a wheel, a regular install
and a source checkout, whatever the working directory.
"""

from __future__ import annotations

from importlib import resources

_PACKAGE = "singa_tensor.datasets"


def load_sonnets() -> str:
    """Sonnets I-LI by William Shakespeare (1609), public domain: 31,787 characters of plain
    ASCII text with 59 distinct characters, the sonnets numbered in Roman numerals.

    Example:
        >>> from singa_tensor.datasets import load_sonnets
        >>> text = load_sonnets()
        >>> text.splitlines()[:2]
        ['THE SONNETS', 'by William Shakespeare']
        >>> len(text), len(set(text)), "Shall I compare thee to a summer's day?" in text
        (31787, 59, True)
    """
    source = resources.files(_PACKAGE) / "data" / "sonnets.txt"
    if not source.is_file():
        raise FileNotFoundError(f"load_sonnets: the text is missing from the installed package "
                                f"(looked for {source}); reinstall singa_tensor")
    return source.read_text(encoding="utf-8")
