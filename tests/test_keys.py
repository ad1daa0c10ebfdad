"""Key records and the key ring (``store.keys``) on both store backends, ``streamvoice keys`` on the command
line, and the agent checking its callers' keys against the same records (a real agent over a real speech
server, the agent speaking with a key of its own)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from streamvoice.agent.llm import ScriptedTextSource
from streamvoice.cli import main as cli_main
from streamvoice.engine.kokoro import KokoroEngine
from streamvoice.key_commands import expiry
from streamvoice.store import Store, open_store
from streamvoice.store.keys import BOOTSTRAP, KeyRecords, Keyring, key_digest
from tests.helpers import start_agent, start_speech_server


async def no_keys_yet(store: Store) -> KeyRecords:
    """The store's key records, none left: the session's one Redis keeps the keys earlier tests made."""
    records = KeyRecords(store)
    for record in await records.list():
        await records.revoke(record.name)
    return records


async def test_a_ring_knows_each_live_key_and_tells_when_one_goes(store: Store) -> None:
    records = await no_keys_yet(store)
    ring, other = Keyring(store, "boot"), Keyring(open_store(store.url), None)  # two replicas' rings
    await ring.refresh()
    await other.refresh()
    assert ring.required and not other.required  # no records: only a bootstrap key makes a key needed
    assert ring.find("boot") is not None and ring.find("boot").name == BOOTSTRAP  # type: ignore[union-attr]
    key, record = await records.create("acme", listeners=2, chars_per_day=900)
    soon, _ = await records.create("brief", expires=time.time() + 0.5)
    assert record.digest == key_digest(key) and key not in json.dumps(record.shown())
    gone: list[set[str]] = []
    other.on_revoked = gone.append
    await other.refresh()
    tenant = other.find(key)
    assert (
        other.required
        and tenant is not None
        and (tenant.name, tenant.listeners, tenant.chars_per_day)
        == (
            "acme",
            2,
            900,
        )
    )
    assert other.find("boot") is None and other.find(key + "x") is None and other.find(None) is None
    assert other.resolve(["wrong", key]) == tenant  # any one good key among those presented
    assert {r.name for r in await records.list()} == {"acme", "brief"}
    await asyncio.sleep(0.6)
    await other.refresh()
    assert other.find(soon) is None and gone == [{key_digest(soon)}]  # expired: told, as revoked
    assert await records.revoke("acme") and not await records.revoke("acme")
    await other.refresh()
    assert other.find(key) is None and gone[-1] == {key_digest(key)}
    again, _ = await records.create("acme")  # the name is free again: a new key, the same tenant's records
    await other.refresh()
    assert other.find(again).owner == tenant.owner and other.find(again).digest != tenant.digest  # type: ignore[union-attr]


async def test_creations_at_once_of_one_name_make_one_key(store: Store) -> None:
    records = await no_keys_yet(store)
    answers = await asyncio.gather(*(records.create("same") for _ in range(12)), return_exceptions=True)
    made = [a for a in answers if not isinstance(a, BaseException)]
    assert len(made) == 1 and all("exists" in str(a) for a in answers if isinstance(a, BaseException))
    ring = Keyring(store, None)
    await ring.refresh()
    assert ring.find(made[0][0]) is not None


def test_expiry_reads_durations_and_dates() -> None:
    assert expiry("90d", 1000.0) == 1000.0 + 90 * 86_400 and expiry("12h", 0.0) == 43_200
    assert expiry("2027-01-31", 0.0) == 1_801_353_600.0 and expiry(None, 5.0) is None
    with pytest.raises(ValueError, match="duration"):
        expiry("soon", 0.0)


def keys_cli(store_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``streamvoice keys ...`` as the command line runs it, in this process (each command is a store
    call; a process each cost ~0.8 s of imports)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main(["keys", "--store-url", store_url, *args])
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_the_installed_command_reaches_the_store(tmp_path: Path) -> None:
    cli = Path(sys.executable).parent / "streamvoice"
    url = f"sqlite://{tmp_path / 'store.sqlite3'}"
    made = subprocess.run(
        [str(cli), "keys", "--store-url", url, "create", "ops"], capture_output=True, text=True
    )
    assert made.returncode == 0 and made.stdout.startswith("sk_sv_"), made.stderr


def test_the_command_line_makes_lists_and_revokes_keys(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'store.sqlite3'}"
    made = keys_cli(
        url, "create", "team-a", "--listeners", "3", "--chars-per-day", "5000", "--expires", "30d"
    )
    assert made.returncode == 0, made.stderr
    key = made.stdout.strip()
    assert key.startswith("sk_sv_") and "shown once" in made.stderr
    listed = keys_cli(url, "list", "--json")
    shown = json.loads(listed.stdout)
    assert [(k["name"], k["listeners"], k["chars_per_day"]) for k in shown] == [("team-a", 3, 5000)]
    assert key not in listed.stdout and key_digest(key) not in listed.stdout
    for args, says in (
        (("create", "team-a"), "exists"),
        (("create", "Team A"), "a-z"),
        (("create", "x", "--listeners", "0"), "at least 1"),
        (("create", "x", "--expires", "later"), "duration"),
        (("revoke", "nobody"), "no key is named"),
    ):
        refused = keys_cli(url, *args)
        assert refused.returncode != 0 and says in refused.stderr, (args, refused.stderr)
    assert keys_cli(url, "revoke", "team-a").returncode == 0
    assert json.loads(keys_cli(url, "list", "--json").stdout) == []


def test_the_agent_checks_its_callers_keys_against_the_same_records(
    scripted: KokoroEngine, tmp_path: Path
) -> None:
    url = f"sqlite://{tmp_path / 'store.sqlite3'}"
    keys = [keys_cli(url, "create", name).stdout.strip() for name in ("agent", "caller-a", "caller-b")]
    agent_key, a, b = keys
    speech = start_speech_server(scripted, auth_token="speech-boot", store_url=url)
    source = ScriptedTextSource("Noted.", ttft_s=0.0)
    agent = start_agent(source, speech.url, auth_token="agent-boot", store_url=url, speech_token=agent_key)
    try:

        def turn(key: str, conversation: str = "c1") -> httpx.Response:
            body = {"prompt": "Remember this.", "conversation": conversation}
            return httpx.post(
                agent.url + "/invocations", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60
            )

        first = turn(a)
        assert first.status_code == 200 and "agent_end" in first.text  # spoken with the agent's own key
        assert turn(a).status_code == 200 and len(source.histories[-1]) > 0  # A's conversation goes on
        assert turn(b).status_code == 200 and source.histories[-1] == []  # B's "c1" is its own, new
        assert turn("sk_sv_wrong").status_code == 401
        assert keys_cli(url, "revoke", "caller-a").returncode == 0
        deadline = time.monotonic() + 10
        while turn(a).status_code != 401:  # the agent reads the records again within 2 s
            assert time.monotonic() < deadline, "a revoked key was still accepted after 10 s"
            time.sleep(0.2)
        used = httpx.get(speech.url + "/metrics", headers={"Authorization": "Bearer speech-boot"}).text
        assert 'streamvoice_key_requests_total{key="agent"}' in used  # the agent spoke as itself
    finally:
        agent.stop()
        speech.stop()


async def test_a_tenants_listeners_are_leases_a_dead_replica_gives_back(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A capped tenant's listeners are counted in the store across replicas (``Tenancy.claim``); a replica
    that dies holding some stops renewing them, and they expire (``LEASE_S``), so the tenant is not locked
    out for good."""
    from streamvoice.protocol import ErrorCode, ProtocolError
    from streamvoice.server.core import tenancy as tenancy_module
    from streamvoice.server.core.metrics import Metrics
    from streamvoice.server.core.tenancy import Tenancy
    from streamvoice.store.keys import Tenant

    monkeypatch.setattr(tenancy_module, "LEASE_S", 0.5)
    tenant = Tenant("capped", f"owner-{time.time_ns()}", "digest", listeners=2)
    dead, alive = (Tenancy(store, Metrics()) for _ in range(2))  # two replicas
    await dead.claim(tenant, "a")
    await alive.claim(tenant, "b")
    with pytest.raises(ProtocolError) as full:
        await alive.claim(tenant, "c")
    assert full.value.code == ErrorCode.CONCURRENT_LIMIT_EXCEEDED
    renewing = asyncio.create_task(alive.run())  # the live replica renews its lease; the dead one cannot
    try:
        await asyncio.sleep(0.8)
        await alive.claim(tenant, "c")  # the dead replica's lease has expired; the live one's has not
        with pytest.raises(ProtocolError):
            await alive.claim(tenant, "d")
    finally:
        renewing.cancel()
    alive.drop_lease("b")
    await asyncio.gather(*alive._forgetting)  # its delete, made in the background
    await alive.claim(tenant, "d")  # a lease given back frees its place at once


