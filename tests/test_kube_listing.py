"""A LIST answer read item by item as it arrives (scorer.kube.listing): every chunking of a body gives the
items and the envelope a parse of the whole body gives, whatever the body holds."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from scorer.kube import listing
from scorer.kube.listing import ListSplitter, read_list


class Chunks:
    """A body served ``size`` bytes at a time."""

    def __init__(self, body: bytes, size: int) -> None:
        self.body, self.size = body, size

    async def readchunk(self) -> bytes:
        chunk, self.body = self.body[:self.size], self.body[self.size:]
        return chunk


def node(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "7", "annotations": {
                "note": 'an annotation with },{"metadata": in it', "json": '{"items":[{"metadata":{}}]}'}},
            "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}, {"type": "DiskPressure"}],
                       # an array of objects whose first key is the items' first key: boundaries inside an item
                       "odd": [{"metadata": {"name": "inner"}}, {"metadata": {"name": "inner2"}, "x": []}],
                       "images": [{"names": ["a", "b"], "sizeBytes": 1}] * 3}}


def list_body(items: list[Any], **envelope: Any) -> bytes:
    return orjson.dumps({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"},
                         **envelope, "items": items})


async def read(body: bytes, size: int) -> tuple[Any, list[Any]]:
    taken: list[Any] = []
    made: list[bytes | None] = []
    envelope = await read_list(Chunks(body, size), lambda item, digest: (taken.append(item), made.append(digest)))
    assert made == [None] * len(taken)  # (no digest asked for: none made)
    return envelope, taken


def whole(body: bytes) -> tuple[Any, list[Any]]:
    parsed = orjson.loads(body)
    if not isinstance(parsed, dict):
        return parsed, []
    items = parsed.get("items")
    return {k: v for k, v in parsed.items() if k != "items"}, items if isinstance(items, list) else []


def stateful_set(name: str, templates: int) -> dict[str, Any]:
    """An item holding an array of objects whose first key is ``metadata``: a boundary per template."""
    return {"metadata": {"name": name}, "spec": {"volumeClaimTemplates": [
        {"metadata": {"name": f"t{i}"}, "spec": {}} for i in range(templates)]}}


BODIES = {
    "nodes": list_body([node(f"n{i}") for i in range(7)]),
    "one": list_body([node("only")]),
    "empty": list_body([]),
    "continue": list_body([node("a")], metadata={"resourceVersion": "9", "continue": "tok"}),
    "items-first": orjson.dumps({"items": [node("a"), node("b")], "metadata": {"resourceVersion": "3"}}),
    "kind-first-items": list_body([{"kind": "Node", "metadata": {"name": f"k{i}"}} for i in range(4)]),
    "mixed-items": list_body([node("a"), 5, "x", None, [1], {"spec": {}}, node("b")]),
    "items-null": orjson.dumps({"kind": "NodeList", "items": None}),
    "items-object": orjson.dumps({"kind": "NodeList", "items": {"a": 1}}),
    "no-items": orjson.dumps({"kind": "Status", "code": 500}),
    "pretty": orjson.dumps({"metadata": {}, "items": [node("a"), node("b")]}, option=orjson.OPT_INDENT_2),
    "array": orjson.dumps([node("a")]),
    "string": b'"items"',
    "templates": list_body([node("a"), stateful_set("few", 3), node("b"), stateful_set("many", 40), node("c")]),
    "nested-items-key": orjson.dumps({"metadata": {"x": {"items": [{"metadata": 1}]}}, "items": [node("a")]}),
}


@pytest.mark.parametrize("size", [1, 2, 7, 64, 1000, 10**6])
@pytest.mark.parametrize("name", sorted(BODIES))
async def test_every_chunking_gives_what_the_whole_body_gives(name: str, size: int) -> None:
    body = BODIES[name]
    assert await read(body, size) == whole(body)


async def test_items_are_taken_before_the_body_ends() -> None:
    splitter = ListSplitter()
    body = BODIES["nodes"]
    taken = splitter.feed(body[:len(body) // 2])
    assert [item["metadata"]["name"] for item in taken] == ["n0", "n1", "n2"]
    assert not splitter.whole
    rest = splitter.feed(body[len(body) // 2:])
    envelope, tail = splitter.finish()
    assert [item["metadata"]["name"] for item in taken + rest + tail] == [f"n{i}" for i in range(7)]
    assert envelope == {"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "42"}}


@pytest.mark.parametrize("body", [
    b"", b"not json", b'{"kind":"NodeList","items":[{"metadata":{}},{"metadata":{}}',  # cut short
    list_body([node("a"), node("b")])[:-1], list_body([node("a")]) + b"x",
    b'{"kind":"NodeList","metadata":{},"items":[{"metadata":{}},{"metadata":{"a"}}]}',
    b'{"kind" "NodeList","items":[{"metadata":{}},{"metadata":{}}]}',
])
@pytest.mark.parametrize("size", [3, 10**6])
async def test_a_body_that_is_not_json_is_an_error(body: bytes, size: int) -> None:
    with pytest.raises(orjson.JSONDecodeError):
        await read(body, size)


def test_an_item_with_many_inner_boundaries_leaves_the_rest_to_one_parse(monkeypatch) -> None:
    """Each boundary inside an item costs a parse of the item so far: past MAX_MISSES of them the rest of
    the body is parsed once, at the end (no user-made object makes a list cost quadratic time)."""
    parses = []
    real_loads = orjson.loads
    monkeypatch.setattr("scorer.kube.listing.orjson.loads", lambda data: parses.append(len(data)) or real_loads(data))
    splitter = ListSplitter()
    plain = [{"metadata": {"name": name}} for name in ("a", "b")]
    taken = splitter.feed(list_body([plain[0], stateful_set("many", 1000), plain[1]]))
    assert [item["metadata"]["name"] for item in taken] == ["a"] and splitter.rest_whole
    assert len(parses) == 1 + 1 + listing.MAX_MISSES + 1  # the head, the first item, the misses
    envelope, rest = splitter.finish()
    assert [item["metadata"]["name"] for item in rest] == ["many", "b"]
    assert len(rest[0]["spec"]["volumeClaimTemplates"]) == 1000


async def test_a_body_without_the_usual_shape_is_parsed_whole() -> None:
    splitter = ListSplitter()
    assert splitter.feed(BODIES["pretty"]) == []
    assert splitter.finish() == whole(BODIES["pretty"])
    assert splitter.whole


@pytest.mark.parametrize("size", [1, 7, 100, 1 << 20])
async def test_each_item_parsed_from_its_own_bytes_is_given_with_the_digest_of_them(size) -> None:
    items = [node(f"n{i}") for i in range(4)]
    body = list_body(items)
    seen: list[tuple[Any, bytes]] = []

    def digest(item: Any, data: memoryview) -> bytes | None:
        seen.append((item, bytes(data)))
        return b"digest of " + item["metadata"]["name"].encode() if item["metadata"]["name"] != "n1" else None

    taken: list[tuple[Any, bytes | None]] = []
    envelope = await read_list(Chunks(body, size), lambda item, made: taken.append((item, made)), digest)
    assert (envelope, [item for item, _ in taken]) == whole(body)
    # every item but the last is parsed from its own bytes: the very JSON the body holds of it
    assert [(item, data) for item, data in seen] == [(item, orjson.dumps(item)) for item in items[:-1]]
    assert [made for _, made in taken] == [b"digest of n0", None, b"digest of n2", None]  # (the last: None)
