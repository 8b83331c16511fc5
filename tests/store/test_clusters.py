"""Clusters, join tokens, agent credentials and the audit log, on both backends."""

from __future__ import annotations

from datetime import timedelta

import pytest

from fuyao.errors import Conflict, InvalidInput, NotFound, Unauthenticated
from hub.store import Store
from tests.store.make import T0, at, cluster


def test_clusters_are_created_listed_by_name_and_read_back(store: Store) -> None:
    for name in ("west", "east", "north"):
        store.create_cluster(cluster(name, backend="sim"))
    assert [c.name for c in store.list_clusters()] == ["east", "north", "west"]
    assert store.get_cluster("east") == cluster("east", backend="sim")


def test_a_cluster_name_is_taken_once(store: Store) -> None:
    store.create_cluster(cluster("east", weight=3))
    with pytest.raises(Conflict, match="cluster east already exists"):
        store.create_cluster(cluster("east", weight=9))
    assert store.get_cluster("east").weight == 3


def test_update_changes_only_the_given_fields(store: Store) -> None:
    store.create_cluster(cluster("east", labels={"fuyao.io/site": "a"}))
    got = store.update_cluster("east", state="Unknown", last_heartbeat=at(30), cordoned=True)
    assert (got.state, got.last_heartbeat, got.cordoned) == ("Unknown", at(30), True)
    assert got.labels == {"fuyao.io/site": "a"} and got.weight == 1
    assert store.get_cluster("east") == got


def test_heartbeats_of_many_clusters_are_saved_in_one_write(store: Store) -> None:
    for name in ("east", "west", "north"):
        store.create_cluster(cluster(name))
    store.touch_clusters(["east", "west", "gone"], at(45))   # a removed one: ignored
    beats = {c.name: c.last_heartbeat for c in store.list_clusters()}
    assert beats == {"east": at(45), "west": at(45), "north": cluster("north").last_heartbeat}


@pytest.mark.parametrize(
    ("changes", "wanted"),
    [
        pytest.param({"name": "west"}, "field.* name", id="rename"),
        pytest.param({"colour": "red"}, "colour", id="unknown-field"),
        pytest.param({"last_heartbeat": T0.replace(tzinfo=None)}, "no timezone",
                     id="naive-time"),
    ],
)
def test_bad_cluster_updates_change_nothing(
    store: Store, changes: dict[str, object], wanted: str
) -> None:
    store.create_cluster(cluster("east"))
    with pytest.raises(InvalidInput, match=wanted):
        store.update_cluster("east", **changes)
    assert store.get_cluster("east") == cluster("east")


@pytest.mark.parametrize("op", ["get", "update", "delete", "token", "credential"])
def test_unknown_clusters_are_not_found(store: Store, op: str) -> None:
    with pytest.raises(NotFound, match="cluster ghost not found"):
        if op == "get":
            store.get_cluster("ghost")
        elif op == "update":
            store.update_cluster("ghost", weight=2)
        elif op == "delete":
            store.delete_cluster("ghost")
        elif op == "token":
            store.add_join_token("ghost", "hash", at(60))
        else:
            store.set_credential("ghost", "hash")


def test_deleting_a_cluster_removes_its_tokens_and_credential(store: Store) -> None:
    store.create_cluster(cluster("east"))
    store.add_join_token("east", "tok-hash", at(3600))
    store.set_credential("east", "cred-hash")
    store.delete_cluster("east")
    assert store.list_clusters() == []
    assert store.cluster_for_credential("cred-hash") is None
    store.create_cluster(cluster("east"))       # the same name again: the old token is gone
    with pytest.raises(Unauthenticated, match="not valid for cluster east"):
        store.consume_join_token("east", "tok-hash", at(1))


def test_a_join_token_works_once(store: Store) -> None:
    store.create_cluster(cluster("east", state="Joining"))
    store.add_join_token("east", "tok-hash", at(3600))
    store.consume_join_token("east", "tok-hash", at(10))
    with pytest.raises(Conflict, match="already used"):
        store.consume_join_token("east", "tok-hash", at(20))


