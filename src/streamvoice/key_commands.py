"""``streamvoice keys``: make, list and revoke tenants' keys where the store is (the embedded SQLite file,
or ``STREAMVOICE_STORE_URL``'s Redis that every replica reads). A key is printed once, when it is made: only
its digest is kept. Every server and agent on that store accepts it within seconds of ``create`` and refuses
it within seconds of ``revoke`` (and closes its open sockets). Checked by ``pytest tests/test_keys.py``."""

from __future__ import annotations

import argparse
import asyncio
import calendar
import json
import os
import re
import sys
import time

from streamvoice.store import StoreError, open_store
from streamvoice.store.keys import KeyRecord, KeyRecords

UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86_400}


def expiry(text: str | None, now: float) -> float | None:
    """``--expires``: a duration (``90d``, ``12h``, ``30m``, ``45s``) or a date (``2027-01-31``, UTC)."""
    if text is None:
        return None
    if match := re.fullmatch(r"(\d{1,7})([smhd])", text.strip()):
        return now + int(match[1]) * UNITS_S[match[2]]
    try:
        return float(calendar.timegm(time.strptime(text.strip(), "%Y-%m-%d")))  # midnight, UTC
    except ValueError:
        raise ValueError(
            f"--expires takes a duration (90d, 12h, 30m) or a date (2027-01-31), not {text[:40]!r}"
        ) from None


def _shown(record: KeyRecord) -> str:
    ends = (
        "never"
        if record.expires is None
        else time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.expires))
    )
    made = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(record.created))
    listeners = record.listeners if record.listeners is not None else "-"
    chars = record.chars_per_day if record.chars_per_day is not None else "-"
    return f"{record.name:<24} {listeners!s:>9} {chars!s:>13}  {made}  {ends}"


async def _run(args: argparse.Namespace) -> int:
    store = open_store(args.store_url or os.environ.get("STREAMVOICE_STORE_URL") or None)
    records = KeyRecords(store)
    try:
        if args.keys_command == "create":
            key, record = await records.create(
                args.name, args.listeners, args.chars_per_day, expiry(args.expires, time.time())
            )
            if args.json:
                print(json.dumps({"key": key, **record.shown()}))
            else:
                print(key)
                print(
                    f"(key {record.name!r}: shown once, keep it now; only its digest is stored)",
                    file=sys.stderr,
                )
        elif args.keys_command == "list":
            listed = await records.list()
            if args.json:
                print(json.dumps([r.shown() for r in listed]))
            else:
                print(f"{'name':<24} {'listeners':>9} {'chars/day':>13}  {'created':<20}  expires")
                for record in listed:
                    print(_shown(record))
        elif not await records.revoke(args.name):
            print(
                f"error: no key is named {args.name!r} (`streamvoice keys list` shows them)", file=sys.stderr
            )
            return 1
        return 0
    except (ValueError, StoreError) as exc:
        print(f"error: {getattr(exc, 'detail', exc)}", file=sys.stderr)
        return 2
    finally:
        await store.close()


def cmd_keys(args: argparse.Namespace) -> int:
    return asyncio.run(_run(args))


def add_key_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("keys", help="make, list and revoke tenants' keys (in the store every replica reads)")
    p.add_argument(
        "--store-url",
        help="the store: redis://HOST:6379/0 (default: $STREAMVOICE_STORE_URL, else the embedded file)",
    )
    ksub = p.add_subparsers(dest="keys_command", required=True)
    c = ksub.add_parser("create", help="make a key and print it (once)")
    c.add_argument("name", help="1-63 of a-z 0-9 _ . - (what /metrics labels its use with)")
    c.add_argument(
        "--listeners", type=int, help="its listeners and sessions at once, at most (across every replica)"
    )
    c.add_argument("--chars-per-day", type=int, help="characters it may have spoken a day (UTC), at most")
    c.add_argument("--expires", help="a duration (90d, 12h) or a date (2027-01-31); default: never")
    c.add_argument("--json", action="store_true")
    ksub.add_parser("list", help="every live key: name, share, created, expiry (never the key)").add_argument(
        "--json", action="store_true"
    )
    r = ksub.add_parser("revoke", help="revoke a key: refused everywhere within seconds, its sockets closed")
    r.add_argument("name")
    p.set_defaults(func=cmd_keys)
