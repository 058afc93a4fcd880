"""Why a call to the model gave nothing usable. Every use catches :class:`VLMError` and falls back.

Example:
    >>> isinstance(VLMTimeout("past the turn's deadline"), VLMUnavailable)
    True
"""

from __future__ import annotations

from minterpr.errors import MinterprError


class VLMError(MinterprError):
    """The model gave no usable answer; the caller falls back to the rule-based behaviour."""


class VLMUnavailable(VLMError):
    """The endpoint could not be reached or kept failing (connection, HTTP 429/5xx after the retries)."""


class VLMTimeout(VLMUnavailable):
    """No answer before the call's timeout or the turn's deadline."""


class VLMBudgetExceeded(VLMError):
    """The session's call or token budget is spent."""


class VLMBadAnswer(VLMError):
    """An answer that is not JSON, violates the schema, or names what the ontology lacks."""


class VLMRefused(VLMError):
    """The model declined to answer (a refusal, or a content filter)."""
