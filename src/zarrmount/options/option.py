"""One ``-o`` option, and the setters most options share, so each group of the table
(``caching``, ``stores``, ``versioned``, ``writing``, ``views``, ``service``) states only
what is its own."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from zarrmount.options.values import OptionError, parse_size

if TYPE_CHECKING:
    from zarrmount.options.mount_options import MountOptions

Setter = Callable[["MountOptions", str, str], None]  # (options, name, value)


@dataclass(frozen=True)
class Option:
    """One ``-o`` option: how it is written, what it means, how it is applied."""

    usage: str  # "cache_size=SIZE"; a name ending in ".KEY" is a family ("so.KEY=VALUE")
    help: str
    setter: Setter
    takes_value: bool = True

    @property
    def name(self) -> str:
        return self.usage.partition("=")[0]

    def matches(self, name: str) -> bool:
        if self.name.endswith(".KEY"):
            prefix = self.name.removesuffix("KEY")
            return name.startswith(prefix) and len(name) > len(prefix)
        return name == self.name

    def apply(self, options: MountOptions, name: str, value: str | None) -> None:
        if self.takes_value and not value:
            raise OptionError(f"option {name!r} needs a value: {self.usage}")
        if not self.takes_value and value is not None:
            raise OptionError(f"option {name!r} takes no value")
        try:
            self.setter(options, name, value or "")
        except OptionError:
            raise
        except ValueError:
            raise OptionError(f"option {name!r}: bad value {value!r}") from None


def flag(attr: str, value: bool = True) -> Setter:
    """An option without a value: sets ``attr``."""
    return lambda o, _name, _value: setattr(o, attr, value)


def number(attr: str, parse: Callable[[str], float], low: float, low_ok: bool = True) -> Setter:
    """A number of at least ``low`` (or above it, when ``low_ok`` is false)."""

    def setter(o: MountOptions, _name: str, text: str) -> None:
        value = parse(text)
        if value < low or (value == low and not low_ok):
            raise ValueError(text)
        setattr(o, attr, value)

    return setter


def size(attr: str) -> Setter:
    """A size with a suffix (``parse_size``), its error naming the option."""

    def setter(o: MountOptions, name: str, text: str) -> None:
        try:
            setattr(o, attr, parse_size(text))
        except OptionError as e:
            raise OptionError(f"option {name!r}: {e}") from None

    return setter


def choice(attr: str, choices: tuple[str, ...]) -> Setter:
    """One of ``choices``; the error lists them."""

    def setter(o: MountOptions, name: str, text: str) -> None:
        if text not in choices:
            raise OptionError(f"option {name!r}: {text!r} is not one of {', '.join(choices)}")
        setattr(o, attr, text)

    return setter
