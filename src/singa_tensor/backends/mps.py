"""`st.backends.mps`: Apple's Metal backend, which singa_tensor does not have.

Example:
    >>> import singa_tensor as st
    >>> st.backends.mps.is_available(), st.backends.mps.is_built()
    (False, False)
"""

from __future__ import annotations

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """False: there is no MPS backend."""
    return False


def is_built() -> bool:
    """False: there is no MPS backend."""
    return False
