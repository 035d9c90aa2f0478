"""Binning: a fine fixed grid the agent stores daily, the coarse quantile bins a
baseline derives from it, and the bounded categories of a mix.

The agent cannot keep raw values, so per app, feature and day it keeps counts
on a fine `Grid` that never changes: cells uniform in `asinh(x / scale)`
(relative resolution for large |x|, absolute near 0, signs allowed) or, with
`scale=None`, uniform in x. Cell 0 is the underflow (-inf, lo), cell
`cells + 1` the overflow [hi, inf); interior cell i covers [e_{i-1}, e_i).
Fine counts add across days, partitions and replicas.

A baseline's `Bins` are a partition of the fine cells into a few coarse bins at
the quantiles of the baseline's summed fine counts, so a coarse bin is exactly
a union of fine cells: `rebin` of any stored day or window is exact, and the
edges are quantiles to within one fine cell. The first coarse bin starts at
-inf and the last ends at +inf, so every value has a bin.

Edges and centres feed a baseline's version, so they are computed the same on
every machine: `math.sinh` (libm's, one scalar routine) and `math.fsum`
(exactly rounded), never numpy's vector kernels, whose last bits follow the
CPU's SIMD width.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

OTHER = "other"  # the category every value outside a mix's list folds into


@dataclass(frozen=True)
class Grid:
    """A fine fixed grid: `cells` interior cells between lo and hi, plus under- and overflow."""

    lo: float
    hi: float
    cells: int
    _: KW_ONLY
    scale: float | None = None  # None: uniform in x; else uniform in asinh(x / scale)
    if TYPE_CHECKING:  # set by __post_init__
        _edges: np.ndarray = field(init=False)
        _digest: str = field(init=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.lo < self.hi):
            raise ValueError(f"grid needs finite lo < hi, got {self.lo}, {self.hi}")
        if not (isinstance(self.cells, int) and self.cells >= 1):
            raise ValueError("grid needs cells >= 1")
        if self.scale is not None and not (math.isfinite(self.scale) and self.scale > 0):
            raise ValueError("grid scale must be None or a finite number > 0")
        for name in ("lo", "hi") + (("scale",) if self.scale is not None else ()):
            object.__setattr__(self, name, float(getattr(self, name)))  # Grid(0, 1, 10) == Grid(0.0, 1.0, 10)
        if self.scale is None:
            edges = np.linspace(self.lo, self.hi, self.cells + 1)
        else:
            t = np.linspace(math.asinh(self.lo / self.scale), math.asinh(self.hi / self.scale), self.cells + 1)
            edges = np.array([self.scale * math.sinh(x) for x in t.tolist()])
        edges[0], edges[-1] = self.lo, self.hi
        if not np.all(np.diff(edges) > 0):
            raise ValueError("grid edges are not strictly increasing (too many cells for the float range)")
        edges.flags.writeable = False
        object.__setattr__(self, "_edges", edges)
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        object.__setattr__(self, "_digest", hashlib.sha256(text.encode()).hexdigest()[:12])

    @property
    def size(self) -> int:
        """Length of a fine count vector: the interior cells plus under- and overflow."""
        return self.cells + 2

    @property
    def edges(self) -> np.ndarray:
        """The cells + 1 finite edges, lo first and hi last (read-only)."""
        return self._edges

    @property
    def midpoints(self) -> np.ndarray:
        """A representative value per fine cell: the arithmetic midpoint; lo for the underflow, hi for the overflow."""
        e = self._edges
        return np.concatenate(([self.lo], (e[:-1] + e[1:]) / 2, [self.hi]))

    def index(self, x: float) -> int:
        """The fine cell of one value (the agent increments it per event)."""
        if math.isnan(x):
            raise ValueError("cannot bin NaN")
        return int(np.searchsorted(self._edges, x, side="right"))

    def histogram(self, values: npt.ArrayLike) -> np.ndarray:
        """Fine counts of many values (int64, length `size`)."""
        v = np.asarray(values, dtype=float).ravel()
        if np.isnan(v).any():
            raise ValueError("cannot bin NaN")
        return np.bincount(np.searchsorted(self._edges, v, side="right"), minlength=self.size).astype(np.int64)

    def dense(self, counts: npt.ArrayLike | Mapping[int, float]) -> np.ndarray:
        """Fine counts as a dense vector, from a dense sequence or a sparse {cell: count} mapping."""
        if isinstance(counts, Mapping):
            out = np.zeros(self.size, dtype=np.int64)
            for cell, n in counts.items():
                i = int(cell)
                if not 0 <= i < self.size:
                    raise ValueError(f"fine cell {cell} outside a grid of {self.size} cells")
                out[i] += n
            return out
        out = np.asarray(counts)
        if out.shape != (self.size,):
            raise ValueError(f"fine counts of length {out.shape} on a grid of {self.size} cells")
        return out

    @property
    def digest(self) -> str:
        """12 hex digits of a SHA-256 of the grid's canonical JSON (lo, hi, cells, scale): the grid a stored
        day records, so days and baselines counted on different grids are never compared."""
        return self._digest

    def to_dict(self) -> dict[str, Any]:
        return {"lo": self.lo, "hi": self.hi, "cells": self.cells, "scale": self.scale}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Grid:
        scale = data.get("scale")
        return cls(float(data["lo"]), float(data["hi"]), int(data["cells"]), scale=None if scale is None else float(scale))


@dataclass(frozen=True)
class Bins:
    """Coarse bins over a grid: bin j holds fine cells starts[j] .. starts[j+1] - 1."""

    grid: Grid
    starts: tuple[int, ...]  # first fine cell of each coarse bin; starts[0] == 0
    centres: tuple[float, ...]  # one value per bin, strictly increasing (Wasserstein's support)

    def __post_init__(self) -> None:
        s = self.starts
        if not s or s[0] != 0 or any(b <= a for a, b in pairwise(s)) or s[-1] >= self.grid.size:
            raise ValueError(f"bad coarse bin starts {s} for a grid of {self.grid.size} cells")
        if len(self.centres) != len(s) or any(b <= a for a, b in pairwise(self.centres)):
            raise ValueError("need one strictly increasing centre per bin")

    @classmethod
    def from_quantiles(cls, grid: Grid, fine_counts: npt.ArrayLike | Mapping[int, float], n_bins: int = 10) -> Bins:
        """Bins at the j / n_bins quantiles (j = 1 .. n_bins - 1) of fine counts.

        A cut goes after the first fine cell where the cumulative count reaches
        j / n_bins of the total; cuts landing in the same cell merge. A fine
        cell holding more than 1 / n_bins of the total (a point mass: a result
        count of exactly 10) becomes a bin of its own, cut on both sides, so a
        window moving mass just below or above it stays visible; the bins
        beside it may then hold no baseline mass. A bin's centre is the
        count-weighted mean of its fine cells' midpoints (`Grid.midpoints`:
        arithmetic in x, lo for the underflow, hi for the overflow), within
        a fine cell of the baseline's mean in the bin; a bin with no baseline
        mass takes the midpoint of its edges clamped to [lo, hi].
        No data: one bin, centred at (lo + hi) / 2.
        """
        if n_bins < 1:
            raise ValueError("n_bins must be >= 1")
        fine = grid.dense(fine_counts).astype(float)
        if (fine < 0).any():
            raise ValueError("counts must be >= 0")
        total = fine.sum()
        found: set[int] = set()
        if total > 0:
            cum = np.cumsum(fine)
            found.update(int(np.searchsorted(cum, total * j / n_bins, side="left")) + 1 for j in range(1, n_bins))
            for heavy in np.flatnonzero(fine > total / n_bins).tolist():
                found.update((heavy, heavy + 1))
        cuts = sorted(c for c in found if 0 < c < grid.size)
        starts = (0, *cuts)
        ends = (*cuts, grid.size)
        mids, edges = grid.midpoints, grid.edges
        centres = []
        for a, b in zip(starts, ends):
            mass = fine[a:b].sum()
            if mass > 0:
                centres.append(math.fsum((fine[a:b] * mids[a:b]).tolist()) / float(mass))
            else:  # bin a..b-1 spans [edge of cell a, edge of cell b), clamped to the grid
                left = edges[max(a - 1, 0)]
                right = edges[min(b - 1, grid.cells)]
                centres.append(float((left + right) / 2))
        return cls(grid, starts, tuple(centres))

    @property
    def n(self) -> int:
        return len(self.starts)

    @property
    def edges(self) -> tuple[float, ...]:
        """The n - 1 finite inner edges (the outer bins reach -inf and +inf)."""
        e = self.grid.edges
        return tuple(float(e[s - 1]) for s in self.starts[1:])

    def rebin(self, fine_counts: npt.ArrayLike | Mapping[int, float]) -> np.ndarray:
        """Coarse counts of fine counts (dense or sparse) on this grid."""
        return np.add.reduceat(self.grid.dense(fine_counts), list(self.starts))

    def to_dict(self) -> dict[str, Any]:
        return {"grid": self.grid.to_dict(), "starts": list(self.starts), "centres": list(self.centres)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bins:
        return cls(Grid.from_dict(data["grid"]), tuple(int(s) for s in data["starts"]),
                   tuple(float(c) for c in data["centres"]))  # fmt: skip


@dataclass(frozen=True)
class Categories:
    """A mix's bounded list of categories; everything else, `other` included, folds into `other`."""

    values: tuple[str, ...]  # sorted, without OTHER

    def __post_init__(self) -> None:
        if list(self.values) != sorted(set(self.values)) or OTHER in self.values:
            raise ValueError("categories must be sorted, unique and exclude 'other'")

    @classmethod
    def from_counts(cls, counts: Mapping[str, float], max_categories: int = 20) -> Categories:
        """The `max_categories` most frequent (ties by name) categories with a count > 0."""
        ranked = sorted(((-n, k) for k, n in counts.items() if n > 0 and k != OTHER))
        return cls(tuple(sorted(k for _, k in ranked[:max_categories])))

    @property
    def labels(self) -> tuple[str, ...]:
        return (*self.values, OTHER)

    def fold(self, counts: Mapping[str, float]) -> tuple[float, ...]:
        """Counts in `labels` order: one per category, then `other`."""
        index = {k: i for i, k in enumerate(self.values)}
        out: list[float] = [0] * (len(self.values) + 1)
        for k, n in counts.items():
            out[index.get(k, len(self.values))] += n
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {"values": list(self.values)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Categories:
        return cls(tuple(data["values"]))
