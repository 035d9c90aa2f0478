"""The checkpoint store on SQLite and on the real PostgreSQL: round trips,
upserts, the never-backwards fencing rule, schemas, health and errors."""

from __future__ import annotations

import shutil
import sqlite3
import traceback

import orjson
import pytest
from sqlalchemy import Column, Integer, Table, create_engine, event, inspect, text

from agent import synth
from agent.core.config import CoreConfig
from agent.core.state import PartitionState
from agent.demo.process import free_port
from agent.io.store.database import Checkpoint, Opening, Store, StoreError

GROUP = "ragdrift"


@pytest.fixture
def store(url):
    with Store(url) as s:
        yield s


def real_state(seed: int, events: int = 40) -> dict:
    """A partition's checkpointed state after real traffic, as the agent writes it."""
    state = PartitionState(CoreConfig())
    for line in synth.generate(events, seed):
        state.process(line)
    return state.to_dict()


def as_stored(state: dict) -> dict:
    return orjson.loads(orjson.dumps(state))


def test_round_trip_of_several_partitions_in_one_save(store):
    states = {("a", 0): real_state(1), ("a", 1): real_state(2), ("b", 0): real_state(3)}
    store.save(GROUP, [Checkpoint(topic=t, partition=p, next_offset=100 + p, state=s) for (t, p), s in states.items()])
    for (topic, partition), state in states.items():
        loaded = store.load(GROUP, topic, partition)
        assert loaded == Checkpoint(topic=topic, partition=partition, next_offset=100 + partition,
                                    state=as_stored(state))
        # What comes back restores an equal partition state.
        restored = PartitionState.from_dict(CoreConfig(), loaded.state)
        assert restored.to_dict() == as_stored(state)
    assert store.load(GROUP, "a", 2) is None
    assert store.load("other-group", "a", 0) is None  # groups do not see each other's state


def test_empty_save_is_a_no_op(store):
    store.save(GROUP, [])
    assert store.load(GROUP, "a", 0) is None


def test_a_failed_save_writes_nothing(store):
    good = Checkpoint(topic="a", partition=0, next_offset=10, state={"n": 1})
    bad = Checkpoint(topic="a", partition=1, next_offset=None, state={"n": 2})  # NOT NULL violated in the transaction
    with pytest.raises(StoreError, match="checkpoint failed"):
        store.save(GROUP, [good, bad])
    assert store.load(GROUP, "a", 0) is None
    assert store.load(GROUP, "a", 1) is None


def test_save_upserts(store):
    store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=10, state={"v": 1}),
                       Checkpoint(topic="a", partition=1, next_offset=5, state={"v": 1})])
    store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=20, state={"v": 2})])
    assert store.load(GROUP, "a", 0) == Checkpoint(topic="a", partition=0, next_offset=20, state={"v": 2})
    assert store.load(GROUP, "a", 1) == Checkpoint(topic="a", partition=1, next_offset=5, state={"v": 1})  # untouched
    # The same offset again replaces the state (a checkpoint with nothing new consumed).
    store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=20, state={"v": 3})])
    assert store.load(GROUP, "a", 0) == Checkpoint(topic="a", partition=0, next_offset=20, state={"v": 3})


def test_a_checkpoint_never_moves_an_offset_backwards(url):
    successor, fenced = Store(url), Store(url)  # two replicas sharing the store
    try:
        fenced.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=10, state={"by": "fenced"}),
                            Checkpoint(topic="a", partition=1, next_offset=10, state={"by": "fenced"})])
        successor.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=50, state={"by": "successor"})])
        # The replica that lost partition 0 without noticing writes its old view,
        # together with a partition it still rightly owns: the store refuses the
        # whole checkpoint, loudly, and changes nothing.
        with pytest.raises(StoreError, match=r"a\[0\] at 30 refused"):
            fenced.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=30, state={"by": "fenced"}),
                                Checkpoint(topic="a", partition=1, next_offset=40, state={"by": "fenced"})])
        assert successor.load(GROUP, "a", 0) == Checkpoint(topic="a", partition=0, next_offset=50,
                                                           state={"by": "successor"})
        assert successor.load(GROUP, "a", 1) == Checkpoint(topic="a", partition=1, next_offset=10,
                                                           state={"by": "fenced"})
        fenced.save(GROUP, [Checkpoint(topic="a", partition=1, next_offset=40,
                                       state={"by": "fenced"})])  # its own partition alone is fine
        assert successor.load(GROUP, "a", 1) == Checkpoint(topic="a", partition=1, next_offset=40,
                                                           state={"by": "fenced"})
    finally:
        successor.close()
        fenced.close()


