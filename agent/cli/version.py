"""`ragdrift --version`: the release, and every format it stores or reads.

An operator about to roll a release forward or back reads here which stored
formats the two releases share (docs/operations.md, "Upgrading and rolling
back"; CHANGELOG.md says when each changed). The modules that define the
formats are loaded only when asked.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from agent import __version__


def text() -> str:
    from agent.core.batch import FORMAT as BATCH_FORMAT
    from agent.core.drift.baseline import BASELINE_FORMAT
    from agent.core.formats import DRIFT_DAY_ROWS, LIVE_GATE_ROWS
    from agent.core.judgments.runs import FORMAT as RUN_FORMAT
    from agent.core.sampling.sampler import SAMPLER_VERSION
    from agent.core.state import STATE_VERSION

    formats = {
        "checkpoint state": f"v{STATE_VERSION} (reads v1 to v{STATE_VERSION})",
        "judgment sampler section": f"v{SAMPLER_VERSION}",
        "drift day rows": f"v{DRIFT_DAY_ROWS}",
        "live-gate rows": f"v{LIVE_GATE_ROWS}",
        "baselines": f"v{BASELINE_FORMAT}",
        "judgment batches": BATCH_FORMAT,
        "runs (evaluate, compare)": RUN_FORMAT,
        "events": "retrieval.v1",
    }
    width = max(map(len, formats))
    lines = [f"ragdrift {__version__}", "stored and exchanged formats:"]
    lines += [f"  {name:<{width}}  {version}" for name, version in formats.items()]
    return "\n".join(lines)


class VersionAction(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the release and its stored formats, and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        print(text())
        sys.exit(0)
