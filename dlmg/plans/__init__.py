"""Copy plans: what gather, scatter and redistribution of distributed tensors copy.

* :mod:`~dlmg.plans.segments` -- per-mode index-set intersection, cut into a
  few strided segments;
* :mod:`~dlmg.plans.endpoints` -- fragments as index sets plus memory geometry;
* :mod:`~dlmg.plans.plan` -- the inspectable :class:`RedistributionPlan`
  (strided copies, bytes per device pair, reused fragments) and which of its
  copies are one larger copy;
* :mod:`~dlmg.plans.build` -- planning: pairing source and destination
  endpoints into copies;
* :mod:`~dlmg.plans.delegated` -- the plan of a move a framework makes whole
  (:class:`DelegatedPlan`);
* :mod:`~dlmg.plans.routes` -- the pieces each process sends to each other
  process in a cross-process move.

Plans are data over layouts and build no tensor; :mod:`dlmg.movement` runs them.
"""

from __future__ import annotations

from .build import plan_redistribution
from .plan import Copy, RedistributionPlan
from .delegated import DelegatedPlan

__all__ = [
    "Copy",
    "DelegatedPlan",
    "RedistributionPlan",
    "plan_redistribution",
]
