"""Copy plans: gather, scatter and redistribution of distributed tensors.

* :mod:`~dlmg.plans.segments` -- per-mode index-set intersection, cut into a
  few strided segments;
* :mod:`~dlmg.plans.endpoints` -- fragments as index sets plus memory geometry;
* :mod:`~dlmg.plans.plan` -- the inspectable :class:`RedistributionPlan`
  (strided copies, bytes per device pair, reused fragments);
* :mod:`~dlmg.plans.execute` -- running copies in whichever framework can view
  the memory, moving pieces across devices and frameworks through DLPack;
* :mod:`~dlmg.plans.api` -- :func:`gather`, :func:`scatter`,
  :func:`redistribute`, :func:`to_framework`.
"""

from __future__ import annotations

from .api import gather, redistribute, scatter, to_framework
from .plan import Copy, RedistributionPlan, plan_redistribution

__all__ = [
    "Copy",
    "RedistributionPlan",
    "plan_redistribution",
    "gather",
    "scatter",
    "redistribute",
    "to_framework",
]
