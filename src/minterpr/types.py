"""The data model: plain dataclasses with no I/O.

Everything that moves between minterpr's parts is one of these: a gallery image, a dialogue
(description, text Q&A turns, reference-image turns with corrective feedback) and a retrieval
sample (a target image and the dialogue that looks for it).

Person ids are strings namespaced by their source (``"peta-grid:0069"``, ``"cuhk-pedes:12004"``)
so that identities of different datasets never collide.

Example:
    >>> d = Dialogue(description="a man in a red jacket",
    ...              qa_turns=(QATurn("What colour were his shoes?", "white"),))
    >>> d.num_rounds
    2
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

# slot name -> values that hold (sorted); a slot that is absent is unknown.
# Single-valued slots (gender, age...) hold one value, multi-valued slots (colours, carried
# items) may hold several: {"upper_colour": ("black", "white")} means black *and* white.
Attributes = Mapping[str, tuple[str, ...]]


def person_id(namespace: str, local_id: object) -> str:
    """Return the namespaced person id ``"namespace:local"``.

    >>> person_id("peta-grid", "0069")
    'peta-grid:0069'
    """
    if not namespace or ":" in namespace:
        raise ValueError(f"person id namespace must be non-empty and contain no ':', got {namespace!r}")
    return f"{namespace}:{local_id}"


def split_person_id(pid: str) -> tuple[str, str]:
    """Split ``"namespace:local"`` into its two parts (inverse of :func:`person_id`)."""
    namespace, sep, local = pid.partition(":")
    if not sep or not namespace or not local:
        raise ValueError(f"not a namespaced person id: {pid!r} (expected 'namespace:local')")
    return namespace, local


@dataclass(frozen=True)
class GalleryImage:
    """One image in a gallery."""

    path: str  # image path, relative to the dataset's image root (or absolute)
    person_id: str  # namespaced identity, see person_id()
    camera_id: str | None = None  # camera that took it, namespaced like the person id
    view: str | None = None  # "front" / "back" / "side" when known
    attributes: Attributes | None = None  # ground-truth ontology attributes when known


@dataclass(frozen=True)
class QATurn:
    """A text turn: the system's question and the user's answer."""

    question: str
    answer: str


@dataclass(frozen=True)
class ReferenceTurn:
    """An image turn: the system shows a reference image, the user gives corrective feedback."""

    reference_path: str  # path of the reference image shown to the user
    feedback: str  # how the reference differs from (or matches) the person sought


@dataclass(frozen=True)
class DescriptionTurn:
    """A free-text turn: the initial description, or a later volunteered remark."""

    text: str


@dataclass(frozen=True)
class ExampleTurn:
    """Query by example: an image of the person sought (re-identification)."""

    image_path: str


# One step of a conversation, in the order the user gave them.
Turn = DescriptionTurn | QATurn | ReferenceTurn | ExampleTurn


@dataclass(frozen=True)
class Dialogue:
    """A multi-turn query: the initial description, then text turns, then image turns.

    Round 0 is the description alone; every turn after it adds one round.
    """

    description: str
    qa_turns: tuple[QATurn, ...] = ()
    reference_turns: tuple[ReferenceTurn, ...] = ()

    @property
    def num_rounds(self) -> int:
        """Number of rounds: the description plus one per turn."""
        return 1 + len(self.qa_turns) + len(self.reference_turns)

    def turns(self) -> tuple[Turn, ...]:
        """The turns in order: description, Q&A turns, reference turns (MInterPEDES order)."""
        return (DescriptionTurn(self.description), *self.qa_turns, *self.reference_turns)


@dataclass(frozen=True)
class RetrievalSample:
    """A target image and the dialogue that looks for it."""

    target_path: str  # the image sought (relative to the image root)
    person_id: str  # namespaced identity of the target
    dialogue: Dialogue
    extra: Mapping[str, object] = field(default_factory=dict)  # format-specific fields kept verbatim
