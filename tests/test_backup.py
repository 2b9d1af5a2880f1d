"""Backing up a running daemon: `frontmind backup` and `POST /v1/admin/backup` while turns
run, then the daemon killed (-9) with a backup in flight. The original is intact, and
every backup that finished opens, passes SQLite's integrity check and replays each of
its continuums."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import signal
import sqlite3
import stat
from pathlib import Path

import anyio
import httpx2
import pytest

from frontmind import Frontmind
from frontmind._frontmind import NoModel
from frontmind.config import Config
from storage import InvalidInput, SQLiteStorage
from storage._migrations import SCHEMA_VERSION
from tests._daemon import ROOT, daemon, run_cli, turn
from tests._postgres import PostgresServer
from tests.test_forget import ADMIN, auth, fill, ok

pytestmark = [pytest.mark.anyio]

STORES = Path(__file__).resolve().parent / "stores"


def integrity(path: Path) -> str:
    with sqlite3.connect(path) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])


def restore(backup: Path, data_dir: Path) -> None:
    """The README's restore: the backup becomes the data directory's database."""
    data_dir.mkdir()
    shutil.copyfile(backup, data_dir / "frontmind.db")


async def replayed(database: Path, data_dir: Path) -> dict[str, int]:
    """Open the backup as a data directory's store; each continuum's history is all
    there (as many messages as the continuum counts) and its next turn composes."""
    restore(database, data_dir)
    seen: dict[str, int] = {}
    async with Frontmind.open(data_dir, Config(), model=NoModel()) as fm:
        for user in ("alice", "default"):
            mine = fm.user(user)
            for continuum in await mine.continuums():
                history = await mine.history(continuum.id)
                assert len(history) == continuum.message_count > 0
                request = await mine.context(continuum.id, "and now?")
                assert request.messages
                seen[f"{user}/{continuum.id}"] = len(history)
    return seen


async def test_a_backup_in_the_stores_own_process_leaves_its_wal_alone(tmp_path: Path) -> None:
    """The API's backup runs inside the daemon, beside the store's open connections. The
    copy must go through the store's own SQLite library: a second copy of SQLite in the
    process cannot see the store's locks, and closing it deleted the live WAL (the next
    read failed with a disk I/O error, or the process died of SIGBUS)."""
    path = tmp_path / "frontmind.db"
    async with await SQLiteStorage.open(path) as store:

        async def write(n: int) -> None:
            await store.add_user(f"user{n}", hashlib.sha256(str(n).encode()).hexdigest())

        await write(0)
        for n in range(1, 6):
            async with anyio.create_task_group() as tg:
                tg.start_soon(write, n)
                tg.start_soon(store.backup, tmp_path / f"b{n}.db")
            assert (tmp_path / "frontmind.db-wal").exists()
            assert [u.name for u in await store.users()] == [f"user{i}" for i in range(n + 1)]
        await write(6)
    assert integrity(path) == "ok"
    async with await SQLiteStorage.open(path) as reopened:
        assert len(await reopened.users()) == 7
    for n in range(1, 6):
        assert integrity(tmp_path / f"b{n}.db") == "ok"


async def test_a_backup_path_that_names_no_writable_file_is_refused_first(
    tmp_path: Path,
) -> None:
    """The backup replaces what is at its path by a rename: onto the store's own files
    it would swap the database under its connections (later writes lost), onto a
    device or a directory it would replace that. Each is refused before anything is
    written, and the store goes on as it was."""
    path = tmp_path / "frontmind.db"
    (tmp_path / "folder").mkdir()
    async with await SQLiteStorage.open(path) as store:
        await store.add_user("before", hashlib.sha256(b"0").hexdigest())
        for bad, said in [
            (path, "the store's own database"),
            (tmp_path / "frontmind.db-wal", "the store's own database"),
            (tmp_path / "sub" / ".." / "frontmind.db", "the store's own database"),
            (Path("/dev/null"), "not a regular file"),
            (tmp_path / "folder", "not a regular file"),
            (Path("/"), "names no file"),
            (tmp_path / "a\0b.db", "NUL"),
            (tmp_path / ("x" * 300), "too long"),
            (tmp_path / ("x" * 300) / "b.db", "too long"),  # a directory's name
            (tmp_path / "missing" / "b.db", "no existing directory"),
        ]:
            with pytest.raises(InvalidInput, match=said):
                await store.backup(bad)
        await store.add_user("after", hashlib.sha256(b"1").hexdigest())
        assert {u.name for u in await store.users()} == {"before", "after"}
        assert await store.backup(tmp_path / "frontmind.db.bak") > 0  # beside it: fine
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert integrity(tmp_path / "frontmind.db.bak") == "ok"


@pytest.mark.slow
async def test_a_backup_onto_the_data_dirs_lock_file_is_refused(tmp_path: Path) -> None:
    """Written aside and renamed onto `frontmind.lock`, a backup took the lock's place:
    the daemon kept its lock on the old file, and a second daemon then locked the new
    one and served the same store beside it."""
    data = tmp_path / "data"
    lock = data / "frontmind.lock"
    async with daemon(data) as d, d.client() as client:
        # The route takes database names only (`.db`: a link to the lock so named).
        (tmp_path / "lock.db").symlink_to(lock)
        for path in (tmp_path / "lock.db", tmp_path / "sub" / ".." / "lock.db"):
            answer = await client.post("/v1/admin/backup", json={"path": str(path)})
            assert answer.status_code == 400, answer.text
            assert "lock file" in answer.json()["error"]["message"]
        code, _, err = await run_cli("backup", str(lock), "--data-dir", str(data))
        assert code == 2, err
        assert "the data directory's lock file" in err
        # The lock as it was: the file the daemon locked, holding its pid.
        assert lock.read_bytes() == f"{d.process.pid}\n".encode()
        assert await d.stop() == 0


def schema_of(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT version FROM schema_version").fetchone()[0])


async def test_a_backup_leaves_a_store_of_an_earlier_schema_as_it_is(tmp_path: Path) -> None:
    """A store of the release before (its daemon still serving it, or a backup taken
    before the upgrade) is backed up as it is: the command migrated it, under that
    daemon, and neither the store nor its backup opened with that release again. The
    backup opens (and upgrades) with this one, every row kept."""
    data = tmp_path / "data"
    data.mkdir()
    shutil.copyfile(STORES / "sqlite_v11.db", data / "frontmind.db")
    backup = tmp_path / "before-upgrade.db"
    code, _, err = await run_cli("backup", str(backup), "--data-dir", str(data))
    assert code == 0, err
    assert schema_of(data / "frontmind.db") == schema_of(backup) == 11
    assert integrity(backup) == "ok"
    async with await SQLiteStorage.open(backup) as store:
        assert await store.schema_version() == SCHEMA_VERSION
        assert [m.text for m in await store.memories("default")] == ["Ada's cat is called Turing"]


async def test_two_backups_to_one_path_at_once_both_succeed_whole(tmp_path: Path) -> None:
    """Each backup writes aside under a name of its own: two at once to one path both
    succeed, the file there is whole, and nothing is left beside it."""
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        for n in range(200):
            await store.add_user(f"u{n}", hashlib.sha256(str(n).encode()).hexdigest())
        target = tmp_path / "copy.db"
        sizes: list[int] = []

        async def one() -> None:
            sizes.append(await store.backup(target))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(one)
    assert len(sizes) == 4
    assert all(size > 0 for size in sizes)
    assert sorted(n for n in os.listdir(tmp_path) if n.startswith("copy")) == ["copy.db"]
    assert integrity(target) == "ok"


async def test_a_backup_clears_what_a_killed_backup_left_beside_its_path(tmp_path: Path) -> None:
    """A backup killed mid-copy (kill -9, a cron's `timeout`, a daemon that died) left its
    partial copy (every user's data) and its journal beside the path for good: each one
    more full-size copy in the backups' directory, which no later backup removed. One in
    progress, whose writer still holds it, is left to finish."""
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        await store.add_user("alice", hashlib.sha256(b"a").hexdigest())
        target = tmp_path / "copy.db"
        killed = tmp_path / "copy.db.0badc0de.partial"
        killed.write_bytes(b"SQLite format 3\x00" + bytes(4096))
        (tmp_path / "copy.db.0badc0de.partial-journal").write_bytes(bytes(512))
        running = tmp_path / "copy.db.5ca1ab1e.partial"
        with running.open("wb") as held:
            fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # as a backup in progress holds it
            assert await store.backup(target) > 0
            left = sorted(n for n in os.listdir(tmp_path) if n.startswith("copy"))
    assert left == ["copy.db", running.name]
    assert integrity(target) == "ok"


@pytest.mark.slow
async def test_backups_under_load_survive_a_killed_daemon(tmp_path: Path) -> None:
    data = tmp_path / "data"
    backups = tmp_path / "backups"
    backups.mkdir()
    async with daemon(data, "--token", ADMIN) as d:
        async with d.client(headers=auth(ADMIN)) as admin:
            alice_token = (await ok(await admin.post("/v1/users", json={"name": "alice"}), 201))[
                "token"
            ]
            await fill(admin, "otter")
        killing = False
        turns_run = 0

        async def load(continuum: str) -> None:
            nonlocal turns_run
            async with d.client(headers=auth(alice_token)) as alice:
                while True:
                    try:
                        events = await turn(alice, continuum, f"turn {turns_run} of {continuum}")
                    except (httpx2.TransportError, AssertionError):
                        if killing:
                            return  # the daemon was killed under this turn
                        raise
                    assert events[-1][0] == "turn.completed"
                    turns_run += 1

        async def last_backup() -> None:
            async with d.client(headers=auth(ADMIN)) as admin:
                try:
                    await admin.post("/v1/admin/backup", json={"path": str(backups / "last.db")})
                except httpx2.TransportError:
                    assert killing

        async with anyio.create_task_group() as tg:
            for continuum in ("one", "two"):
                tg.start_soon(load, continuum)
            for number in range(3):
                code, _, err = await run_cli(
                    "backup", str(backups / f"cli{number}.db"), "--data-dir", str(data)
                )
                assert code == 0, err
                async with d.client(headers=auth(ADMIN)) as admin:
                    done = await ok(
                        await admin.post(
                            "/v1/admin/backup", json={"path": str(backups / f"api{number}.db")}
                        )
                    )
                    assert done["bytes"] == (backups / f"api{number}.db").stat().st_size
            # A user's token may not back up; a relative path is refused.
            async with d.client(headers=auth(alice_token)) as alice:
                refused = await alice.post("/v1/admin/backup", json={"path": str(backups / "x")})
                assert refused.status_code == 403
            async with d.client(headers=auth(ADMIN)) as admin:
                relative = await admin.post("/v1/admin/backup", json={"path": "x.db"})
                assert relative.status_code == 400
            # Kill the daemon with a backup (and turns) in flight.
            tg.start_soon(last_backup)
            await anyio.wait_all_tasks_blocked()
            killing = True
            d.process.send_signal(signal.SIGKILL)
            await d.process.wait()
    assert turns_run > 0

    assert integrity(data / "frontmind.db") == "ok"
    async with await SQLiteStorage.open(data / "frontmind.db") as original:
        assert [u.name for u in await original.users()] == ["alice"]
    finished = sorted(backups.glob("*.db"))
    assert len(finished) >= 6
    counts = []
    for backup in finished:
        assert integrity(backup) == "ok", backup
        counts.append(sum((await replayed(backup, tmp_path / backup.stem)).values()))
    # Taken one after the other under load: each holds at least what the one before held.
    cli = [counts[finished.index(backups / f"cli{n}.db")] for n in range(3)]
    assert cli == sorted(cli)


async def test_the_store_its_backup_and_the_data_dir_are_the_owners_alone(
    tmp_path: Path,
) -> None:
    """Under the usual umask (022) the data directory was made 0755 and SQLite made the
    database 0644 (its WAL and shared memory take its mode), and a backup 0644: every
    local account could read every user's conversations and token digests. A new data
    directory is 0700, and the database, its WAL, the lock and a backup are 0600."""
    data_dir = tmp_path / "new" / "data"
    backup = tmp_path / "copy.db"
    old = os.umask(0o022)
    try:
        async with daemon(data_dir, "--token", ADMIN) as d:
            async with d.client(headers=auth(ADMIN)) as c:
                await ok(await c.post("/v1/memories", json={"text": "a private otter"}), 201)
                await ok(await c.post("/v1/admin/backup", json={"path": str(backup)}))
                modes = {
                    name: stat.S_IMODE((data_dir / name).stat().st_mode)
                    for name in ("frontmind.db", "frontmind.db-wal", "frontmind.lock")
                }
            assert await d.stop() == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert modes == dict.fromkeys(modes, 0o600)
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600


KEY_LINE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl x"


@pytest.mark.slow
async def test_the_backup_route_writes_no_file_a_program_would_read_as_its_own(
    tmp_path: Path,
) -> None:
    """A backup holds every user's text byte for byte, a line of it on a line of its own:
    written as ~/.ssh/authorized_keys (or a .pth, a .bashrc), it was a key sshd took, so
    the admin token (or, with no token on loopback, any local account) became a shell
    as the daemon's user. The route writes only a file named as a database (.db,
    .sqlite, .sqlite3), and never replaces a file that is not a SQLite database."""
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    notes = tmp_path / "notes.db"
    notes.write_text("not a database\n")
    old = tmp_path / "old.db"
    async with (
        daemon(tmp_path / "data", "--token", ADMIN) as d,
        d.client(headers=auth(ADMIN)) as admin,
    ):
        text = f"my key\n{KEY_LINE}\nend"
        await ok(await admin.post("/v1/memories", json={"text": text}), 201)
        for path in (ssh / "authorized_keys", tmp_path / "evil.pth", tmp_path / ".bashrc"):
            refused = await admin.post("/v1/admin/backup", json={"path": str(path)})
            assert refused.status_code == 400, refused.text
            assert ".db" in refused.json()["error"]["message"]
            assert not path.exists()
        refused = await admin.post("/v1/admin/backup", json={"path": str(notes)})
        assert refused.status_code == 400, refused.text
        assert "not a SQLite database" in refused.json()["error"]["message"]
        assert notes.read_text() == "not a database\n"
        # A backup still goes where backups go, and replaces an earlier one.
        for _ in range(2):
            await ok(await admin.post("/v1/admin/backup", json={"path": str(old)}))
    assert integrity(old) == "ok"
    assert sorted(p.name for p in ssh.iterdir()) == []


async def test_a_backup_never_replaces_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    target = tmp_path / "kept.db"
    target.write_bytes(b"someone's file")
    empty = tmp_path / "empty.db"
    empty.touch()
    async with await SQLiteStorage.open(tmp_path / "frontmind.db") as store:
        with pytest.raises(InvalidInput, match="not a SQLite database"):
            await store.backup(target)
        assert await store.backup(empty) > 0  # an empty file holds nothing to lose
        assert await store.backup(empty) > 0  # nor does an earlier backup
    assert target.read_bytes() == b"someone's file"
    assert integrity(empty) == "ok"


@pytest.mark.slow
async def test_a_postgresql_store_is_sent_to_pg_dump_by_a_readme_section_that_exists(
    tmp_path: Path, pg_server: PostgresServer
) -> None:
    """The refusal pointed at "the README's Backups", a section the README does not have
    (its backups are under "Moving, backing up, forgetting"), so the operator it was
    meant to guide searched for it in vain."""
    url = pg_server.new_database()
    code, _, err = await run_cli("backup", str(tmp_path / "b.db"), "--database", url)
    assert code == 2, err
    assert "pg_dump" in err, err
    named = re.search(r'README\'s "([^"]+)"', err)
    assert named is not None, err
    readme = (ROOT / "README.md").read_text()
    assert f"## {named.group(1)}\n" in readme, named.group(1)
