"""VolumeObjects (the cache's storage objects): the assume cache over PVs and PVCs, the candidate index
static binding reads, and the listeners told of every change."""

from __future__ import annotations

import attrs
import pytest

from scorer.model.storage import ClaimRef
from scorer.state.volumes import AssumeError, VolumeObjects, resource_version_number
from scorer.testing import make_pv, make_pvc


def names(pvs):
    return [pv.name for pv in pvs]


def test_candidates_are_the_unclaimed_pvs_of_the_class_and_those_pre_bound_to_the_claims():
    volumes = VolumeObjects()
    for pv in (make_pv("b-free", storage_class="local"), make_pv("a-free", storage_class="local"),
               make_pv("other-class", storage_class="fast"), make_pv("mine", storage_class="local", claim="ns/data"),
               make_pv("theirs", storage_class="local", claim="ns/other")):
        volumes.add(pv)
    assert names(volumes.candidate_pvs("local", ["ns/data"])) == ["a-free", "b-free", "mine"]
    assert names(volumes.candidate_pvs("local", [])) == ["a-free", "b-free"]
    assert names(volumes.pvs_of_class("local")) == ["a-free", "b-free", "mine", "theirs"]


def test_an_assumed_claim_ref_takes_the_pv_out_of_the_candidates_until_restored():
    volumes = VolumeObjects()
    free = make_pv("pv-1", storage_class="local")
    volumes.add(free)
    taken = attrs.evolve(free, claim_ref=ClaimRef(namespace="ns", name="data", uid="u"))
    volumes.assume_pv(taken)
    assert volumes.pv("pv-1") is taken and volumes.api_pv("pv-1") is free
    assert names(volumes.candidate_pvs("local", ["ns/x"])) == []
    assert names(volumes.candidate_pvs("local", ["ns/data"])) == ["pv-1"]
    volumes.restore_pv("pv-1")
    assert names(volumes.candidate_pvs("local", ["ns/x"])) == ["pv-1"]
    # a delivered version at least as new supersedes the assumed copy, index included
    volumes.assume_pv(taken)
    bound = attrs.evolve(taken, resource_version="7")
    volumes.add(bound)
    assert not volumes.is_assumed_pv("pv-1") and volumes.pv("pv-1") is bound
    assert names(volumes.candidate_pvs("local", ["ns/data"])) == ["pv-1"]
    volumes.remove(bound)
    assert volumes.candidate_pvs("local", ["ns/data"]) == []


def test_an_older_copy_cannot_be_assumed():
    volumes = VolumeObjects()
    volumes.add(make_pvc("data", resource_version="5"))
    with pytest.raises(AssumeError, match="out of sync"):
        volumes.assume_pvc(make_pvc("data", resource_version="4"))
    with pytest.raises(AssumeError, match="not found"):
        volumes.assume_pv(make_pv("nowhere"))
    assert resource_version_number("") == 0 and resource_version_number("x") == 0


def test_listeners_hear_of_every_delivered_change():
    volumes = VolumeObjects()
    heard = []
    volumes.listeners.append(lambda: heard.append(len(volumes)))
    volumes.add(make_pvc("data"))
    volumes.remove(make_pvc("data"))
    assert heard == [1, 0]
