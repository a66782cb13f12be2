"""The recorder's database: one SQLite file (stdlib ``sqlite3``) in WAL mode.

One row per pod (``lives``): its uid, the times the queries need as columns, and the whole
``Life`` as JSON. Writes are batched: ``put`` keeps the latest life of each pod in memory and
``flush`` writes them all in one transaction (the recorder flushes a few times a second), so a
burst of watch events costs one commit. Readers use their own connection; WAL lets them read
while the writer writes.

``losses`` counts pods that were deleted while the recorder was not watching (found at a
restart): they are kept as records (phase Deleted, flagged lost) and counted, never dropped.
Retention deletes the rows of pods that ended before a horizon.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from recorder.lives import Life, life_json, parse_life

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS lives (
    uid TEXT PRIMARY KEY,
    submitted REAL NOT NULL,
    finished REAL,
    ended INTEGER NOT NULL,
    life TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS lives_finished ON lives (finished);
CREATE INDEX IF NOT EXISTS lives_open ON lives (ended);
CREATE TABLE IF NOT EXISTS losses (
    uid TEXT PRIMARY KEY,
    noticed REAL NOT NULL
);
"""


class StoreError(Exception):
    """The database cannot be opened or written."""


class Store:
    """The recorder's SQLite database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._pending: dict[str, Life] = {}
        self._lost: dict[str, float] = {}
        # put() runs in the event loop and must never wait for a commit: one lock guards what is
        # pending (held for a dict swap), another the database connection (flush runs in a
        # worker thread).
        self._lock = threading.Lock()
        self._db_lock = threading.Lock()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # The records name every team's pods and submitters: the recorder alone reads the
            # file (SQLite gives its -wal and -shm files the database's own mode).
            path.touch(mode=0o600, exist_ok=True)
            path.chmod(0o600)
            self._db = self._connect()
            self._db.execute("PRAGMA journal_mode=WAL")
            # WAL with synchronous=NORMAL survives a process kill (not a power cut of the
            # node, which may lose the last commits; the next start reconciles from the pods).
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except (sqlite3.Error, OSError) as e:
            raise StoreError(f"{path}: {e}") from e

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
        db.execute("PRAGMA busy_timeout=30000")
        return db

    def close(self) -> None:
        self.flush()
        with self._db_lock:
            self._db.close()

    # --- writing --------------------------------------------------------------------------

    def put(self, life: Life) -> None:
        """Record ``life`` at the next flush (a later put of the same pod replaces it)."""
        with self._lock:
            self._pending[life.uid] = life

    def lose(self, life: Life, noticed: float) -> None:
        """Record a pod deleted while nobody watched, and count it."""
        with self._lock:
            self._pending[life.uid] = life
            self._lost[life.uid] = noticed

    @property
    def pending(self) -> int:
        return len(self._pending)

    def flush(self) -> int:
        """Write what is pending in one transaction; how many lives were written."""
        with self._lock:
            lives, self._pending = self._pending, {}
            lost, self._lost = self._lost, {}
        if not lives and not lost:
            return 0
        rows = [(x.uid, x.submitted, x.finished, int(x.ended), life_json(x)) for x in lives.values()]
        try:
            with self._db_lock:
                self._db.execute("BEGIN")
                self._db.executemany(
                    "INSERT INTO lives (uid, submitted, finished, ended, life) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (uid) DO UPDATE SET submitted=excluded.submitted, "
                    "finished=excluded.finished, ended=excluded.ended, life=excluded.life",
                    rows,
                )
                self._db.executemany("INSERT OR IGNORE INTO losses (uid, noticed) VALUES (?, ?)",
                                     list(lost.items()))
                self._db.execute("COMMIT")
        except sqlite3.Error as e:
            with self._lock:  # keep them for the next flush, unless newer ones came meanwhile
                for uid, life in lives.items():
                    self._pending.setdefault(uid, life)
                for uid, noticed in lost.items():
                    self._lost.setdefault(uid, noticed)
            with self._db_lock:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
            raise StoreError(f"{self.path}: {e}") from e
        return len(rows)

    def forget_before(self, horizon: float) -> int:
        """Retention: delete pods that ended before ``horizon``; how many were deleted."""
        try:
            with self._db_lock:
                cursor = self._db.execute("DELETE FROM lives WHERE ended = 1 AND finished < ?", (horizon,))
                self._db.execute("DELETE FROM losses WHERE noticed < ?", (horizon,))
                return cursor.rowcount
        except sqlite3.Error as e:
            raise StoreError(f"{self.path}: {e}") from e

    # --- reading --------------------------------------------------------------------------

    def open_lives(self) -> list[Life]:
        """Every pod recorded as not ended (with what is pending): those a restart checks."""
        lives = {x.uid: x for x in self._read("SELECT life FROM lives WHERE ended = 0", ())}
        with self._lock:
            lives.update(self._pending)
        return [x for x in lives.values() if not x.ended]

    def recorded(self, uid: str) -> Life | None:
        with self._lock:
            if uid in self._pending:
                return self._pending[uid]
        found = self._read("SELECT life FROM lives WHERE uid = ?", (uid,))
        return found[0] if found else None

    def lives(self, since: float | None = None) -> list[Life]:
        """Pods still open, or that ended at or after ``since`` (all when None). Reads what is
        committed (a reader's view; pending lives arrive within a flush)."""
        if since is None:
            return self._read("SELECT life FROM lives", ())
        return self._read("SELECT life FROM lives WHERE ended = 0 OR finished >= ?", (since,))

    def losses(self, since: float | None = None) -> int:
        """How many pods were found deleted while the recorder was away (since ``since``)."""
        with self._db_lock:
            row = self._db.execute("SELECT count(*) FROM losses WHERE noticed >= ?",
                                   (since if since is not None else float("-inf"),)).fetchone()
        return int(row[0])

    def count(self) -> int:
        with self._db_lock:
            return int(self._db.execute("SELECT count(*) FROM lives").fetchone()[0])

    def _read(self, query: str, parameters: tuple[object, ...]) -> list[Life]:
        with self._db_lock:
            rows: Iterable[tuple[str]] = self._db.execute(query, parameters).fetchall()
        return [parse_life(text) for (text,) in rows]
