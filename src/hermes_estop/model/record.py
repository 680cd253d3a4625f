"""`Record`: the base of the core's small immutable value classes (a hold, a reading, a location).

Why not `dataclasses`: importing it pulls in `inspect` (and with it `ast`, `dis`, `tokenize`),
and each frozen dataclass generates its methods with `exec` when its module is imported. On the
path of `hermes check`, run from crontab lines and timers, that was a large share of the start-up.
A `Record` subclass lists its fields in `__slots__` (in constructor order) and writes its own
`__init__` with `object.__setattr__`; equality, hashing, `repr` and pickling come from here.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

__all__ = ["Record", "set_field"]

#: how a `Record.__init__` sets a field (its instances refuse ordinary assignment)
set_field = object.__setattr__


class Record:
    """An immutable value: fields are the `__slots__` of the class and its bases, in order."""

    __slots__ = ()
    _fields: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        names: list[str] = []
        for klass in reversed(cls.__mro__):
            slots = klass.__dict__.get("__slots__", ())
            names.extend((slots,) if isinstance(slots, str) else slots)
        cls._fields = tuple(names)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self._fields)

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"cannot assign to field {name!r}: {type(self).__name__} is immutable")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"cannot delete field {name!r}: {type(self).__name__} is immutable")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Record)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({fields})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__, self._values())
