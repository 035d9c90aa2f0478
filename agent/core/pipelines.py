"""An event's pipeline version, and the tally keys split by it.

With `CoreConfig.by_pipeline_version`, every family with an app label carries
a `pipeline_version` label right after `app` (agent/core/metrics.py), so that
a canary or shadow pipeline can be compared with the stable one on every
family. Families without an app label are not split.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from agent.core.families import FAMILIES
from agent.core.labels import OTHER
from agent.core.model import Event
from agent.core.tally import Histogram, Key, Tally

NO_VERSION = "none"  # the label of events that name no pipeline version


def version_of(event: Event) -> str | None:
    """The event's `pipeline.version` as sent, or None when it names none."""
    pipeline = event.pipeline
    return None if pipeline is None else pipeline.version


def _unsplit_lengths() -> dict[str, int]:
    """Key name -> its length without the split, for every key of a family with an app label."""
    out = {}
    for family in FAMILIES:
        if family.labels[:1] == ("app",):
            n = 1 + len(family.labels)
            if isinstance(family, Histogram):
                out.update({family.bucket_key: n + 1, family.count_key: n, family.sum_key: n})
            else:
                out[family.name] = n
    return out


_UNSPLIT = _unsplit_lengths()


def conform(tally: Tally, split: bool) -> Tally:
    """`tally` with its keys laid out with the split or without it: a key
    counted without it gets `other` for its pipeline version (what it counted
    cannot be told apart by version), one counted with it loses its version
    (the versions of an app summed). A tally already so laid out is returned
    as it is: its first key of a family with an app label tells."""
    for key in tally:
        n = _UNSPLIT.get(key[0])
        if n is not None:
            if (len(key) > n) == split:
                return tally
            break
    else:
        return tally
    out: Tally = {}
    for key, value in tally.items():
        n = _UNSPLIT.get(key[0])
        if n is not None and (len(key) > n) != split:
            key = (key[0], key[1], OTHER, *key[2:]) if split else (key[0], key[1], *key[3:])
        out[key] = out.get(key, 0) + value
    return out


def relabel(tally: Tally, app: str, version: str, to: str | None) -> None:
    """Move the keys of one app's pipeline version label in a split tally,
    in place, to the label `to` (summed with what it holds), or drop them
    when `to` is None: how a forgotten version leaves a tally."""
    _move(tally, [key for key in tally if key[0] in _UNSPLIT and key[2] == version and key[1] == app], to)


def fold_versions(tally: Tally, app: str, kept: Collection[str]) -> None:
    """Move the keys of one app's pipeline version labels not in `kept` to
    `other` in a split tally, in place."""
    _move(tally, [key for key in tally if key[0] in _UNSPLIT and key[1] == app and key[2] not in kept], OTHER)


def end_series(tally: Tally, app: str, version: str, shown: Mapping[Key, float]) -> None:
    """Drop the keys of one app's pipeline version label from a split tally,
    in place, all but what each counted beyond `shown` (what its series last
    showed), which moves to `other`: how a version gives up its own series."""
    keys = [key for key in tally if key[0] in _UNSPLIT and key[2] == version and key[1] == app]
    for key in keys:
        tally[key] -= shown.get(key, 0)
    _move(tally, [key for key in keys if not tally[key]], None)
    _move(tally, [key for key in keys if key in tally], OTHER)


def of_versions(tally: Tally, versions: Mapping[str, Collection[str]]) -> Tally:
    """The keys of a split tally whose pipeline version label is one of its app's `versions`."""
    return {key: value for key, value in tally.items() if key[0] in _UNSPLIT and key[2] in versions.get(key[1], ())}


def _move(tally: Tally, keys: list[Key], to: str | None) -> None:
    for key in keys:
        value = tally.pop(key)
        if to is not None:
            new: Key = (key[0], key[1], to, *key[3:])
            tally[new] = tally.get(new, 0) + value


def of_version(tally: Tally, version: str) -> Tally:
    """The keys of one pipeline version label in a split tally, without the label."""
    out: Tally = {}
    for key, value in tally.items():
        if key[0] in _UNSPLIT and key[2] == version:
            unsplit: Key = (key[0], key[1], *key[3:])
            out[unsplit] = out.get(unsplit, 0) + value
    return out


def versions_in(tally: Tally) -> list[str]:
    """The pipeline version labels of a split tally, sorted."""
    return sorted({key[2] for key in tally if key[0] in _UNSPLIT})
