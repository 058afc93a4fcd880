"""Near-twins: copies of a synthetic identity that differ in exactly one visible slot, and populations with them.

A near-twin differs from its source in one slot (a colour, the bag, the shoes...), so that a short
description matches both and only interaction (a question, a reference image) can tell them apart.

Example:
    >>> import numpy as np
    >>> people, twin_of = sample_population_with_twins(10, np.random.default_rng(1), twin_fraction=0.3)
    >>> sum(t is not None for t in twin_of)
    3
"""

from __future__ import annotations

import numpy as np

# the frequencies twins draw their replacement values from are the identities' own
from minterpr.data.synthetic.identities import (
    ACCESSORY_FREQ,
    CARRIED_FREQ,
    COLOUR_FREQ,
    DRESS_BODICES,
    HAIR_COLOUR_FREQ,
    Attrs,
    sample_identity,
    weighted_pick,
)
from minterpr.language.ontology import ONTOLOGY

# Slots a near-twin may differ in: all clearly visible in at least one view.
TWIN_SLOTS = (
    "upper_colour",
    "lower_colour",
    "footwear_colour",
    "carried",
    "hair_colour",
    "headwear",
    "accessories",
    "upper_pattern",
    "footwear_type",
)


def _twin_values(rng: np.random.Generator, attrs: Attrs, slot: str) -> tuple[str, ...] | None:
    """A plausible replacement for ``attrs[slot]`` that differs from it, or None when there is none."""
    current = attrs[slot]
    if (
        slot in ("upper_colour", "lower_colour", "upper_pattern")
        and attrs["lower_type"] == ("dress",)
        and attrs["upper_type"][0] in DRESS_BODICES
    ):
        return None  # a dress's colours and pattern are shared by the upper and lower slots
    if slot in ("upper_colour", "lower_colour", "footwear_colour", "hair_colour"):
        if slot == "hair_colour" and attrs["hair_length"] == ("bald",):
            return None  # a bald twin with other hair colour would be invisible
        base = HAIR_COLOUR_FREQ if slot == "hair_colour" else COLOUR_FREQ
        i = int(rng.integers(len(current)))  # replace one of the colours
        others = {k: v for k, v in base.items() if k not in current}
        return current[:i] + (weighted_pick(rng, others),) + current[i + 1 :]
    if slot == "carried":
        options = {
            k: v for k, v in CARRIED_FREQ.items() if (k,) != current and k not in ("baby_buggy", "shopping_trolley")
        }
        return (weighted_pick(rng, options),)
    if slot == "headwear":
        return ("none",) if current != ("none",) else ("hat",)
    if slot == "accessories":
        options = {k: v for k, v in ACCESSORY_FREQ.items() if k != "none" and (k,) != current and k != "shawl"}
        return ("none",) if current != ("none",) and rng.random() < 0.5 else (weighted_pick(rng, options),)
    if slot == "upper_pattern":
        options = {"plain": 1.0, "logo": 1.0, "thick_stripes": 1.0, "plaid": 1.0}
        options.pop(current[0], None)
        return (weighted_pick(rng, options),)
    if slot == "footwear_type":
        if current[0] in ("stockings", "sandals"):
            return None  # a swap would break the footwear colour correlations
        options = {k: 1.0 for k in ("sneakers", "shoes", "boots", "leather_shoes") if k != current[0]}
        return (weighted_pick(rng, options),)
    raise ValueError(f"slot {slot!r} cannot make a twin: must be one of {', '.join(TWIN_SLOTS)}")


def make_twin(attrs: Attrs, rng: np.random.Generator) -> Attrs:
    """Copy ``attrs`` with exactly one visible slot (see :data:`TWIN_SLOTS`) changed."""
    for _ in range(50):
        slot = TWIN_SLOTS[int(rng.integers(len(TWIN_SLOTS)))]
        values = _twin_values(rng, attrs, slot)
        if values is not None and tuple(sorted(values)) != attrs[slot]:
            return ONTOLOGY.validate({**attrs, slot: values})
    raise RuntimeError("no twin slot applies")  # unreachable: upper_colour always applies


def sample_population_with_twins(
    n: int, rng: np.random.Generator, *, twin_fraction: float = 0.3
) -> tuple[list[Attrs], list[int | None]]:
    """Draw ``n`` identities of which ``round(n * twin_fraction)`` are near-twins of another.

    Returns the identities and, for each, the index of the identity it was copied from
    (None for independent ones). Twins are spread through the list, not adjacent.
    """
    if n < 0 or not 0.0 <= twin_fraction <= 0.5:
        raise ValueError(f"need n >= 0 and 0 <= twin_fraction <= 0.5, got n={n}, twin_fraction={twin_fraction}")
    n_twins = int(round(n * twin_fraction))
    bases = [sample_identity(rng) for _ in range(n - n_twins)]
    # each base has at most one twin, so a pair is the whole ambiguity set
    sources = rng.choice(len(bases), size=n_twins, replace=False) if n_twins else np.zeros(0, dtype=int)
    people = bases + [make_twin(bases[int(s)], rng) for s in sources]
    source_of: list[int | None] = [None] * len(bases) + [int(s) for s in sources]
    order = rng.permutation(n)  # new position -> old position
    new_index = np.empty(n, dtype=int)
    new_index[order] = np.arange(n)
    shuffled = [people[int(o)] for o in order]
    twin_of = [None if source_of[int(o)] is None else int(new_index[source_of[int(o)]]) for o in order]
    return shuffled, twin_of


def sample_population(n: int, rng: np.random.Generator, *, twin_fraction: float = 0.3) -> list[Attrs]:
    """Draw ``n`` identities, ``twin_fraction`` of them near-twins (one slot different) of another.

    >>> import numpy as np
    >>> len(sample_population(20, np.random.default_rng(0)))
    20
    """
    return sample_population_with_twins(n, rng, twin_fraction=twin_fraction)[0]
