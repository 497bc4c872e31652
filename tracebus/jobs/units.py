"""How a trace job is split into units of work (pure arithmetic, no Redis).

A job over ``n_items`` container ids and ``sections`` has ``len(sections) * n_chunks`` units,
``n_chunks = ceil(n_items / chunk_items)``. Unit ``u`` covers section ``sections[u // n_chunks]``
and the CID chunk ``u % n_chunks``, i.e. ``cids[c * chunk_items:(c + 1) * chunk_items]``.
Units of one section are contiguous and in CID order, which is the order results are read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class UnitPlan:
    """The unit layout of one job.

    Attributes:
        sections(tuple[str, ...]): requested sections, in request order.
        n_items(int): number of (deduplicated) container ids.
        chunk_items(int): CIDs per unit.
    """

    sections: tuple[str, ...]
    n_items: int
    chunk_items: int

    def __post_init__(self):
        if self.n_items < 1 or self.chunk_items < 1 or not self.sections:
            raise ValueError("a unit plan needs at least one CID, one section and chunk_items >= 1")

    @property
    def n_chunks(self) -> int:
        """CID chunks per section."""
        return -(-self.n_items // self.chunk_items)

    @property
    def total(self) -> int:
        """Units of the whole job."""
        return len(self.sections) * self.n_chunks

    def section_of(self, unit: int) -> str:
        """The section that ``unit`` fetches."""
        return self.sections[self._check(unit) // self.n_chunks]

    def chunk_of(self, unit: int) -> int:
        """The CID chunk index that ``unit`` fetches."""
        return self._check(unit) % self.n_chunks

    def units_of(self, section: str) -> list[int]:
        """The units of ``section`` in result order.

        Raises:
            KeyError: the job does not fetch ``section``.
        """
        try:
            index = self.sections.index(section)
        except ValueError:
            raise KeyError(section) from None
        return list(range(index * self.n_chunks, (index + 1) * self.n_chunks))

    def item_slice(self, chunk: int) -> slice:
        """The slice of the CID list covered by CID chunk ``chunk``."""
        return slice(chunk * self.chunk_items, min((chunk + 1) * self.chunk_items, self.n_items))

    def _check(self, unit: int) -> int:
        if not 0 <= unit < self.total:
            raise IndexError(f"unit {unit} out of range 0..{self.total - 1}")
        return unit
