"""Two offline runs compared over the same qrels: paired differences, slices, hard gates and a verdict."""

from agent.core.compare.gate import GATED, GateError, GateThresholds, parse_gate
from agent.core.compare.paired import PairedSettings, paired_interval
from agent.core.compare.queries import COMPARED
from agent.core.compare.verdict import FAILED, NOT_ENOUGH, PASSED, Inputs, compare

__all__ = ["COMPARED", "FAILED", "GATED", "NOT_ENOUGH", "PASSED", "GateError", "GateThresholds", "Inputs",
           "PairedSettings", "compare", "paired_interval", "parse_gate"]