async def test_an_unbounded_tenants_use_is_written_later_and_never_stops_its_speech(store: Store) -> None:
    """Without a quota nothing needs the store before speaking: the count is kept here (and shown), then
    written with the next renewal; a store that fails keeps it for the write after."""
    from streamvoice.server.core.metrics import Metrics
    from streamvoice.server.core.tenancy import USAGE_KIND, Tenancy, today
    from streamvoice.store.keys import Tenant

    tenancy = Tenancy(store, Metrics())
    tenant = Tenant("open", f"owner-{time.time_ns()}", "digest")
    await tenancy.charge(tenant, 40)
    await tenancy.charge(tenant, 2, bounded=False)
    key = today(time.time())
    assert await store.get(USAGE_KIND, tenant.owner, key) is None  # nothing written on the speech's path
    assert await tenancy.used_today(tenant) == 42
    real_tally = store.tally

    async def failing(*args: object, **kwargs: object) -> int | None:
        from streamvoice.store import StoreError

        raise StoreError("down for the test")

    store.tally = failing  # type: ignore[method-assign]
    await tenancy.write_use()
    store.tally = real_tally  # type: ignore[method-assign]
    assert await tenancy.used_today(tenant) == 42  # kept for the next write
    await tenancy.write_use()
    assert await store.get(USAGE_KIND, tenant.owner, key) == b"42" and await tenancy.used_today(tenant) == 42
