"""What was fitted after training and is stored with the model: the typed ``extra`` of a model file.

:class:`RunExtras` reads and writes a checkpoint's ``extra`` (a run's ``model.pt`` or an exported
model directory's ``extras.json``): the scoring chosen on the validation split
(:class:`~minterpr.interaction.reranking.RerankConfig`), the attribute calibration
(:class:`CalibrationRecord`), the record of the weight choice (:class:`WeightSelection`), the
match temperature (:class:`~minterpr.interaction.match.MatchCalibration`), the presence model
(:class:`~minterpr.interaction.presence.PresenceModel`) and the per-slot answer calibration
(:class:`~minterpr.interaction.slot_answers.SlotAnswers`); every other key is kept as written.
:func:`minterpr.runtime.run.load_run` reads it with the model; a malformed entry raises
:class:`~minterpr.errors.RunError` naming the file and the entry.

:data:`RECORDS` is the table: one row per record (the field of :class:`RunExtras`, the key in the
file, the record's class). Each record owns its ``from_dict`` (checks from :mod:`minterpr.records`,
``ValueError`` naming the field) and ``to_dict``; adding one is a class, a row and a field here
(docs/extending.md, "A third fitted record").

Example:
    >>> extras = RunExtras.from_dict({"scoring": {"attribute_weight": 0.1}, "epoch": 2})
    >>> extras.scoring.attribute_weight, extras.other, extras.to_dict()["epoch"]
    (0.1, {'epoch': 2}, 2)
    >>> RunExtras.from_dict({"calibration": []}, "m.pt")
    Traceback (most recent call last):
    minterpr.errors.RunError: m.pt: malformed extra 'calibration': a list, not a dict
"""

from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from minterpr.errors import RunError
from minterpr.interaction.match import MatchCalibration
from minterpr.interaction.presence import PresenceModel
from minterpr.interaction.reranking import RerankConfig
from minterpr.interaction.slot_answers import SlotAnswers
from minterpr.records import Unusable, finite, mapping, number_map, split_name

SELECTED_KEYS = ("stage", "epoch", "selection_metric", "value")  # how training selected the weights


