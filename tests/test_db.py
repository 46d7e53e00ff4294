"""The database: schema made safely by several workers starting at once."""
from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import inspect

from funes.store.db import Database
from funes.tools.context import pack_metadata
from memory.store import metadata as memory_metadata


def test_workers_starting_together_share_one_schema(database_url):
    url = database_url
    extra = (memory_metadata, *pack_metadata(["finance", "trip", "watch_history"]))
    with ThreadPoolExecutor(6) as pool:
        databases = list(pool.map(lambda _: Database(url, extra=extra), range(6)))
    tables = set(inspect(databases[0].engine).get_table_names())
    assert {"decisions", "conversations", "messages", "memories", "finance_transactions", "watch_events"} <= tables
    if url.startswith("sqlite"):
        with databases[0].reading() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    assert all(db.ping() for db in databases)


def test_an_older_database_gains_the_columns_added_since(database_url):
    db = Database(database_url)
    with db.transaction() as conn:
        conn.exec_driver_sql('ALTER TABLE decisions DROP COLUMN "cards"')
        conn.exec_driver_sql("DROP INDEX ix_decisions_registry")
        conn.exec_driver_sql('ALTER TABLE decisions DROP COLUMN "registry"')
    assert not {"cards", "registry"} & {c["name"] for c in inspect(db.engine).get_columns("decisions")}
    with ThreadPoolExecutor(4) as pool:  # workers of an upgraded service start together
        reopened = list(pool.map(lambda _: Database(database_url), range(4)))[0]
    assert {"cards", "registry"} <= {c["name"] for c in inspect(reopened.engine).get_columns("decisions")}
    assert "ix_decisions_registry" in {i["name"] for i in inspect(reopened.engine).get_indexes("decisions")}
