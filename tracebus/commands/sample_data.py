"""``tracebus sample-data``: generate the synthetic SQLite database, or list its trace CIDs.

``tracebus sample-data --scale S --out PATH`` writes the database (default path:
``TRACEBUS_SQLITE_PATH``); ``--to postgresql://...`` writes the same rows into a PostgreSQL
database instead (refused when it has tables of those names, unless ``--replace``);
``tracebus sample-data cids --db PATH [--station TMTT]`` prints the five-month trace CID set,
one per line.
"""

from __future__ import annotations

import sqlite3
import sys
import time
from pathlib import Path

from tracebus.errors import ConfigError, InvalidParams


def add_parser(sub) -> None:
    p = sub.add_parser("sample-data", help="generate the synthetic MES database, or list its trace CIDs",
                       description=__doc__.splitlines()[0])
    p.add_argument("--scale", type=float, default=1.0,
                   help="1.0: ~120K containers, ~2M event rows; 0.01 / 0.1 for tests")
    p.add_argument("--out", default=None, help="database to write (default: TRACEBUS_SQLITE_PATH)")
    p.add_argument("--to", default=None, metavar="URL",
                   help="write into this PostgreSQL database instead (postgresql://user:password@host:port/db)")
    p.add_argument("--replace", action="store_true",
                   help="with --to: drop the sample's tables first when the database has them")
    p.add_argument("--seed", type=int, default=None, help="random seed (same seed and scale: same data)")
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    c = actions.add_parser("cids", help="print the trace CID set of a station, one per line")
    c.add_argument("--db", default=None,
                   help="database to read: a file or a postgresql:// URL (default: TRACEBUS_SQLITE_PATH)")
    c.add_argument("--station", default="TMTT", help="station group or keyword (default: TMTT)")
    p.set_defaults(func=run, find_redis_url=False)  # it needs no Redis


def run(args, settings) -> int:
    from tracebus.trace import synth

    if args.action == "cids":
        if synth.trace_set.is_postgres_url(args.db):
            return _cids_from_postgres(args)
        return _cids_from_sqlite(args, settings)
    if not args.scale > 0:
        raise ConfigError(f"--scale must be > 0, got {args.scale}")
    if args.to is not None:
        return _to_postgres(args)
    return _to_sqlite(args, settings)


def _cids_from_sqlite(args, settings) -> int:
    """``sample-data cids`` on a database file: its trace CIDs on stdout, one a line."""
    from tracebus.trace import synth

    db = _cids_db(args, settings)
    if not db.is_file():
        where = "--db" if args.db else "TRACEBUS_SQLITE_PATH"
        raise ConfigError(f"no sample database at {db} ({where}; relative to {Path.cwd()}): run from "
                          "the project folder, pass --db, or generate it with 'tracebus sample-data'")
    try:
        found = synth.cids(db, station=args.station)
    except sqlite3.DatabaseError as e:
        raise ConfigError(f"{db} is not a tracebus sample database: {e}") from None
    if not found:  # a typo must not look like an empty station
        raise InvalidParams(f"no trace CIDs for --station {args.station!r} in {db} (the sample's "
                            "station groups are e.g. TMTT, the default)")
    out = sys.stdout
    for cid in found:
        out.write(cid + "\n")
    return 0


def _to_sqlite(args, settings) -> int:
    """``sample-data`` into a file: --out, else TRACEBUS_SQLITE_PATH (always replaced)."""
    from tracebus.trace import synth

    if args.replace:
        raise ConfigError("--replace goes with --to (an --out file is always replaced)")
    path = args.out or settings.sqlite_path
    if not Path(path).resolve().parent.is_dir():  # never a tree of folders made for a typo
        raise ConfigError(f"--out {path}: the folder {Path(path).resolve().parent} does not exist")
    started = time.monotonic()
    seed = synth.DEFAULT_SEED if args.seed is None else args.seed
    counts = synth.generate(path, scale=args.scale, seed=seed)
    lookups = ("DW_MES_CONTAINER", "DW_MES_SPEC_WORKCENTER_V", "DW_MES_PJ_COMBINEDASSYLOTS")
    events = sum(n for t, n in counts.items() if t not in lookups)
    print(f"wrote {path}: {counts['DW_MES_CONTAINER']} containers, {events} event rows "
          f"in {time.monotonic() - started:.1f}s ({', '.join(f'{t}={n}' for t, n in counts.items())})")
    return 0


def _cids_db(args, settings) -> Path:
    """--db, else TRACEBUS_SQLITE_PATH when set, else the project's data dir's sample.db (found
    from any folder of the project, as its redis.url is), else the default path."""
    from tracebus.engine.project import find_data_dir

    if args.db:
        return Path(args.db)
    if not type(settings).is_set("TRACEBUS_SQLITE_PATH"):
        data_dir = find_data_dir()
        if data_dir is not None and (data_dir / "sample.db").is_file():
            return data_dir / "sample.db"
    return Path(settings.sqlite_path)


def _to_postgres(args) -> int:
    import psycopg

    from tracebus.errors import TracebusError
    from tracebus.trace import synth
    from tracebus.trace.synth.postgres import TablesExist, generate_postgres

    if args.out is not None:
        raise ConfigError("--out and --to are exclusive: a file or a PostgreSQL database")
    if not args.to.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"--to takes a PostgreSQL URL (postgresql://user:password@host:port/db), "
                          f"got {args.to.split('://')[0] + '://...' if '://' in args.to else 'a text without a scheme'}")
    started = time.monotonic()
    seed = synth.DEFAULT_SEED if args.seed is None else args.seed
    try:
        counts = generate_postgres(args.to, scale=args.scale, seed=seed, replace=args.replace)
    except TablesExist as e:
        raise ConfigError(f"the database already has the sample's tables ({e}): pass --replace to drop "
                          "and write them again") from None
    except psycopg.Error as e:
        from tracebus.trace.sources.postgres import translate

        raise TracebusError(translate(e, args.to).message + " (nothing was written)") from None
    events = sum(n for t, n in counts.items()
                 if t not in ("DW_MES_CONTAINER", "DW_MES_SPEC_WORKCENTER_V", "DW_MES_PJ_COMBINEDASSYLOTS"))
    info = psycopg.conninfo.conninfo_to_dict(args.to)
    where = f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"
    print(f"wrote postgresql://{where}: {counts['DW_MES_CONTAINER']} containers, {events} event rows "
          f"in {time.monotonic() - started:.1f}s ({', '.join(f'{t}={n}' for t, n in counts.items())})")
    return 0


def _cids_from_postgres(args) -> int:
    import psycopg

    from tracebus.errors import TracebusError
    from tracebus.trace import synth
    from tracebus.trace.sources.postgres import translate

    try:
        found = synth.cids(args.db, station=args.station)
    except psycopg.Error as e:
        raise TracebusError(translate(e, args.db).message) from None
    if not found:
        raise InvalidParams(f"no trace CIDs for --station {args.station!r} in that database")
    sys.stdout.write("".join(cid + "\n" for cid in found))
    return 0