def test_an_expired_join_token_is_rejected(store: Store) -> None:
    store.create_cluster(cluster("east", state="Joining"))
    store.add_join_token("east", "tok-hash", at(3600))
    with pytest.raises(Unauthenticated, match="expired"):
        store.consume_join_token("east", "tok-hash", at(3600))
    with pytest.raises(Unauthenticated, match="expired"):
        store.consume_join_token("east", "tok-hash", at(3600) + timedelta(days=1))


@pytest.mark.parametrize(
    ("cluster_name", "token_hash"),
    [pytest.param("west", "tok-hash", id="another-clusters-token"),
     pytest.param("east", "unknown-hash", id="unknown-token")],
)
def test_a_token_for_another_cluster_is_invalid_and_stays_usable(
    store: Store, cluster_name: str, token_hash: str
) -> None:
    store.create_cluster(cluster("east", state="Joining"))
    store.create_cluster(cluster("west", state="Joining"))
    store.add_join_token("east", "tok-hash", at(3600))
    with pytest.raises(Unauthenticated, match=f"not valid for cluster {cluster_name}"):
        store.consume_join_token(cluster_name, token_hash, at(1))
    store.consume_join_token("east", "tok-hash", at(2))   # the failed try changed nothing


def test_a_token_hash_is_stored_once(store: Store) -> None:
    store.create_cluster(cluster("east"))
    store.add_join_token("east", "tok-hash", at(60))
    with pytest.raises(Conflict):
        store.add_join_token("east", "tok-hash", at(120))


def test_a_new_credential_replaces_the_old_one(store: Store) -> None:
    store.create_cluster(cluster("east"))
    store.create_cluster(cluster("west"))
    store.set_credential("east", "old")
    store.set_credential("west", "west-cred")
    store.set_credential("east", "new")
    assert store.cluster_for_credential("old") is None
    assert store.cluster_for_credential("new") == "east"
    assert store.cluster_for_credential("west-cred") == "west"
    with pytest.raises(Conflict):
        store.set_credential("west", "new")   # a hash identifies exactly one cluster
    assert store.cluster_for_credential("west-cred") == "west"


def test_audit_log_is_newest_first_and_limited(store: Store) -> None:
    store.audit("admin", "cluster.join", "east", "ok", at=at(1))
    store.audit("alice", "task.submit", "train-1", "denied: queue research", at=at(3))
    store.audit("bob", "task.cancel", "train-2", "ok", at=at(2))
    log = store.audit_log()
    assert [(e["actor"], e["at"]) for e in log] == [("alice", at(3)), ("bob", at(2)),
                                                    ("admin", at(1))]
    assert log[0]["result"] == "denied: queue research" and log[0]["action"] == "task.submit"
    assert [e["actor"] for e in store.audit_log(limit=1)] == ["alice"]
    with pytest.raises(InvalidInput, match="at least 1"):
        store.audit_log(limit=0)


def test_audit_defaults_to_now(store: Store) -> None:
    store.audit("admin", "cluster.delete", "east", "ok")
    [entry] = store.audit_log()
    assert entry["at"] > T0 and entry["at"].utcoffset() == timedelta(0)


def test_a_new_registration_revokes_older_certificates_and_the_bearer_credential(
        store: Store) -> None:
    store.create_cluster(cluster("east"))
    store.create_cluster(cluster("west"))
    store.set_credential("east", "east-bearer")
    store.add_agent_certificate("a1", "east", at(-60), at(3600))
    store.add_agent_certificate("a0", "east", at(-7200), at(-3600))   # expired already
    store.add_agent_certificate("w1", "west", at(-60), at(3600))
    assert store.replace_agent_certificates("east", "a2", at(0), at(3600)) == 1
    east = {s: store.agent_certificate(s) for s in ("a0", "a1", "a2")}
    assert east["a1"] is not None and east["a1"].revoked_at is not None
    assert east["a0"] is not None and east["a0"].revoked_at is None     # expired: left alone
    assert east["a2"] is not None and (east["a2"].cluster, east["a2"].revoked_at) == ("east",
                                                                                     None)
    assert store.cluster_for_credential("east-bearer") is None
    west = store.agent_certificate("w1")
    assert west is not None and west.revoked_at is None
    assert store.agent_certificate("nope") is None
    assert store.revoke_agent_certificates("east", at(1)) == 1            # a2
