"""scorer.kube.leader: the protocol on a fake Lease API with a fake clock, then against the real API server."""

from __future__ import annotations

import asyncio
import copy
import json
import random
import re
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from prometheus_client import CollectorRegistry

from scorer.config.types import LeaderElection
from scorer.kube.client import ApiClient, ApiResponse, ApiUnavailable
from scorer.kube.config import load_kubeconfig
from scorer.kube.leader import LeaderElector, LeadershipLost, default_identity

kube = pytest.mark.kube
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/ns/leases"


class FakeLeases:
    """The Lease endpoints of one namespace, with resourceVersion checks; every request yields once first,
    so concurrent candidates interleave as they would on a server."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down = False
        self.statuses: list[tuple[str, int]] = []

    def put_lease(self, name: str, **spec: Any) -> None:
        """Write the lease as a third party would."""
        self.version += 1
        self.objects[name] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                              "metadata": {"name": name, "namespace": "ns", "resourceVersion": str(self.version)},
                              "spec": spec}

    def spec(self, name: str) -> dict[str, Any]:
        return dict(self.objects[name]["spec"])

    async def request(self, method: str, path: str, *, body: Any = None, **kwargs: Any) -> ApiResponse:
        await asyncio.sleep(0)
        if self.down:
            raise ApiUnavailable(f"{method} {path}: refused")
        status, answer = self._answer(method, path, body)
        self.statuses.append((method, status))
        return ApiResponse(status, json.dumps(answer).encode())

    def _answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST" and path == LEASES:
            name = body["metadata"]["name"]
            if name in self.objects:
                return 409, {"message": "already exists"}
            self.put_lease(name, **body["spec"])
            return 201, self.objects[name]
        assert path.startswith(LEASES + "/"), path
        name = path.rsplit("/", 1)[1]
        if name not in self.objects:
            return 404, {"message": "not found"}
        if method == "GET":
            return 200, copy.deepcopy(self.objects[name])
        assert method == "PUT", method
        if body["metadata"].get("resourceVersion") != self.objects[name]["metadata"]["resourceVersion"]:
            return 409, {"message": "the object has been modified"}
        self.put_lease(name, **body["spec"])
        return 200, copy.deepcopy(self.objects[name])


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def elector(api: Any, clock: FakeClock, identity: str, **kwargs: Any) -> LeaderElector:
    return LeaderElector(api, namespace="ns", name="lock", identity=identity, clock=clock, sleep=clock.sleep,
                         **kwargs)


async def test_a_free_lease_is_taken_and_the_transition_counted() -> None:
    api, clock = FakeLeases(), FakeClock()
    api.put_lease("lock", holderIdentity="", leaseDurationSeconds=1, leaseTransitions=3)  # released
    assert await elector(api, clock, "me").try_acquire_or_renew()
    spec = api.spec("lock")
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("me", 15, 4)
    assert MICRO_TIME.match(spec["renewTime"]) and spec["acquireTime"] == spec["renewTime"]


async def test_a_missing_lease_is_created_with_no_transition() -> None:
    api, clock = FakeLeases(), FakeClock()
    assert await elector(api, clock, "me", lease_duration=20).try_acquire_or_renew()
    spec = api.spec("lock")
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("me", 20, 0)


async def test_expiry_is_judged_on_the_local_clock_from_the_last_change_not_on_renew_time() -> None:
    api, clock = FakeLeases(), FakeClock()
    # A renewTime from long ago (another host's clock) does not make the lease expired: only the time
    # this process has seen it unchanged counts.
    api.put_lease("lock", holderIdentity="other", leaseDurationSeconds=15, renewTime="2000-01-01T00:00:00.000000Z",
                  leaseTransitions=2)
    candidate = elector(api, clock, "me")
    assert not await candidate.try_acquire_or_renew()
    assert candidate.state() == "standby (holder: other)"
    clock.now = 10.0
    api.put_lease("lock", holderIdentity="other", leaseDurationSeconds=15, renewTime="2000-01-01T00:00:01.000000Z",
                  leaseTransitions=2)  # renewed: the local timer restarts at 10
    assert not await candidate.try_acquire_or_renew()
    clock.now = 24.9
    assert not await candidate.try_acquire_or_renew()
    clock.now = 25.1
    assert await candidate.try_acquire_or_renew()
    assert api.spec("lock")["leaseTransitions"] == 3


async def test_the_holders_lease_duration_is_the_one_that_counts() -> None:
    api, clock = FakeLeases(), FakeClock()
    api.put_lease("lock", holderIdentity="other", leaseDurationSeconds=30)
    candidate = elector(api, clock, "me", lease_duration=15)
    assert not await candidate.try_acquire_or_renew()
    clock.now = 16.0
    assert not await candidate.try_acquire_or_renew()
    clock.now = 30.5
    assert await candidate.try_acquire_or_renew()


async def test_a_candidate_tries_again_just_after_the_watched_lease_expires() -> None:
    api, clock = FakeLeases(), FakeClock()
    api.put_lease("lock", holderIdentity="other", leaseDurationSeconds=15)
    acquired: list[float] = []
    candidate = elector(api, clock, "me", on_started_leading=lambda: acquired.append(clock.now),
                        rng=random.Random(7))
    task = asyncio.create_task(candidate.run())
    try:
        async with asyncio.timeout(10):
            await candidate.wait_until_leader()
    finally:
        task.cancel()
        await asyncio.wait([task])
    # Jittered retries are 2 to 4.4 s apart; the last wait is cut to end just after expiry (15 s).
    assert len(acquired) == 1 and 15.0 <= acquired[0] <= 15.0 + 0.1 * 2


@pytest.mark.parametrize("existing", [False, True], ids=["create-race", "update-race"])
async def test_two_candidates_racing_for_a_free_lease_one_wins_the_other_gets_409(existing: bool) -> None:
    api, clock = FakeLeases(), FakeClock()
    if existing:
        api.put_lease("lock", holderIdentity="", leaseDurationSeconds=1)
    a, b = elector(api, clock, "a"), elector(api, clock, "b")
    results = await asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew())
    assert sorted(results) == [False, True]
    assert (("POST" if not existing else "PUT"), 409) in api.statuses  # the loser's write was refused
    winner = "a" if results[0] else "b"
    assert api.spec("lock")["holderIdentity"] == winner
    # The loser read the lease again and now stands by behind the winner.
    loser = b if results[0] else a
    assert not await loser.try_acquire_or_renew()
    assert loser.holder == winner


async def test_a_leader_that_cannot_renew_stops_exactly_at_the_renew_deadline() -> None:
    api, clock = FakeLeases(), FakeClock()
    stopped: list[float] = []
    collector_registry = CollectorRegistry()

    def down() -> None:
        api.down = True  # right after acquiring: every renew fails

    leader = elector(api, clock, "me", collector_registry=collector_registry, on_started_leading=down,
                     on_stopped_leading=lambda: stopped.append(clock.now))
    async with asyncio.timeout(10):
        with pytest.raises(LeadershipLost, match="not renewed within renewDeadline"):
            await leader.run()
    assert stopped == [10.0]  # acquired at 0, renewDeadline 10: not a retry period later
    assert leader.lost.is_set() and not leader.is_leader and leader.state() == "lost"
    assert collector_registry.get_sample_value("scorer_leader_election_is_leader", {"lease": "ns/lock"}) == 0
    assert collector_registry.get_sample_value("scorer_leader_election_transitions_total", {"lease": "ns/lock"}) == 1
    assert collector_registry.get_sample_value("leader_election_master_status", {"name": "lock"}) == 0


async def test_a_leader_that_sees_another_holder_stops_at_once() -> None:
    api, clock = FakeLeases(), FakeClock()

    def taken() -> None:
        api.put_lease("lock", holderIdentity="usurper", leaseDurationSeconds=15)

    leader = elector(api, clock, "me", on_started_leading=taken)
    async with asyncio.timeout(10):
        with pytest.raises(LeadershipLost, match="held by usurper"):
            await leader.run()
    assert clock.now == 2.0  # the first renew (one retry period in) saw it, well before the deadline


async def test_is_leader_turns_false_at_the_deadline_even_when_the_renew_loop_is_stuck() -> None:
    api, clock = FakeLeases(), FakeClock()
    stuck = asyncio.Event()

    async def sleep(seconds: float) -> None:
        await stuck.wait()  # never set: the renew loop never runs again

    leader = LeaderElector(api, namespace="ns", name="lock", identity="me", clock=clock, sleep=sleep)
    task = asyncio.create_task(leader.run())
    try:
        async with asyncio.timeout(10):
            await leader.wait_until_leader()
        assert leader.is_leader and leader.healthy() and leader.state() == "leader"
        clock.now = 9.9
        assert leader.is_leader
        clock.now = 10.0
        assert not leader.is_leader  # renewDeadline passed: no longer leading, whatever the loop does
        assert leader.state() == "lost"
        clock.now = 35.0
        assert leader.healthy()  # lease (15) + 20 s of tolerance
        clock.now = 35.1
        assert not leader.healthy()  # believes it leads, has not renewed for too long: the watchdog acts
    finally:
        task.cancel()
        await asyncio.wait([task])
    assert leader.healthy() and not leader.lost.is_set()  # cancelled: not leading, not "lost"


async def test_release_hands_the_lease_over_at_once() -> None:
    api, clock = FakeLeases(), FakeClock()
    leader, standby = elector(api, clock, "a"), elector(api, clock, "b")
    task = asyncio.create_task(leader.run())
    async with asyncio.timeout(10):
        await leader.wait_until_leader()
        assert not await standby.try_acquire_or_renew()
        assert await leader.release()
    assert task.cancelled() and not leader.is_leader and not leader.lost.is_set()
    spec = api.spec("lock")
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("", 1, 0)
    assert await standby.try_acquire_or_renew()  # no waiting for the lease to expire
    assert api.spec("lock")["leaseTransitions"] == 1
    assert not await leader.release()  # no longer the holder: nothing to release


async def test_a_release_that_fails_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = FakeLeases(), FakeClock()
    leader = elector(api, clock, "a")
    assert await leader.try_acquire_or_renew()
    api.down = True
    assert not await leader.release()
    assert "releasing lease ns/lock failed" in caplog.text


async def test_release_leaves_a_lease_someone_else_took_alone(caplog: pytest.LogCaptureFixture) -> None:
    api, clock = FakeLeases(), FakeClock()
    leader = elector(api, clock, "a")
    assert await leader.try_acquire_or_renew()
    api.put_lease("lock", holderIdentity="b", leaseDurationSeconds=15, leaseTransitions=1)
    with caplog.at_level("INFO", logger="scorer.kube.leader"):
        assert not await leader.release()
    assert api.spec("lock")["holderIdentity"] == "b" and "held by b: nothing to release" in caplog.text


def test_timings_are_checked_as_client_go_does() -> None:
    with pytest.raises(ValueError, match="leaseDuration .* must be greater than renewDeadline"):
        LeaderElector(FakeLeases(), namespace="ns", name="x", lease_duration=10, renew_deadline=10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retryPeriod\\*JitterFactor"):
        LeaderElector(FakeLeases(), namespace="ns", name="x", renew_deadline=2.4, retry_period=2)  # type: ignore[arg-type]


def test_from_config_and_the_default_identity() -> None:
    config = LeaderElection()
    made = LeaderElector.from_config(FakeLeases(), config)  # type: ignore[arg-type]
    assert (made.namespace, made.name, made.lease_duration, made.renew_deadline, made.retry_period) == (
        "kube-system", "kube-scheduler", 15.0, 10.0, 2.0)
    assert re.match(r"^.+_[0-9a-f-]{36}$", made.identity) and default_identity() != default_identity()
    assert made.state() == "standby" and not made.is_leader


# --- against the real API server -----------------------------------------------------------------


def lease(control_plane, name: str) -> dict[str, Any]:
    status, raw = control_plane.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/default/leases/{name}")
    assert status == 200, raw
    return dict(json.loads(raw)["spec"])


def real(client: ApiClient, name: str, identity: str, **kwargs: Any) -> LeaderElector:
    timings = {"lease_duration": 2.0, "renew_deadline": 1.5, "retry_period": 0.3, **kwargs}
    return LeaderElector(client, namespace="default", name=name, identity=identity, **timings)


async def wait_for(condition: Callable[[], bool], seconds: float) -> None:
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.05)


async def stop(*tasks: asyncio.Task[None]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.wait(tasks)


@kube
async def test_one_leads_the_other_stands_by_and_takes_over_when_the_leader_dies(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        collector_registry = CollectorRegistry()
        first = real(client, "l-crash", "first", collector_registry=collector_registry)
        second = real(client, "l-crash", "second")
        first_task = asyncio.create_task(first.run())
        await asyncio.wait_for(first.wait_until_leader(), 15)
        second_task = asyncio.create_task(second.run())
        try:
            await wait_for(lambda: second.state() == "standby (holder: first)", 15)
            spec = lease(control_plane, "l-crash")
            assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == ("first", 2, 0)
            assert MICRO_TIME.match(spec["renewTime"]) and MICRO_TIME.match(spec["acquireTime"])
            await asyncio.sleep(1.0)  # several lease renewals later, the standby still stands by
            assert first.is_leader and not second.is_leader
            is_leader = {"lease": "default/l-crash"}
            assert collector_registry.get_sample_value("scorer_leader_election_is_leader", is_leader) == 1
            assert collector_registry.get_sample_value("leader_election_master_status", {"name": "l-crash"}) == 1
            await stop(first_task)  # a crash: no release, the lease stays until it expires
            await asyncio.wait_for(second.wait_until_leader(), 2.0 + 2.2 * 0.3 + 10)
            spec = lease(control_plane, "l-crash")
            assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("second", 1)
            assert not first.is_leader and not first.lost.is_set()
            assert collector_registry.get_sample_value("scorer_leader_election_is_leader", is_leader) == 0
        finally:
            await stop(first_task, second_task)


@kube
async def test_release_lets_the_standby_take_over_long_before_the_lease_expires(control_plane) -> None:
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        # A 60 s lease: a standby leading within 20 s got it from the release, not from expiry.
        slow = {"lease_duration": 60.0, "renew_deadline": 40.0}
        first, second = real(client, "l-release", "first", **slow), real(client, "l-release", "second", **slow)
        first_task = asyncio.create_task(first.run())
        second_task: asyncio.Task[None] | None = None
        try:
            await asyncio.wait_for(first.wait_until_leader(), 15)
            second_task = asyncio.create_task(second.run())
            await wait_for(lambda: second.holder == "first", 15)
            assert await first.release()
            assert first_task.done() and not first.is_leader
            await asyncio.wait_for(second.wait_until_leader(), 20)
            spec = lease(control_plane, "l-release")
            assert (spec["holderIdentity"], spec["leaseDurationSeconds"], spec["leaseTransitions"]) == (
                "second", 60, 1)
        finally:
            await stop(first_task, *([second_task] if second_task else []))


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self) -> None:
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None

    async def __aenter__(self) -> str:
        async def swallow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self.writers.append(writer)
            await reader.read()

        self.server = await asyncio.start_server(swallow, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"https://127.0.0.1:{port}"

    async def __aexit__(self, *exc: Any) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.writers:
            writer.close()
        await self.server.wait_closed()


@kube
@pytest.mark.parametrize("failure", ["refused", "no-answer"])
async def test_a_leader_whose_requests_fail_loses_the_lease_by_the_renew_deadline(control_plane, failure) -> None:
    from kubekit import free_port

    access = load_kubeconfig(control_plane.kubeconfig)
    stopped: list[str] = []
    async with ApiClient(access) as client, BlackHole() as hole:
        leader = real(client, f"l-fail-{failure}", "me", on_stopped_leading=lambda: stopped.append("stopped"))
        task = asyncio.create_task(leader.run())
        try:
            await asyncio.wait_for(leader.wait_until_leader(), 15)
            dead = f"https://127.0.0.1:{free_port()}" if failure == "refused" else hole
            client.access = attrs.evolve(access, server=dead)
            # renewDeadline (1.5 s) bounds every attempt: the client's own 30 s timeout never matters.
            await asyncio.wait_for(leader.lost.wait(), 1.5 + 0.3 + 10)
            assert not leader.is_leader and leader.state() == "lost" and stopped == ["stopped"]
            with pytest.raises(LeadershipLost):
                await asyncio.wait_for(task, 5)
        finally:
            await stop(task)


@kube
@pytest.mark.parametrize("existing", [False, True], ids=["create-race", "update-race"])
async def test_two_candidates_racing_on_the_real_server_exactly_one_wins(control_plane, existing) -> None:
    name = f"l-race-{'update' if existing else 'create'}"
    if existing:
        status, raw = control_plane.request("POST", "/apis/coordination.k8s.io/v1/namespaces/default/leases",
                                            json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                        "metadata": {"name": name},
                                                        "spec": {"holderIdentity": ""}}).encode())
        assert status == 201, raw
    async with ApiClient(load_kubeconfig(control_plane.kubeconfig)) as client:
        a, b = real(client, name, "a"), real(client, name, "b")
        results = await asyncio.wait_for(asyncio.gather(a.try_acquire_or_renew(), b.try_acquire_or_renew()), 15)
        assert sorted(results) == [False, True]
        winner = "a" if results[0] else "b"
        assert lease(control_plane, name)["holderIdentity"] == winner
        loser = b if results[0] else a
        assert not await asyncio.wait_for(loser.try_acquire_or_renew(), 15)
        assert loser.holder == winner
