"""The one JSON shape every evaluation command writes, with tables and a per-round plot.

Shape (metrics in percent, extra keys allowed at both levels)::

    {"protocol": {"dataset": ..., ...},
     "rounds": [{"round": 0, "r1": .., "r5": .., "r10": .., "mAP": .., "mINP": ..,
                 "hits1": .., "hits10": .., ...}, ...],
     "bri": ..,
     ...}

Round r is the description plus r turns; ``r*``/``mAP``/``mINP`` describe that round alone,
``hits*`` are cumulative (see :func:`minterpr.evaluation.dialogue_metrics.per_round_metrics`).

Example:
    >>> rep = EvaluationReport(protocol={"dataset": "toy"}, bri=0.35, rounds=[
    ...     {"round": 0, "r1": 50.0, "r5": 100.0, "r10": 100.0, "mAP": 51.25, "mINP": 40.0,
    ...      "hits1": 50.0, "hits10": 100.0}])
    >>> EvaluationReport.from_json(rep.to_json()) == rep
    True
    >>> print(format_table(rep).splitlines()[1])
        0   50.00  100.00  100.00   51.25   40.00   50.00  100.00
"""

from __future__ import annotations

import copy
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from minterpr.data.errors import DataError
from minterpr.data.formats.safejson import JSONProblem, loads
from minterpr.fileio import atomic_open, atomic_write

TOP_KEYS = ("protocol", "rounds", "bri")  # required top-level keys
PERCENT_KEYS = ("r1", "r5", "r10", "mAP", "mINP", "hits1", "hits10")  # required in every round
TABLE_COLUMNS = ("r1", "r5", "r10", "mAP", "mINP", "hits1", "hits10")  # format_table columns
_LABELS = {
    "r1": "R@1",
    "r5": "R@5",
    "r10": "R@10",
    "mAP": "mAP",
    "mINP": "mINP",
    "bri": "BRI",
    "mean_first_hit_rank": "mean first-hit rank",
    "mean_best_log_rank": "mean ln(best rank + 1)",
}


def metric_label(key: str) -> str:
    """Display name of a metric key: ``"r1"`` -> ``"R@1"``, ``"hits10"`` -> ``"Hits@10"``."""
    hits = re.fullmatch(r"hits(\d+)", key)
    return f"Hits@{hits.group(1)}" if hits else _LABELS.get(key, key)


def _is_number(value: Any) -> bool:
    # plain Python numbers only: numpy scalars are converted by build_report, bools are a bug
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _validate(report: EvaluationReport) -> None:
    protocol = report.protocol
    if not isinstance(protocol, dict) or not all(isinstance(k, str) for k in protocol):
        raise ValueError("evaluation report: 'protocol' must be a dict with string keys")
    if not isinstance(report.rounds, list) or not report.rounds:
        raise ValueError("evaluation report: 'rounds' must be a non-empty list of dicts")
    for i, row in enumerate(report.rounds):
        where = f"evaluation report: rounds[{i}]"
        if not isinstance(row, dict):
            raise ValueError(f"{where} must be a dict, got {type(row).__name__}")
        r = row.get("round")
        if not (isinstance(r, int) and not isinstance(r, bool) and r == i):
            raise ValueError(f'{where} must have "round": {i} (rounds are numbered 0, 1, ... in order), got {r!r}')
        for key in PERCENT_KEYS:
            if key not in row:
                raise ValueError(f"{where} is missing {key!r} (required: {', '.join(PERCENT_KEYS)})")
            value = row[key]
            if not _is_number(value) or not 0.0 <= value <= 100.0:
                raise ValueError(f"{where}[{key!r}] must be a percentage in [0, 100], got {value!r}")
    if not _is_number(report.bri) or not math.isfinite(report.bri) or report.bri < 0:
        raise ValueError(f"evaluation report: 'bri' must be a finite number >= 0, got {report.bri!r}")
    if not isinstance(report.extra, dict) or not all(isinstance(k, str) for k in report.extra):
        raise ValueError("evaluation report: 'extra' must be a dict with string keys")
    clash = sorted(set(report.extra) & set(TOP_KEYS))
    if clash:
        raise ValueError(f"evaluation report: extra keys {clash} clash with the required keys")
    try:
        json.dumps(report.to_dict(), allow_nan=False)
    except (TypeError, ValueError) as err:
        raise ValueError(f"evaluation report is not plain JSON (NaN, inf or a non-JSON type): {err}") from err