@dataclass(frozen=True)
class CalibrationRecord:
    """Per-slot attribute temperatures fitted after training (extra ``"calibration"``)."""

    split: str  # the split they were fitted on (the selection split, never test)
    temperatures: dict[str, float]  # slot -> temperature T (logits / T); slots absent keep T = 1
    nll_before: float  # summed per-slot negative log-likelihood on the split before fitting
    nll_after: float  # the same with the fitted temperatures
    # label ("slot:value") -> ROC AUC (%) of the calibrated probabilities on the split; labels without
    # positives or negatives there are absent; empty in records written before it was stored
    label_auc: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CalibrationRecord":
        """The record of :meth:`to_dict`; ValueError naming the field that is missing or wrong."""
        data = mapping(data)
        return cls(
            split_name(data.get("split")),
            number_map(data.get("temperatures"), "temperatures", "slot names"),
            finite(data.get("nll_before"), "nll_before"),
            finite(data.get("nll_after"), "nll_after"),
            # absent in records written before label AUCs were stored
            number_map(data.get("label_auc", {}), "label_auc", "label names"),
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if not self.label_auc:  # an old record is written back as it was read
            del out["label_auc"]
        return out


@dataclass(frozen=True)
class WeightSelection:
    """How the attribute weight of the scoring was chosen (extra ``"scoring_selection"``)."""

    split: str  # the split the weights were tried on (never test)
    r1_last_by_weight: dict[str, float]  # str(weight) -> R@1 (%) after the last round

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WeightSelection":
        """The record of :meth:`to_dict`; ValueError naming the field that is missing or wrong."""
        data = mapping(data)
        tried = mapping(data.get("r1_last_by_weight"), "r1_last_by_weight")
        return cls(
            split_name(data.get("split")),
            number_map({str(w): r for w, r in tried.items()}, "r1_last_by_weight", "weights"),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Record:
    """One row of :data:`RECORDS`: a fitted record stored with the model."""

    field: str  # its field in RunExtras
    key: str  # its key in the model file's extra (and extras.json)
    type: Any  # its class: from_dict(Mapping) (ValueError or TypeError when malformed, Unusable) and to_dict()
    refit: str = ""  # the command that refits it, named when a stored one is Unusable here


# read and written in this order; every other key of the extra is kept as written
RECORDS = (
    Record("scoring", "scoring", RerankConfig),
    Record("calibration", "calibration", CalibrationRecord),
    Record("selection", "scoring_selection", WeightSelection),
    Record("match", "match_calibration", MatchCalibration, "minterpr calibrate match"),
    Record("presence", "presence_model", PresenceModel, "minterpr calibrate presence"),
    Record("slot_answers", "slot_answers", SlotAnswers, "minterpr calibrate slots"),
)


@dataclass(frozen=True)
class RunExtras:
    """The typed ``extra`` of a model file; :meth:`from_dict` / :meth:`to_dict` round-trip it."""

    scoring: RerankConfig | None = None  # "scoring": chosen on the validation split; None = not stored
    calibration: CalibrationRecord | None = None  # "calibration"; None = uncalibrated
    selection: WeightSelection | None = None  # "scoring_selection"; None = the weight was not chosen
    # "match_calibration": the page's match temperature fitted on validation searches (minterpr
    # calibrate match); None = not fitted, the policies' TEMPERATURE
    match: MatchCalibration | None = None
    # "presence_model": "probably not in this footage", fitted on validation searches whose target is
    # present or removed (minterpr calibrate presence); None = not fitted, the rulings-out estimate
    presence: PresenceModel | None = None
    # "slot_answers": per-slot answer calibration fitted on the validation split (minterpr calibrate
    # slots): which value a slot is answered with, or "unsure"; None = the raw most probable value
    slot_answers: SlotAnswers | None = None
    other: dict[str, Any] = field(default_factory=dict)  # every other key, kept as written (stage, epoch, ...)

    @classmethod
    def from_dict(cls, extra: Mapping[str, Any] | None, source: str | os.PathLike[str] = "model file") -> "RunExtras":
        """Parse a checkpoint's ``extra``; a malformed entry raises :class:`RunError` naming it. A
        well-formed record this minterpr cannot use is kept in ``other`` as written, with a warning."""
        other = dict(extra or {})
        records: dict[str, Any] = {}
        for row in RECORDS:
            stored = other.pop(row.key, None)
            if stored is not None:
                records[row.field] = _read(row, stored, source)
                if records[row.field] is None:  # unusable here: kept as written, unused
                    other[row.key] = stored
        return cls(**records, other=other)

    def to_dict(self) -> dict[str, Any]:
        """The ``extra`` dict to store (plain data)."""
        out = dict(self.other)
        for row in RECORDS:
            record = getattr(self, row.field)
            if record is not None:
                out[row.key] = record.to_dict()
        return out

    @staticmethod
    def row_of(record: Any) -> Record:
        """The row of :data:`RECORDS` whose class ``record`` is; TypeError for anything else."""
        for row in RECORDS:
            if type(record) is row.type:
                return row
        raise TypeError(
            f"a {type(record).__name__} is not a record stored with a model "
            f"(known: {', '.join(row.type.__name__ for row in RECORDS)})"
        )

    def match_temperature(self) -> float:
        """The temperature of the match sessions show: the fitted one, else the policies' default."""
        from minterpr.interaction.policies import TEMPERATURE

        return self.match.temperature if self.match is not None else TEMPERATURE

    def rerank_config(self) -> RerankConfig:
        """How this model scores, in static evaluation and in sessions alike: the stored scoring
        (attribute weight, probability floor, ...), else the defaults."""
        return self.scoring if self.scoring is not None else RerankConfig()

    def model_selection(self) -> dict[str, Any]:
        """How training selected these weights: stage, epoch, selection metric and its value."""
        return {k: self.other[k] for k in SELECTED_KEYS if k in self.other}


def _read(row: Record, stored: Any, source: str | os.PathLike[str]) -> Any:
    """The record of ``row`` stored as ``stored``; None (with a warning) for one this minterpr cannot
    use; :class:`RunError` naming the file and the entry for a malformed one."""
    try:
        return row.type.from_dict(mapping(stored))
    except Unusable as err:
        logging.getLogger(__name__).warning(
            "%s: extra %r ignored: %s (refit it with %s)", os.fspath(source), row.key, err, row.refit
        )
        return None
    except (TypeError, ValueError) as err:
        raise RunError(source, f"malformed extra {row.key!r}: {err}") from None
