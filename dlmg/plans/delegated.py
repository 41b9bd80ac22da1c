"""The plan of a move handed whole to the framework that owns every fragment.

A :class:`DelegatedPlan` is the copy plan dlmg would run, marked with what runs
instead (``"jax.device_put"``): its copies and byte counts say what the move
carries, and its summary says who moves it.
"""

from __future__ import annotations

from dataclasses import dataclass

from .plan import RedistributionPlan

__all__ = ["DelegatedPlan"]


@dataclass
class DelegatedPlan(RedistributionPlan):
    """A :class:`RedistributionPlan` that runs as one operation of a framework.

    Attributes
    ----------
    delegated_to : str
        What runs the move (``"jax.device_put"``). ``copies``, ``bytes_by_devices``
        and ``total_bytes`` are those of dlmg's own plan: what the move carries,
        not copies dlmg makes. Where the framework declines the arrays when the
        move runs (JAX: a buffer not in C order, from a transposed import),
        dlmg's plan runs after all.
    """

    delegated_to: str = ""

    @classmethod
    def of(cls, plan: RedistributionPlan, delegated_to: str) -> "DelegatedPlan":
        """``plan`` marked as run by ``delegated_to``."""
        return cls(plan.src_layout, plan.dst_layout, plan.itemsize, plan.copies, plan.reused, plan.sources,
                   plan.dtype, delegated_to=delegated_to)

    def summary(self) -> str:
        """The delegation, the bytes it moves, then the layouts and the bytes per device pair."""
        lines = [
            f"RedistributionPlan: delegated to {self.delegated_to}, moving {self.total_bytes} bytes"
            f" ({self.cross_device_bytes} across devices); dlmg copies nothing"
            f" (its own plan: {self.ncopies} strided copies, {len(self.reused)} fragments reused)"
        ]
        return "\n".join(lines + self._move_lines())

    def __repr__(self) -> str:
        return (
            f"<RedistributionPlan delegated_to={self.delegated_to!r} bytes={self.total_bytes} "
            f"cross_device={self.cross_device_bytes}>"
        )
