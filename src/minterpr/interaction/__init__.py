"""The conversation: interactive sessions, question / reference policies, re-ranking, user simulators.

Example:
    >>> from minterpr.interaction import AttributeBackend, Session
    >>> from minterpr.types import GalleryImage
    >>> images = [GalleryImage("a.jpg", "x:1", attributes={"gender": ("male",)}),
    ...           GalleryImage("b.jpg", "x:2", attributes={"gender": ("female",)})]
    >>> backend = AttributeBackend()
    >>> step = Session(backend, backend.index_images(images)).describe("a woman")
    >>> images[int(step.ranking[0])].path
    'b.jpg'
"""

from minterpr.interaction.attribute_backend import AttributeBackend, noisy_attribute_probs
from minterpr.interaction.explain import Explanation, explain_image
from minterpr.interaction.policies import QUESTION_POLICIES, REFERENCE_POLICIES
from minterpr.interaction.schedule import SCHEDULES, Schedule, make_schedule
from minterpr.interaction.reranking import RerankConfig, rerank
from minterpr.interaction.session import Action, AskQuestion, HistoryEntry, Session, ShowReferences, Step
from minterpr.interaction.simulators import SIMULATORS

__all__ = [
    "Action",
    "AskQuestion",
    "AttributeBackend",
    "Explanation",
    "HistoryEntry",
    "QUESTION_POLICIES",
    "REFERENCE_POLICIES",
    "RerankConfig",
    "SCHEDULES",
    "SIMULATORS",
    "Schedule",
    "Session",
    "ShowReferences",
    "Step",
    "explain_image",
    "make_schedule",
    "noisy_attribute_probs",
    "rerank",
]
