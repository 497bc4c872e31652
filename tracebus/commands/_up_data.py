"""The data the workers read under ``tracebus up``: the SQLite sample or a PostgreSQL.

A mixin of :class:`tracebus.commands.up.Up`, kept apart from starting and watching the
processes. With ``--source sqlite`` it generates ``<data-dir>/sample.db`` on first run, in a
child process (its hundreds of MB go with the child) that a Ctrl-C or SIGTERM stops, leaving
no half-written file. With ``--source postgres`` it checks the server of
``TRACEBUS_POSTGRES_DSN`` (never written to), or starts a private PostgreSQL in
``<data-dir>/postgres`` and loads the sample into it on first run. Not a command
(``tracebus/cli.py`` skips modules whose name starts with ``_``).
"""

from __future__ import annotations

import gc
import multiprocessing
import shlex
import signal
import time
from pathlib import Path

from tracebus.errors import ConfigError
from tracebus.redis_proc import pick_port

#: First port ``tracebus up`` tries for its own PostgreSQL (5432 is left to a system server).
FIRST_POSTGRES_PORT = 5433
#: Seconds the sample data takes at scale 1.0 (measured: 15 s on two cores; was said as 90).
SECONDS_PER_SCALE = 15


def say(text: str) -> None:
    """One line of up's console output, flushed at once (up's children write there too)."""
    print(text, flush=True)


class UpData:
    """Set up the source's data. Expects ``settings``, ``data_dir``, ``scale``, ``signals``
    (the signals recorded so far), ``children``, ``_interruptible`` and ``cids_db`` (the
    ``--db`` the banner's example names), which :class:`tracebus.commands.up.Up` sets."""

    def _sample_data(self) -> Path | None:
        if self.settings.source == "postgres":
            return None  # the sample lives in PostgreSQL (_postgres)
        if self.settings.source != "sqlite":
            say(f"data: TRACEBUS_SOURCE={self.settings.source}; no sample data needed")
            return None
        db = self.data_dir / "sample.db"
        if db.exists():
            say(f"data: using {db} (delete it to generate another scale)")
            return db
        say(f"data: generating {db} at scale {self.scale} (about {max(1, round(SECONDS_PER_SCALE * self.scale))} s)...")
        started = time.monotonic()
        if not self.signals.empty():  # a Ctrl-C / SIGTERM already: none of the generation
            raise KeyboardInterrupt
        counts = self._generate_in_child(db)
        say(f"data: {counts['DW_MES_CONTAINER']} containers written in {time.monotonic() - started:.1f} s")
        return db

    def _generate_in_child(self, db: Path) -> dict:
        """Generate the sample in a child process: the generation's data (hundreds of MB at scale
        1.0) goes with the child, so up stays near its idle size while it runs everything else
        (it kept 351 MB when it generated the sample itself, issue 39). A Ctrl-C / SIGTERM stops
        the child and removes the half-written database."""
        context = multiprocessing.get_context("fork")
        receive, send = context.Pipe(duplex=False)
        child = context.Process(target=_generate_sample, args=(db, self.scale, send), name="tracebus-sample",
                                daemon=True)
        child.start()
        send.close()
        try:
            while child.is_alive() and self.signals.empty():
                child.join(0.1)
            if not self.signals.empty():
                raise KeyboardInterrupt
            counts = receive.recv() if receive.poll() else None
        except BaseException:
            child.kill()
            child.join()
            _remove_sample(db, child.pid)  # up's own, just written: never kept half-asked-for
            raise
        finally:
            receive.close()
        if child.exitcode != 0 or counts is None:
            _remove_sample(db, child.pid)
            raise RuntimeError(f"generating the sample data failed (exit {child.exitcode}); see the lines above")
        return counts

    def _postgres(self) -> str:
        """The DSN the workers read: TRACEBUS_POSTGRES_DSN as it is, or a private server's
        (started here, the sample loaded into it on first run)."""
        import psycopg

        from tracebus.commands._datadir import write_private
        from tracebus.pg_proc import PostgresServer
        from tracebus.trace.synth.postgres import existing_tables, generate_postgres

        if self.settings.postgres_dsn:
            dsn = self.settings.postgres_dsn
            try:
                psycopg.connect(dsn, connect_timeout=5).close()
            except psycopg.Error as e:
                from tracebus.trace.sources.postgres import translate

                raise ConfigError(f"TRACEBUS_POSTGRES_DSN does not answer ({translate(e, dsn).message}); start it "
                                  "or unset TRACEBUS_POSTGRES_DSN for a private server") from None
            say("data: reading the PostgreSQL of TRACEBUS_POSTGRES_DSN (nothing is written to it)")
            self.cids_db = '"$TRACEBUS_POSTGRES_DSN"'
            return dsn
        folder = self.data_dir / "postgres"
        server = PostgresServer(folder, durable=True, port=pick_port(FIRST_POSTGRES_PORT), any_port=True)
        try:
            server.start()
        except RuntimeError as e:
            raise ConfigError(str(e)) from None
        self.children.adopt("postgres", server.process, stop_timeout_s=30)
        url_file = folder / "url"
        write_private(url_file, server.url + "\n")
        self.cids_db = f'"$(cat {shlex.quote(str(url_file))})"'
        say(f"postgres: started a private PostgreSQL on 127.0.0.1:{server.port} (files in {folder}, "
            "password in its password file, URL in its url file)")
        with psycopg.connect(server.url) as conn:
            loaded = existing_tables(conn)
        if loaded:
            say(f"data: using the sample in {folder} (delete that folder to load another scale)")
            return server.url
        say(f"data: loading the sample into PostgreSQL at scale {self.scale} "
            f"(about {max(1, round(SECONDS_PER_SCALE * 2 * self.scale))} s)...")
        started = time.monotonic()
        gc.collect()
        self._interruptible = True
        try:
            if not self.signals.empty():
                raise KeyboardInterrupt
            counts = generate_postgres(server.url, scale=self.scale)  # one transaction: all or nothing
        finally:
            self._interruptible = False
        if not self.signals.empty():
            raise KeyboardInterrupt
        say(f"data: {counts['DW_MES_CONTAINER']} containers loaded in {time.monotonic() - started:.1f} s")
        return server.url


def _remove_sample(db: Path, pid: int) -> None:
    """Remove a sample the child wrote, and its temporary file (``synth.generate``'s naming)."""
    db.unlink(missing_ok=True)
    db.with_name(f".{db.name}.{pid}.tmp").unlink(missing_ok=True)


def _generate_sample(db: Path, scale: float, send) -> None:
    """The child of :meth:`UpData._generate_in_child`: signals are the parent's to handle."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; up decides
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from tracebus.trace import synth

    send.send(synth.generate(db, scale=scale))
    send.close()
