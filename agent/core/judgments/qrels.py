"""Versioned qrels: what an import adds to the labels already held.

A label's pair is (batch, item, chunk, judge). A label for a pair nobody
labelled yet is version 1; one that differs from the pair's latest version
(grade, tags or evidence group) is the next version; one equal to it adds
nothing, which makes an import idempotent. Versions are only ever added:
the history of a pair is every label it had, in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass

from agent.core.judgments.labels import Label

Pair = tuple[str, str, str, str]  # Label.pair


@dataclass(frozen=True)
class Revision:
    versions: tuple[tuple[int, Label], ...]  # (version, label) to add
    new: int  # pairs labelled for the first time
    changed: int  # pairs given a new version
    _: KW_ONLY
    unchanged: int  # labels equal to their pair's latest version


def revise(latest: Mapping[Pair, tuple[int, Label]], labels: Iterable[Label]) -> Revision:
    """The versions `labels` add to `latest` (each pair's latest version and
    label); of one pair labelled twice in `labels`, the later is the newer."""
    current = dict(latest)
    versions: list[tuple[int, Label]] = []
    new = changed = unchanged = 0
    for label in labels:
        held = current.get(label.pair)
        if held is not None and held[1] == label:
            unchanged += 1
            continue
        if held is None:
            new += 1
        else:
            changed += 1
        version = 1 if held is None else held[0] + 1
        current[label.pair] = (version, label)
        versions.append((version, label))
    return Revision(tuple(versions), new, changed, unchanged=unchanged)
