"""Hooks: what a lower part of dlmg asks of a higher one, provided by the higher part.

Imports run one way (errors, devices and dtypes at the bottom; layouts, plans,
adapters, movement, operations, interop and the tensor above them). Where a lower
part offers something only a higher part can do -- :meth:`Layout.to_sharding
<dlmg.Layout.to_sharding>` (interop), :func:`~dlmg.as_device` of a framework's
own device object (the adapters, through the registry) -- it declares a
:class:`Hook` next to its question and calls it; the higher part provides the
answer when it is imported (``import dlmg`` imports every part). The tensor uses
none: its methods call the parts below it by direct import (:mod:`dlmg.tensor`).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

__all__ = ["Hook"]

T = TypeVar("T")


class Hook(Generic[T]):
    """One answer a higher part provides: a function or a namespace of functions.

    Parameters
    ----------
    question : str
        What the hook answers, for the error when nothing was provided.
    provider : str
        The module expected to provide it.
    """

    __slots__ = ("question", "provider", "answer")

    def __init__(self, question: str, provider: str) -> None:
        self.question = question
        self.provider = provider
        self.answer: T | None = None

    def provide(self, answer: T) -> T:
        """Set the answer (the provider calls this once, when it is imported)."""
        self.answer = answer
        return answer

    def get(self) -> T:
        """The answer provided.

        Raises
        ------
        RuntimeError
            When :attr:`provider` was not imported (``import dlmg`` imports it).
        """
        answer = self.answer
        if answer is None:
            raise RuntimeError(f"{self.question} is answered by {self.provider}, which was not imported; import dlmg")
        return answer

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the function provided."""
        return self.get()(*args, **kwargs)  # type: ignore[operator]

    def __repr__(self) -> str:
        state = "provided" if self.answer is not None else "not provided"
        return f"Hook({self.question!r}, {self.provider}: {state})"