def test_opening_an_existing_store_keeps_its_checkpoints(url):
    first = Store(url)
    first.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=7, state={"k": [1, 2]})])
    first.close()
    with Store(url) as second:
        assert second.load(GROUP, "a", 0) == Checkpoint(topic="a", partition=0, next_offset=7, state={"k": [1, 2]})


def test_a_store_is_closed_when_its_block_ends_also_on_an_error(url):
    closed = []

    def watch(store):  # records each pooled connection the engine closes
        event.listen(store.engine, "close", lambda dbapi_connection, record: closed.append(dbapi_connection))
        assert store.ping()
        assert store.engine.pool.checkedin() == 1

    with Store(url) as store:
        watch(store)
    assert len(closed) == 1 and store.engine.pool.checkedin() == 0
    with pytest.raises(RuntimeError, match="in the block"), Store(url) as store:
        watch(store)
        raise RuntimeError("in the block")
    assert len(closed) == 2 and store.engine.pool.checkedin() == 0


def test_ping(store):
    assert store.ping() is True


def test_schema_option_on_postgresql(pg_url):
    engine = create_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE SCHEMA monitoring"))
    with Store(pg_url, schema="monitoring") as store:
        store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=3, state={"s": 1})])
        assert store.load(GROUP, "a", 0) == Checkpoint(topic="a", partition=0, next_offset=3, state={"s": 1})
        with engine.connect() as conn:
            tables = conn.execute(text(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'ragdrift_checkpoints'"
            )).scalars().all()
            assert tables == ["monitoring"]
            assert conn.execute(text("SELECT next_offset FROM monitoring.ragdrift_checkpoints")).scalar_one() == 3
        # A store without the schema option is a different table.
        public = Store(pg_url)
        try:
            assert public.load(GROUP, "a", 0) is None
        finally:
            public.close()
        engine.dispose()


def test_unreachable_postgresql_is_a_store_error_that_hides_the_password():
    password = "Sup3r-Secret-pw"
    url = f"postgresql+psycopg://ragdrift:{password}@127.0.0.1:{free_port()}/ragdrift"
    with pytest.raises(StoreError) as info:
        Store(url)
    message = str(info.value)
    assert message.startswith("cannot open store")
    assert "127.0.0.1" in message
    assert password not in message
    assert password not in "".join(traceback.format_exception(info.value))


def test_unopenable_sqlite_is_a_store_error(tmp_path):
    with pytest.raises(StoreError, match="cannot open store"):
        Store(f"sqlite:///{tmp_path}/no-such-dir/state.db")


def test_store_that_went_away_fails_ping_load_and_save_with_store_errors(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir()
    store = Store(f"sqlite:///{directory}/state.db")
    store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=1, state={})])
    store.close()  # drop pooled connections: the next use reconnects
    shutil.rmtree(directory)
    assert store.ping() is False
    with pytest.raises(StoreError):
        store.load(GROUP, "a", 0)
    with pytest.raises(StoreError):
        store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=2, state={})])
    store.close()


