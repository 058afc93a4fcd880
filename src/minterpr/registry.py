"""One registry pattern for every pluggable part (encoders, policies, simulators, configs).

Example:
    >>> POLICIES = Registry("question policy")
    >>> @POLICIES.register("random")
    ... def make_random(seed=0):
    ...     return ("random", seed)
    >>> POLICIES.create("random", seed=3)
    ('random', 3)
    >>> POLICIES.names()
    ['random']
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from minterpr.errors import MinterprError

T = TypeVar("T")


class RegistryError(MinterprError, KeyError):
    """An unknown or duplicate name; the message lists the valid names."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class Registry(Generic[T]):
    """Maps names to factories; unknown names raise an error listing the valid ones."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # what is registered, for error messages ("image encoder")
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator registering ``factory`` under ``name``."""

        def decorate(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._factories:
                raise RegistryError(f"{self.kind} {name!r} is already registered")
            self._factories[name] = factory
            return factory

        return decorate

    def get(self, name: str) -> Callable[..., T]:
        """Return the factory registered as ``name``."""
        try:
            return self._factories[name]
        except KeyError:
            raise RegistryError(
                f"unknown {self.kind} {name!r}: must be one of {', '.join(self.names()) or '(none registered)'}"
            ) from None

    def create(self, name: str, **kwargs: object) -> T:
        """Build the member ``name`` with keyword arguments."""
        return self.get(name)(**kwargs)

    def names(self) -> list[str]:
        """Registered names, sorted."""
        return sorted(self._factories)

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._factories)
