"""What was fitted after training and is stored with the model: the typed ``extra`` of a model file.

:class:`RunExtras` reads and writes a checkpoint's ``extra`` (a run's ``model.pt`` or an exported
model directory's ``extras.json``): the scoring chosen on the validation split
(:class:`~minterpr.interaction.reranking.RerankConfig`), the attribute calibration
(:class:`CalibrationRecord`), the record of the weight choice (:class:`WeightSelection`), the
match temperature (:class:`~minterpr.interaction.match.MatchCalibration`) and the presence model
(:class:`~minterpr.interaction.presence.PresenceModel`); every other key is kept as written.
:func:`minterpr.runtime.run.load_run` reads it with the model; a malformed entry raises
:class:`~minterpr.errors.RunError` naming the file and the entry.

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
import math
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from minterpr.errors import RunError
from minterpr.interaction.match import MatchCalibration
from minterpr.interaction.presence import OtherFeatures, PresenceModel
from minterpr.interaction.reranking import RerankConfig

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


@dataclass(frozen=True)
class WeightSelection:
    """How the attribute weight of the scoring was chosen (extra ``"scoring_selection"``)."""

    split: str  # the split the weights were tried on (never test)
    r1_last_by_weight: dict[str, float]  # str(weight) -> R@1 (%) after the last round


@dataclass(frozen=True)
class RunExtras:
    """The typed ``extra`` of a model file; :meth:`from_dict` / :meth:`to_dict` round-trip it."""

    scoring: RerankConfig | None = None  # "scoring": chosen on the validation split; None = not stored
    calibration: CalibrationRecord | None = None  # "calibration"; None = uncalibrated
    selection: WeightSelection | None = None  # "scoring_selection"; None = the weight was not chosen
    # "match_calibration": the page's match temperature fitted on validation searches (minterpr
    # calibrate-match); None = not fitted, the policies' TEMPERATURE
    match: MatchCalibration | None = None
    # "presence_model": "probably not in this footage", fitted on validation searches whose target is
    # present or removed (minterpr calibrate-presence); None = not fitted, the rulings-out estimate
    presence: PresenceModel | None = None
    other: dict[str, Any] = field(default_factory=dict)  # every other key, kept as written (stage, epoch, ...)

    @classmethod
    def from_dict(cls, extra: Mapping[str, Any] | None, source: str | os.PathLike[str] = "model file") -> "RunExtras":
        """Parse a checkpoint's ``extra``; a malformed entry raises :class:`RunError` naming it."""
        extra = dict(extra or {})
        scoring = extra.pop("scoring", None)
        calibration = extra.pop("calibration", None)
        selection = extra.pop("scoring_selection", None)
        match = extra.pop("match_calibration", None)
        stored = extra.pop("presence_model", None)
        presence = None if stored is None else _presence(stored, source)
        if stored is not None and presence is None:  # fitted on another feature set: kept as written, unused
            extra["presence_model"] = stored
        return cls(None if scoring is None else _scoring(scoring, source),
                   None if calibration is None else _calibration(calibration, source),
                   None if selection is None else _selection(selection, source),
                   None if match is None else _match(match, source),
                   presence, extra)

    def to_dict(self) -> dict[str, Any]:
        """The ``extra`` dict to store (plain data)."""
        out = dict(self.other)
        if self.scoring is not None:
            out["scoring"] = self.scoring.to_dict()
        if self.calibration is not None:
            out["calibration"] = dataclasses.asdict(self.calibration)
            if not self.calibration.label_auc:  # an old record is written back as it was read
                del out["calibration"]["label_auc"]
        if self.selection is not None:
            out["scoring_selection"] = dataclasses.asdict(self.selection)
        if self.match is not None:
            out["match_calibration"] = self.match.to_dict()
        if self.presence is not None:
            out["presence_model"] = self.presence.to_dict()
        return out

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


def _entry(value: Any, key: str, source: str | os.PathLike[str]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise RunError(source, f"malformed extra {key!r}: a {type(value).__name__}, not a dict")
    return dict(value)


def _number(value: Any, what: str, source: str | os.PathLike[str]) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise RunError(source, f"malformed extra {what}: {value!r} is not a finite number")
    return float(value)


def _split(value: Any, what: str, source: str | os.PathLike[str]) -> str:
    if not isinstance(value, str):
        raise RunError(source, f"malformed extra {what}: {value!r} is not a split name")
    return value


def _scoring(value: Any, source: str | os.PathLike[str]) -> RerankConfig:
    data = _entry(value, "scoring", source)
    try:
        return RerankConfig.from_dict(data)
    except (TypeError, ValueError) as err:
        raise RunError(source, f"malformed extra 'scoring': {err}") from None


def _calibration(value: Any, source: str | os.PathLike[str]) -> CalibrationRecord:
    data = _entry(value, "calibration", source)
    temperatures = data.get("temperatures")
    if not isinstance(temperatures, Mapping) or not all(isinstance(k, str) for k in temperatures):
        raise RunError(source, "malformed extra 'calibration': 'temperatures' must map slot names to numbers")
    fitted = {k: _number(t, f"'calibration' temperature of {k!r}", source) for k, t in temperatures.items()}
    auc = data.get("label_auc", {})  # absent in records written before label AUCs were stored
    if not isinstance(auc, Mapping) or not all(isinstance(k, str) for k in auc):
        raise RunError(source, "malformed extra 'calibration': 'label_auc' must map label names to numbers")
    return CalibrationRecord(_split(data.get("split"), "'calibration' split", source), fitted,
                             _number(data.get("nll_before"), "'calibration' nll_before", source),
                             _number(data.get("nll_after"), "'calibration' nll_after", source),
                             {k: _number(v, f"'calibration' label_auc of {k!r}", source) for k, v in auc.items()})


def _match(value: Any, source: str | os.PathLike[str]) -> MatchCalibration:
    try:
        return MatchCalibration.from_dict(_entry(value, "match_calibration", source))
    except ValueError as err:
        raise RunError(source, f"malformed extra 'match_calibration': {err}") from None


def _presence(value: Any, source: str | os.PathLike[str]) -> PresenceModel | None:
    """The record, or None (with a warning) for one fitted on another feature set: the page then keeps
    the rulings-out estimate until ``minterpr calibrate-presence`` fits this version's."""
    try:
        return PresenceModel.from_dict(_entry(value, "presence_model", source))
    except OtherFeatures as err:
        import logging

        logging.getLogger(__name__).warning("%s: extra 'presence_model' ignored: %s (refit it with minterpr "
                                            "calibrate-presence)", os.fspath(source), err)
        return None
    except ValueError as err:
        raise RunError(source, f"malformed extra 'presence_model': {err}") from None


def _selection(value: Any, source: str | os.PathLike[str]) -> WeightSelection:
    data = _entry(value, "scoring_selection", source)
    tried = data.get("r1_last_by_weight")
    if not isinstance(tried, Mapping):
        raise RunError(source, "malformed extra 'scoring_selection': no 'r1_last_by_weight' dict")
    return WeightSelection(_split(data.get("split"), "'scoring_selection' split", source),
                           {str(w): _number(r, f"'scoring_selection' R@1 of weight {w}", source)
                            for w, r in tried.items()})