@dataclass
class EvaluationReport:
    """Results of one evaluation run; validated on construction.

    Example:
        >>> EvaluationReport(protocol={}, rounds=[], bri=0.0)
        Traceback (most recent call last):
        ...
        ValueError: evaluation report: 'rounds' must be a non-empty list of dicts
    """

    protocol: dict[str, Any]  # how the numbers were made: dataset, split, model, seed, ...
    rounds: list[dict[str, Any]]  # one dict per round 0..T with at least PERCENT_KEYS
    bri: float  # best log-rank integral (PlugIR), lower is better
    extra: dict[str, Any] = field(default_factory=dict)  # other top-level keys, e.g. num_queries

    def __post_init__(self) -> None:
        _validate(self)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape: protocol, rounds, bri, then the extra keys at top level (a copy)."""
        return copy.deepcopy({"protocol": self.protocol, "rounds": self.rounds, "bri": self.bri, **self.extra})

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EvaluationReport:
        """Inverse of :meth:`to_dict`; unknown top-level keys become ``extra``."""
        if not isinstance(data, Mapping):
            raise ValueError(f"evaluation report must be a JSON object, got {type(data).__name__}")
        missing = [k for k in TOP_KEYS if k not in data]
        if missing:
            raise ValueError(f"evaluation report is missing {missing} (required keys: {', '.join(TOP_KEYS)})")
        data = copy.deepcopy(dict(data))
        return cls(protocol=data.pop("protocol"), rounds=data.pop("rounds"), bri=data.pop("bri"), extra=data)

    @classmethod
    def from_json(cls, text: str) -> EvaluationReport:
        """Parse and validate a report; ValueError says what is wrong. Plain JSON only, nested
        at most :data:`~minterpr.data.formats.safejson.MAX_JSON_DEPTH` deep (see that module)."""
        try:
            data = loads(text)
        except JSONProblem as err:
            where = f" (line {err.line})" if err.line else ""
            raise ValueError(f"evaluation report is not valid JSON{where}: {err.reason}") from None
        return cls.from_dict(data)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the JSON atomically (:func:`minterpr.fileio.atomic_open`), so a reader never
        sees a half-written report."""
        path = Path(path)
        with atomic_open(path) as f:
            f.write(self.to_json() + "\n")
        return path

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> EvaluationReport:
        """Read a saved report. A file that is not one raises
        :class:`~minterpr.data.errors.DataError` (``FILE:LINE: <report>: reason``, line 0 when
        the problem is not on one line); a missing file raises FileNotFoundError."""
        file = os.fspath(path)
        data = Path(path).read_bytes()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as err:
            raise DataError(
                file, data.count(b"\n", 0, err.start) + 1, "<report>", f"invalid UTF-8 (byte 0x{data[err.start]:02x})"
            ) from None
        try:
            parsed = loads(text)
        except JSONProblem as err:
            raise DataError(file, err.line, err.field if err.field != "<record>" else "<report>", err.reason) from None
        try:
            return cls.from_dict(parsed)  # type: ignore[arg-type]
        except ValueError as err:
            raise DataError(file, 0, "<report>", str(err)) from None