def test_a_store_created_by_the_previous_release_is_upgraded_in_place(url):
    """The previous release's table lacked `topic_id`: opening the store adds
    it, and the old checkpoint loads with no topic id."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(
            "CREATE TABLE ragdrift_checkpoints (group_id VARCHAR(255) NOT NULL, topic VARCHAR(255) NOT NULL, "
            "partition INTEGER NOT NULL, next_offset BIGINT NOT NULL, state BYTEA NOT NULL, "
            "updated_at FLOAT NOT NULL, PRIMARY KEY (group_id, topic, partition))".replace(
                "BYTEA", "BLOB" if url.startswith("sqlite") else "BYTEA")))
        conn.execute(text("INSERT INTO ragdrift_checkpoints VALUES ('ragdrift', 'a', 0, 7, :s, 0)"),
                     {"s": orjson.dumps(real_state(1))})
    engine.dispose()
    with Store(url) as store:
        old = store.load(GROUP, "a", 0)
        assert (old.next_offset, old.topic_id, old.state) == (7, None, as_stored(real_state(1)))
        store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=9, state=real_state(2), topic_id="id-1")])
        assert store.load(GROUP, "a", 0).topic_id == "id-1"
    Store(url).close()  # opening an up-to-date store changes nothing


@pytest.mark.postgres
def test_replicas_opening_an_empty_database_at_once_all_succeed(pg_url):
    """Schema creation takes turns under an advisory lock: without it, the
    second of two concurrent creators fails on PostgreSQL's catalog."""
    import threading

    barrier = threading.Barrier(6)
    errors: list[str] = []

    def open_store() -> None:
        barrier.wait()
        try:
            Store(pg_url).close()
        except StoreError:
            errors.append(traceback.format_exc())

    threads = [threading.Thread(target=open_store) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []


def test_other_components_join_the_checkpoint_transaction(url):
    """A joined table's rows commit with the offsets, and roll back with them
    when the checkpoint is refused (here: fenced by a replica ahead of us)."""
    from sqlalchemy import Column, Integer, String, Table, select

    def candidates(metadata):
        return Table("ragdrift_test_candidates", metadata, Column("event_id", String(64), primary_key=True),
                     Column("offset", Integer))

    store = Store(url, tables=[candidates])
    table = store.joined_tables[0]
    try:
        def rows(*ids):
            return lambda conn: conn.execute(table.insert(), [{"event_id": i, "offset": 1} for i in ids])

        store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=10, state=real_state(1))],
                   joined=[rows("e1", "e2")])
        with pytest.raises(StoreError, match="refused"):
            store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=5, state=real_state(1))],
                       joined=[rows("e3")])
        with store.engine.connect() as conn:
            assert sorted(conn.execute(select(table.c.event_id)).scalars()) == ["e1", "e2"]
        assert store.load(GROUP, "a", 0).next_offset == 10
    finally:
        store.close()


# -- who may create a store ------------------------------------------------------------------


@pytest.mark.parametrize("opening", [Opening.READ, Opening.EXISTING])
def test_only_the_agent_creates_a_sqlite_store(tmp_path, opening):
    path = tmp_path / "state.db"
    with pytest.raises(StoreError, match=f"no ragdrift store at {path}: no such file"):
        Store(f"sqlite:///{path}", opening=opening)
    assert not path.exists()


@pytest.mark.parametrize("opening", [Opening.READ, Opening.EXISTING])
def test_a_database_without_ragdrift_tables_is_no_store(url, opening):
    engine = create_engine(url)
    with engine.begin() as conn:  # something else's tables
        conn.execute(text("CREATE TABLE orders (id INTEGER)"))
    try:
        with pytest.raises(StoreError, match=r"no ragdrift store at .*: the database holds no ragdrift tables"):
            Store(url, opening=opening)
        with engine.connect() as conn:
            assert inspect(conn).get_table_names() == ["orders"]
    finally:
        engine.dispose()


def test_a_read_opening_writes_nothing(url):
    Store(url).close()
    with Store(url, opening=Opening.READ) as store:
        assert store.load(GROUP, "a", 0) is None
        with pytest.raises(StoreError, match="checkpoint failed"):  # read-only on both databases
            store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=1, state={})])


def test_a_read_opening_needs_every_table_it_reads_and_an_existing_one_adds_them(url):
    def extra(metadata):
        return Table("ragdrift_extra", metadata, Column("k", Integer, primary_key=True))

    Store(url).close()  # a store made before `ragdrift_extra` existed
    with pytest.raises(StoreError, match="lacks ragdrift_extra: it was made by an older release"):
        Store(url, None, [extra], opening=Opening.READ)
    Store(url, None, [extra], opening=Opening.EXISTING).close()  # a writing command adds its own table
    Store(url, None, [extra], opening=Opening.READ).close()


def test_a_locked_sqlite_store_fails_a_checkpoint_naming_the_file(tmp_path):
    path = tmp_path / "state.db"
    store = Store(f"sqlite:///{path}?timeout=0.05")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(StoreError) as info:
            store.save(GROUP, [Checkpoint(topic="a", partition=0, next_offset=1, state={})])
        assert str(info.value) == f"checkpoint failed: the store is locked: another process holds the SQLite file {path}"
        with pytest.raises(StoreError, match="cannot load checkpoint: the store is locked"):
            store.load(GROUP, "a", 0)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
        store.close()


def test_an_unparseable_url_is_a_store_error_that_hides_the_password():
    with pytest.raises(StoreError) as info:
        Store("postgresql+psycopg://ragdrift:Sup3r-Secret-pw@127.0.0.1:port/ragdrift")
    assert str(info.value) == "cannot open store postgresql+psycopg://ragdrift:***@127.0.0.1:port/ragdrift: not a database URL"
