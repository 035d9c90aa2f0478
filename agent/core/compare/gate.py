"""The gate file: the thresholds a comparison is held to, each with a documented default.

JSON, every key optional (docs/judgments.md, "Comparing two runs", lists them).
An unknown key or a value of the wrong kind is a `GateError` naming it: a
misspelt threshold must not leave its default silently in force.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from agent.core.judgments.untrusted import loads, shown

GATED = ("precision", "evidenceGroupRecall", "nDCG", "zeroResult")
MAX_RESAMPLES = 100_000  # each interval holds resamples x queries draws in memory


class GateError(ValueError):
    """A gate file that does not say what thresholds to use."""


@dataclass(frozen=True, kw_only=True)
class GateThresholds:
    metrics: tuple[str, ...] = GATED  # paired thresholds over all compared queries
    slice_metrics: tuple[str, ...] = ("precision", "nDCG")  # and within each slice
    slice_dimensions: tuple[str, ...] | None = None  # None: every dimension of the slices file
    max_unauthorized: int = 0  # unauthorized results in the candidate's top k
    max_new_stale: int = 0  # stale results in the candidate's top k that the baseline's lacked
    max_lost_evidence: int = 0  # queries where the baseline completed an evidence group and the candidate none
    require_facts: bool = False  # a candidate without access and freshness facts: not enough data
    margin_factor: float = 1.0  # m = factor x the baseline's bootstrap half-width ...
    min_margin: float = 0.01  # ... and at least this
    level: float = 0.95
    resamples: int = 2000
    seed: int = 0
    min_queries: int = 30  # fewer compared queries: not enough data; at least 1
    min_slice_queries: int = 10  # a smaller slice is listed, not gated
    worst: int = 5  # query-level losses and wins listed

    def as_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}


def parse_gate(text: str, known_metrics: tuple[str, ...]) -> GateThresholds:
    """A gate from its JSON text; `known_metrics` the metric names a list may hold."""
    try:
        data = loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as exc:
        raise GateError(f"line {exc.lineno}: not JSON: {exc.msg}") from None
    except ValueError as exc:
        raise GateError(str(exc)) from None
    if not isinstance(data, dict):
        raise GateError("a gate file is a JSON object of thresholds")
    defaults = {f.name: getattr(GateThresholds(), f.name) for f in fields(GateThresholds)}
    unknown = sorted(set(data) - set(defaults))
    if unknown:
        raise GateError(f"unknown key {shown(unknown[0])}; known keys: {', '.join(defaults)}")
    values = {key: _value(key, value, defaults[key], known_metrics) for key, value in data.items()}
    gate = GateThresholds(**values)
    if not 0 < gate.level < 1:
        raise GateError(f"level must be between 0 and 1, got {gate.level!r}")
    if not 100 <= gate.resamples <= MAX_RESAMPLES:
        raise GateError(f"resamples must be from 100 to {MAX_RESAMPLES}, got {gate.resamples}")
    if gate.min_queries < 1:  # a gate that compared nothing must not pass (the live gate's rule too)
        raise GateError(f"min_queries must be >= 1, got {gate.min_queries}")
    return gate


def _value(key: str, value: Any, default: object, known_metrics: tuple[str, ...]) -> Any:
    """`value` as parsed from JSON, checked against the type of the key's `default`."""
    if key == "slice_dimensions" and value is None:
        return None
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise GateError(f"{key} must be true or false, got {shown(value)}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise GateError(f"{key} must be an integer >= 0, got {shown(value)}")
        return value
    if isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise GateError(f"{key} must be a number >= 0, got {shown(value)}")
        return float(value)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GateError(f"{key} must be a list of names, got {shown(value)}")
    if key != "slice_dimensions":
        wrong = [v for v in value if v not in known_metrics]
        if wrong:
            raise GateError(f"{key}: unknown metric {shown(wrong[0])}; known: {', '.join(known_metrics)}")
    return tuple(value)
