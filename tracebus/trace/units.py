"""How a trace job is split into units of work (pure arithmetic, no Redis).

A job over ``n_cids`` container ids and ``domains`` has ``len(domains) * n_chunks`` units,
``n_chunks = ceil(n_cids / chunk_cids)``. Unit ``u`` covers domain ``domains[u // n_chunks]``
and the CID chunk ``u % n_chunks``, i.e. ``cids[c * chunk_cids:(c + 1) * chunk_cids]``.
Units of one domain are contiguous and in CID order, which is the order results are read.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class UnitPlan:
    """The unit layout of one job.

    Attributes:
        domains(tuple[str, ...]): requested domains, in request order.
        n_cids(int): number of (deduplicated) container ids.
        chunk_cids(int): CIDs per unit.
    """

    domains: tuple[str, ...]
    n_cids: int
    chunk_cids: int

    def __post_init__(self):
        if self.n_cids < 1 or self.chunk_cids < 1 or not self.domains:
            raise ValueError("a unit plan needs at least one CID, one domain and chunk_cids >= 1")

    @property
    def n_chunks(self) -> int:
        """CID chunks per domain."""
        return -(-self.n_cids // self.chunk_cids)

    @property
    def total(self) -> int:
        """Units of the whole job."""
        return len(self.domains) * self.n_chunks

    def domain_of(self, unit: int) -> str:
        """The domain that ``unit`` fetches."""
        return self.domains[self._check(unit) // self.n_chunks]

    def chunk_of(self, unit: int) -> int:
        """The CID chunk index that ``unit`` fetches."""
        return self._check(unit) % self.n_chunks

    def units_of(self, domain: str) -> list[int]:
        """The units of ``domain`` in result order.

        Raises:
            KeyError: the job does not fetch ``domain``.
        """
        try:
            index = self.domains.index(domain)
        except ValueError:
            raise KeyError(domain) from None
        return list(range(index * self.n_chunks, (index + 1) * self.n_chunks))

    def cid_slice(self, chunk: int) -> slice:
        """The slice of the CID list covered by CID chunk ``chunk``."""
        return slice(chunk * self.chunk_cids, min((chunk + 1) * self.chunk_cids, self.n_cids))

    def _check(self, unit: int) -> int:
        if not 0 <= unit < self.total:
            raise IndexError(f"unit {unit} out of range 0..{self.total - 1}")
        return unit
