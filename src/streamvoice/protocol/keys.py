"""Where callers put their key. Every wire takes ``Authorization: Bearer <key>``; each wire's folder declares
the other places its clients use (``KeyForms``: a header, an ``Authorization`` scheme, a browser's query), and
the server joins what its mounted wires declare, so a 401 names every form it takes and a key in any of them
is read. Which keys are good is the key ring's (``store.keys``): this module only reads what was presented."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class KeyForms:
    """Where a wire's clients put their key, beside ``Authorization: Bearer``."""

    headers: tuple[str, ...] = ()  # headers that carry the key as it is (lower case)
    schemes: tuple[str, ...] = ()  # ``Authorization`` schemes beside Bearer (lower case)
    queries: tuple[str, ...] = ()  # a browser's query parameters
    hint: str = ""  # where this wire's clients put it, in a 401's words

    @staticmethod
    def joined(forms: Iterable[KeyForms]) -> KeyForms:
        """Every form of every wire, each once, in the order given."""
        forms = list(forms)

        def union(items: Iterable[str]) -> tuple[str, ...]:
            return tuple(dict.fromkeys(items))

        return KeyForms(
            union(h for f in forms for h in f.headers),
            union(s for f in forms for s in f.schemes),
            union(q for f in forms for q in f.queries),
            "; ".join(f.hint for f in forms if f.hint),
        )

    def unauthorized_hint(self) -> str:
        """What a 401 says on every route: each form this server takes, not only ours."""
        return "send your key: Authorization: Bearer <key>" + (f" ({self.hint})" if self.hint else "")

    def presented(self, header: Callable[[str], str | None]) -> list[str]:
        """Every key a request's headers carry, in the order they are tried: ``Authorization`` (Bearer or a
        wire's scheme), then the wires' key headers. Any one good key admits the caller, as the one tenant
        it names."""
        found = [bearer_key(header("authorization"), ("bearer", *self.schemes))]
        found += [header(name) for name in self.headers]
        return [key for key in found if key]

    def carries_one(self, header: Callable[[str], str | None]) -> bool:
        """The request presents a key in a header (good or not)."""
        return any(header(name) for name in ("authorization", *self.headers))


BEARER_ONLY = KeyForms()  # a wire whose clients send ``Authorization: Bearer`` alone


def bearer_key(value: str | None, schemes: tuple[str, ...] = ("bearer",)) -> str | None:
    """The key in an ``Authorization`` value of one of these schemes, else None."""
    scheme, _, supplied = (value or "").partition(" ")
    return supplied.strip() or None if scheme.lower() in schemes else None