def _plain(value: Any) -> Any:
    """numpy scalars/arrays -> Python numbers/lists so the report is plain JSON."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


def build_report(protocol: Mapping[str, Any], per_round_result: Mapping[str, Any]) -> EvaluationReport:
    """Turn the dict of :func:`~minterpr.evaluation.dialogue_metrics.per_round_metrics` into a report.

    Example:
        >>> from minterpr.evaluation.dialogue_metrics import per_round_metrics
        >>> res = per_round_metrics([np.array([[0.1, 0.9]])], [1], [1, 2])
        >>> build_report({"dataset": "toy"}, res).extra
        {'first_round_at_rank1': 1.0, 'num_queries': 1, 'num_rounds': 1}
    """
    result = dict(per_round_result)
    if "rounds" not in result or "bri" not in result:
        raise ValueError("per_round_result must hold 'rounds' and 'bri' (see per_round_metrics)")
    rounds = [{k: _plain(v) for k, v in row.items()} for row in result.pop("rounds")]
    bri = float(result.pop("bri"))
    return EvaluationReport(
        protocol=dict(protocol), rounds=rounds, bri=bri, extra={k: _plain(v) for k, v in result.items()}
    )


def _cell(value: Any, width: int) -> str:
    if _is_number(value):
        return f"{value:>{width}.2f}"
    return f"{'-' if value is None else value!s:>{width}}"


def format_table(report: EvaluationReport, width: int = 7) -> str:
    """Fixed-width table: one row per round, then BRI and the protocol lines."""
    lines = ["round " + " ".join(f"{metric_label(k):>{width}}" for k in TABLE_COLUMNS)]
    for row in report.rounds:
        lines.append(f"{row['round']:>5} " + " ".join(_cell(row[k], width) for k in TABLE_COLUMNS))
    lines.append(f"BRI: {report.bri:.4f} (lower is better)")
    for key in sorted(report.protocol):
        lines.append(f"protocol.{key}: {json.dumps(report.protocol[key])}")
    return "\n".join(lines)


def _check_metric(reports: Mapping[str, EvaluationReport], metric: str) -> None:
    if not reports:
        raise ValueError("no reports to compare")
    keys = {k for rep in reports.values() for row in rep.rounds for k in row} - {"round"}
    if metric not in keys:
        raise ValueError(f"unknown metric {metric!r}: must be one of {sorted(keys)}")


def format_comparison(reports: Mapping[str, EvaluationReport], metric: str = "r1", width: int = 7) -> str:
    """Rows = named runs, columns = rounds (``-`` where a run has fewer), then BRI.

    Example:
        >>> row = {"r1": 1.0, "r5": 2.0, "r10": 3.0, "mAP": 4.0, "mINP": 5.0, "hits1": 6.0,
        ...        "hits10": 7.0}
        >>> rep = EvaluationReport({}, [{"round": 0, **row}, {"round": 1, **row}], bri=1.5)
        >>> print(format_comparison({"base": rep}))
        R@1  round 0 round 1     BRI
        base    1.00    1.00    1.50
    """
    _check_metric(reports, metric)
    n_rounds = max(len(rep.rounds) for rep in reports.values())
    name_w = max(len(metric_label(metric)), *(len(name) for name in reports))
    header = [f"round {r}".rjust(width) for r in range(n_rounds)] + ["BRI".rjust(width)]
    lines = [f"{metric_label(metric):<{name_w}} " + " ".join(header)]
    for name, rep in reports.items():
        cells = [_cell(rep.rounds[r].get(metric) if r < len(rep.rounds) else None, width) for r in range(n_rounds)]
        lines.append(f"{name:<{name_w}} " + " ".join(cells + [_cell(rep.bri, width)]))
    return "\n".join(lines)


Z_95 = 1.959963984540054  # the standard normal's 97.5 % quantile: a two-sided 95 % interval


def is_proportion(metric: str) -> bool:
    """Whether ``metric`` is a share of queries (R@k, Hits@k), so a binomial interval applies;
    mAP and mINP are means of per-query values, not proportions."""
    return re.fullmatch(r"(r|hits)\d+", metric) is not None


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``successes / n`` (Newcombe 1998, method 3), as
    fractions in [0, 1]; 95 % with the default ``z``. Unlike the normal approximation it stays
    inside [0, 1] and is not empty at 0 or n successes.

    Example:
        >>> [round(v, 4) for v in wilson_interval(81, 263)]  # Newcombe's example 1
        [0.2553, 0.3662]
        >>> [round(v, 4) for v in wilson_interval(0, 20)]
        [0.0, 0.1611]
    """
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in 0..{n}, got {successes!r}")
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1.0 - p) / n + z * z / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def percent_interval(percent: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson interval, in percent, of a metric given in percent over ``n`` queries
    (``percent`` = 100 x successes / n, so the successes are recovered by rounding).

    Example:
        >>> [round(v, 1) for v in percent_interval(50.0, 100)]
        [40.4, 59.6]
    """
    low, high = wilson_interval(int(round(percent * n / 100.0)), n, z)
    return 100.0 * low, 100.0 * high


def num_queries(report: EvaluationReport) -> int | None:
    """The number of queries behind a report's per-round figures (None when it does not say)."""
    for value in (
        report.extra.get("num_queries"),
        report.protocol.get("num_queries"),
        report.protocol.get("num_targets"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def per_round_figure(reports: Mapping[str, EvaluationReport], metric: str = "r1", title: str | None = None) -> Any:
    """A matplotlib Figure with one line per named run: ``metric`` against the round, the number
    of queries n of each run in the legend (and in the title when all runs share it), and for a
    proportion (R@k, Hits@k) a shaded 95 % Wilson interval over the n queries around each line."""
    _check_metric(reports, metric)
    try:  # the object-oriented API with the Agg canvas: no pyplot, no global backend change
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as err:
        raise ImportError("plot_metric_per_round needs matplotlib: pip install 'minterpr[plot]'") from err
    fig = Figure(figsize=(6.0, 4.0))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    counts = {name: num_queries(rep) for name, rep in reports.items()}
    banded = False
    for name, rep in reports.items():
        points = [(row["round"], row[metric]) for row in rep.rounds if metric in row]
        n = counts[name]
        (line,) = ax.plot(
            [p[0] for p in points],
            [p[1] for p in points],
            marker="o",
            label=f"{name} (n={n if n is not None else '?'})",
        )
        if n is not None and is_proportion(metric):
            bands = [percent_interval(value, n) for _, value in points]
            ax.fill_between(
                [p[0] for p in points],
                [b[0] for b in bands],
                [b[1] for b in bands],
                color=line.get_color(),
                alpha=0.15,
                linewidth=0,
            )
            banded = True
    ax.set_xlabel("round (0 = description only)")
    ax.set_ylabel(metric_label(metric) + (" (%)" if metric in PERCENT_KEYS else ""))
    shared = set(counts.values())
    heading = title or f"{metric_label(metric)} per round"
    if len(shared) == 1 and None not in shared:
        heading += f" (n = {shared.pop()} queries)"
    ax.set_title(heading + ("\nshaded: 95 % Wilson interval" if banded else ""), fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_metric_per_round(
    reports: Mapping[str, EvaluationReport], path: str | os.PathLike[str], metric: str = "r1", title: str | None = None
) -> Path:
    """Write :func:`per_round_figure` as a PNG, atomically."""
    fig = per_round_figure(reports, metric, title)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    return atomic_write(path, lambda f: f.write(buffer.getvalue()))
