"""The adapter contract: checks every dlmg adapter must pass.

A third-party adapter package runs the same suite as dlmg's own adapters,
either in one call::

    from dlmg.testing import check_adapter
    check_adapter(MyAdapter(), device=Device("cpu", 0))

or as pytest tests, one per check, by subclassing :class:`AdapterContract`::

    class TestMyAdapter(AdapterContract):
        adapter = MyAdapter()
        device = Device("cpu", 0)

Each check takes a :class:`ContractContext` and raises ``AssertionError``
naming what broke. The checks of what every adapter answers come first, then
one check per capability of :mod:`dlmg.adapters.capabilities`, which runs
where the adapter declares it. The checks use only the adapter's own methods, plus NumPy
to compare values on the host; arrays with values are made through the
adapter's array-API namespace (``arange``/``reshape``/``astype``) unless a
``make_array`` is given.

:func:`start_local_processes` starts one SPMD script in several processes of
this machine under either engine (torchrun's environment, or ``mpiexec``), for
tests and benchmarks of code written against :mod:`dlmg.distributed`.

This module imports no framework at import time (NumPy is imported inside the
checks).
"""

from __future__ import annotations

from typing import Any, Callable

from dlmg.device import Device, as_device
from dlmg.dtypes import canonical
from dlmg.registry import get_adapter

from ._capabilities import CAPABILITY_CHECKS, importer_agrees
from ._checks import CORE_CHECKS
from ._context import DEFAULT_DTYPES, ContractContext, default_make_array, host_values, is_capsule
from ._launch import find_mpiexec, free_port, start_local_processes

__all__ = [
    "AdapterContract",
    "CHECKS",
    "ContractContext",
    "DEFAULT_DTYPES",
    "check_adapter",
    "find_mpiexec",
    "free_port",
    "host_values",
    "importer_agrees",
    "is_capsule",
    "start_local_processes",
]

#: Every contract check by name, in the order they run.
CHECKS: dict[str, Callable[[ContractContext], None]] = {**CORE_CHECKS, **CAPABILITY_CHECKS}


def check_adapter(
    adapter: Any,
    make_array: Callable[..., Any] | None = None,
    *,
    device: Any = "cpu",
    dtypes: tuple[str, ...] | None = None,
    to_numpy: Callable[..., Any] | None = None,
    skip: tuple[str, ...] = (),
    run_compiled: bool = True,
) -> list[str]:
    """Run every contract check on ``adapter``.

    Parameters
    ----------
    adapter : Adapter or str
        The adapter (or a registered framework name).
    make_array : callable, optional
        ``make_array(adapter, shape, dtype, device)``; defaults to one built on
        the adapter's namespace.
    device : Device or str
        Where to make arrays.
    dtypes : tuple of str, optional
        Element types to exercise (default :data:`DEFAULT_DTYPES`).
    to_numpy : callable, optional
        ``to_numpy(adapter, array)``; default :func:`host_values`.
    skip : tuple of str
        Names of checks (keys of :data:`CHECKS`) to leave out.
    run_compiled : bool
        Run the kernels of a declared compiler (see :class:`ContractContext`).

    Returns
    -------
    list of str
        Notes from the checks (what was not applicable).

    Raises
    ------
    AssertionError
        At the first failing check, prefixed with its name.
    """
    ctx = ContractContext(
        adapter=get_adapter(adapter),
        device=as_device(device),
        dtypes=tuple(canonical(d) for d in dtypes) if dtypes else DEFAULT_DTYPES,
        make_array=make_array or default_make_array,
        to_numpy=to_numpy or host_values,
        run_compiled=run_compiled,
    )
    for name, check in CHECKS.items():
        if name in skip:
            continue
        try:
            check(ctx)
        except AssertionError as exc:
            raise AssertionError(f"adapter contract check {name!r} failed for {ctx.adapter.name!r}: {exc}") from exc
    return ctx.notes


class AdapterContract:
    """pytest base class: one test per contract check.

    Subclass it as ``Test...`` and set :attr:`adapter` (an instance or a
    registered name) and :attr:`device`; optionally :attr:`dtypes`,
    :meth:`make_array` and :meth:`to_numpy`.
    """

    adapter: Any = None
    device: Any = "cpu"
    dtypes: tuple[str, ...] = DEFAULT_DTYPES

    def make_array(self, adapter: Any, shape: tuple[int, ...], dtype: str, device: Device) -> Any:
        """Override to make arrays another way (default: through the namespace)."""
        return default_make_array(adapter, shape, dtype, device)

    def to_numpy(self, adapter: Any, array: Any) -> Any:
        """Override to read values another way (default :func:`host_values`)."""
        return host_values(adapter, array)

    def contract_context(self) -> ContractContext:
        """The context the checks run with."""
        return ContractContext(
            adapter=get_adapter(self.adapter),
            device=as_device(self.device),
            dtypes=tuple(self.dtypes),
            make_array=self.make_array,
            to_numpy=self.to_numpy,
        )


def _make_test(name: str) -> Callable[[AdapterContract], None]:
    def test(self: AdapterContract) -> None:
        CHECKS[name](self.contract_context())

    test.__name__ = f"test_{name}"
    test.__doc__ = CHECKS[name].__doc__
    return test


for _name in CHECKS:
    setattr(AdapterContract, f"test_{_name}", _make_test(_name))
del _name
