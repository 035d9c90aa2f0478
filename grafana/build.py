"""Generate grafana/dashboards/*.json from code (grafana-foundation-sdk).

    python grafana/build.py            write the dashboards
    python grafana/build.py --check    exit 1 if the committed JSON differs

Thresholds come from the alert rules (`--rules`, default
rules/ragdrift.rules.yaml) through grafana/thresholds.py, never from a literal
here. The output is deterministic (sorted keys, two-space indent), so
tests/test_dashboards.py can compare the committed files with a fresh build.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: import `grafana.*` from the repository root
    sys.path[0] = str(Path(__file__).resolve().parent.parent)

from grafana_foundation_sdk.cog.encoder import JSONEncoder

from grafana import canary, drift, health, judgment, overview, security, thresholds

OUT = Path(__file__).resolve().parent / "dashboards"
# file name -> the module whose build(rules) makes it
BOARDS = {
    "ragdrift-overview.json": overview,
    "ragdrift-security-freshness.json": security,
    "ragdrift-judgment.json": judgment,
    "ragdrift-drift.json": drift,
    "ragdrift-canary.json": canary,
    "ragdrift-agent-health.json": health,
}


def render(rules_path: str | Path = thresholds.RULES) -> dict[str, str]:
    """File name -> dashboard JSON text."""
    rules = thresholds.read(rules_path)
    encoder = JSONEncoder(sort_keys=True, indent=2, ensure_ascii=False)
    return {name: encoder.encode(module.build(rules)) + "\n" for name, module in BOARDS.items()}


def stale(out: Path = OUT, rules_path: str | Path = thresholds.RULES) -> list[str]:
    """Files whose committed text differs from a fresh build (or is missing)."""
    fresh = render(rules_path)
    differ = [name for name, text in fresh.items() if not (out / name).exists() or (out / name).read_text() != text]
    extra = sorted(p.name for p in out.glob("*.json") if p.name not in fresh) if out.exists() else []
    return differ + extra


def write(out: Path = OUT, rules_path: str | Path = thresholds.RULES) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render(rules_path).items():
        path = out / name
        path.write_text(text)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed dashboards are not fresh")
    parser.add_argument("--rules", default=str(thresholds.RULES), help="alert rules to read thresholds from")
    parser.add_argument("--out", default=str(OUT), help="output directory")
    args = parser.parse_args(argv)
    try:
        if args.check:
            differ = stale(Path(args.out), args.rules)
            for name in differ:
                print(f"stale: {Path(args.out) / name} (run python grafana/build.py)", file=sys.stderr)
            return 1 if differ else 0
        for path in write(Path(args.out), args.rules):
            print(path)
    except thresholds.RulesError as exc:
        print(f"grafana/build.py: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
