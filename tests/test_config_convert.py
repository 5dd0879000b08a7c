"""The strict attrs converter that plugin args (built-in and third-party) go through."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, Literal

import attrs
import pytest

from scorer.config import structure, structure_into, unstructure
from scorer.config.convert import args_type_problems
from scorer.errors import ConfigError


class Mode(enum.Enum):
    FAST = "Fast"
    SLOW = "Slow"


@attrs.frozen(slots=True)
class Inner:
    name: str = ""
    weight: int = 1

    def validate(self) -> list[tuple[str, str]]:
        return [] if 1 <= self.weight <= 100 else [("weight", "must be in 1..100")]


@attrs.frozen(slots=True)
class Sample:
    """One field of every supported kind."""

    flag: bool = False
    count: int = 0
    small: int = attrs.field(default=0, metadata={"bits": 32})
    ratio: float = 0.5
    label: str = ""
    blob: bytes = b""
    timeout: timedelta = timedelta(seconds=5)
    mode: Mode = Mode.FAST
    strategy: Literal["Least", "Most"] = "Least"
    inner: Inner = Inner()
    optional_inner: Inner | None = None
    items: tuple[Inner, ...] = ()
    names: list[str] = attrs.field(factory=list)
    labels: dict[str, str] = attrs.field(factory=dict)
    extra: Mapping[str, int] = attrs.field(factory=dict)
    raw: Any = None
    enable_https: bool = attrs.field(default=False, metadata={"json": "enableHTTPS"})


@attrs.frozen(slots=True)
class WithRequired:
    address: str
    port: int = 80


@attrs.frozen(slots=True)
class Pointerish:
    """kube pointer semantics: ``defaulted`` sees only the keys that were present."""

    percentage: int = 50
    given: tuple[str, ...] = ()

    @classmethod
    def defaulted(cls, **fields: Any) -> Pointerish:
        return cls(given=tuple(sorted(fields)), **fields)


@attrs.frozen(slots=True)
class Checked:
    low: int = 0
    high: int = 10

    def validate(self) -> list[tuple[str, str]]:
        return [] if self.low <= self.high else [("", "low must not exceed high")]


@attrs.frozen(slots=True)
class Outer:
    checked: Checked = Checked()
    rejects: tuple[int, ...] = ()

    def validate(self) -> list[tuple[str, str]]:
        return [("rejects", "too many")] if len(self.rejects) > 2 else []


def errors_of(cls: type, data: Any, path: str = "args", **kw: Any) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        structure(cls, data, path, **kw)
    return info.value.errors


def test_every_supported_type():
    data = {
        "flag": True,
        "count": 2**40,
        "small": -5,
        "ratio": 2,
        "label": "x",
        "blob": "aGVsbG8=",
        "timeout": "1m30s",
        "mode": "Slow",
        "strategy": "Most",
        "inner": {"name": "cpu", "weight": 3},
        "optionalInner": {"name": "gpu"},
        "items": [{"name": "a"}, {"name": "b", "weight": 2}],
        "names": ["p", "q"],
        "labels": {"a": "b"},
        "extra": {"k": 1},
        "raw": {"anything": [1, {"goes": None}]},
        "enableHTTPS": True,
    }
    value = structure(Sample, data)
    assert value == Sample(
        flag=True,
        count=2**40,
        small=-5,
        ratio=2.0,
        label="x",
        blob=b"hello",
        timeout=timedelta(seconds=90),
        mode=Mode.SLOW,
        strategy="Most",
        inner=Inner("cpu", 3),
        optional_inner=Inner("gpu"),
        items=(Inner("a"), Inner("b", 2)),
        names=["p", "q"],
        labels={"a": "b"},
        extra={"k": 1},
        raw={"anything": [1, {"goes": None}]},
        enable_https=True,
    )
    assert isinstance(value.ratio, float)
    assert unstructure(value) == {
        **data,
        "ratio": 2.0,
        "optionalInner": {"name": "gpu", "weight": 1},
        "items": [{"name": "a", "weight": 1}, {"name": "b", "weight": 2}],
    }


def test_absent_and_null_take_defaults():
    assert structure(Sample, {}) == Sample()
    assert structure(Sample, None) == Sample()
    assert structure(Sample, {"count": None, "inner": None, "items": None}) == Sample()


@pytest.mark.parametrize(
    ("data", "path", "message"),
    [
        ({"flag": 1}, "args.flag", "expected a boolean, got integer 1"),
        ({"flag": "true"}, "args.flag", 'expected a boolean, got string "true"'),
        ({"count": True}, "args.count", "expected an integer, got boolean true"),
        ({"count": 1.0}, "args.count", "expected an integer, got number 1.0"),
        ({"count": "1"}, "args.count", 'expected an integer, got string "1"'),
        ({"count": 2**63}, "args.count", f"must fit in a 64-bit integer, got {2**63}"),
        ({"small": 2**31}, "args.small", f"must fit in a 32-bit integer, got {2**31}"),
        ({"ratio": False}, "args.ratio", "expected a number, got boolean false"),
        ({"label": 1}, "args.label", "expected a string, got integer 1"),
        ({"label": ["x"]}, "args.label", "expected a string, got list"),
        ({"blob": "***"}, "args.blob", "expected a base64 string, got invalid base64"),
        (
            {"timeout": 5},
            "args.timeout",
            'expected a duration string such as "1m30s", got integer 5',
        ),
        (
            {"timeout": "5"},
            "args.timeout",
            'missing unit in duration "5" (expected a duration such as "15s", "1m30s", "100ms")',
        ),
        (
            {"mode": "Medium"},
            "args.mode",
            'Unsupported value: "Medium": supported values: "Fast", "Slow"',
        ),
        (
            {"strategy": "least"},
            "args.strategy",
            'Unsupported value: "least": supported values: "Least", "Most"',
        ),
        ({"inner": []}, "args.inner", "expected an object, got list"),
        ({"items": {"name": "a"}}, "args.items", "expected a list, got object"),
        ({"items": [{"name": 3}]}, "args.items[0].name", "expected a string, got integer 3"),
        ({"items": [{}, {"weight": 0}]}, "args.items[1].weight", "must be in 1..100"),
        ({"labels": {"a": 1}}, "args.labels.a", "expected a string, got integer 1"),
        ({"labels": "a=b"}, "args.labels", 'expected an object, got string "a=b"'),
        ({"Flag": True}, "args.Flag", "unknown field"),
        ({"enable_https": True}, "args.enable_https", "unknown field"),
        ({"enableHttps": True}, "args.enableHttps", "unknown field"),
        ({"inner": {"nam": "x"}}, "args.inner.nam", "unknown field"),
        ({"apiVersion": "v1"}, "args.apiVersion", "unknown field"),
    ],
)
def test_type_errors_name_the_path(data, path, message):
    assert errors_of(Sample, data) == [(path, message)]


def test_not_an_object():
    assert errors_of(Sample, [1, 2]) == [("args", "expected an object, got list")]
    assert errors_of(Sample, "x", path="") == [("", 'expected an object, got string "x"')]


def test_all_errors_are_collected():
    errors = errors_of(Sample, {"flag": 1, "count": "2", "nope": 0, "items": [{"weight": 500}]})
    assert errors == [
        ("args.flag", "expected a boolean, got integer 1"),
        ("args.count", 'expected an integer, got string "2"'),
        ("args.nope", "unknown field"),
        ("args.items[0].weight", "must be in 1..100"),
    ]


def test_required_fields():
    assert structure(WithRequired, {"address": "a"}) == WithRequired("a")
    assert errors_of(WithRequired, {}) == [("args.address", "Required value")]
    assert errors_of(WithRequired, {"address": None}) == [("args.address", "Required value")]
    assert errors_of(WithRequired, {"address": 1}) == [
        ("args.address", "expected a string, got integer 1")
    ]


def test_kind_header():
    data = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "WithRequiredArgs",
        "address": "a",
    }
    assert structure(WithRequired, data, kind="WithRequiredArgs") == WithRequired("a")
    assert structure(WithRequired, {"address": "a"}, kind="WithRequiredArgs") == WithRequired("a")
    bad = {**data, "kind": "OtherArgs"}
    assert errors_of(WithRequired, bad, kind="WithRequiredArgs") == [
        ("args.kind", 'expected "WithRequiredArgs", got "OtherArgs"')
    ]
    assert errors_of(WithRequired, {**data, "apiVersion": 1}, kind="WithRequiredArgs") == [
        ("args.apiVersion", "expected a string, got integer 1")
    ]
    # without an expected kind the header keys are ordinary (unknown) fields
    assert ("args.kind", "unknown field") in errors_of(WithRequired, data)


def test_defaulted_sees_only_present_keys():
    assert structure(Pointerish, {}) == Pointerish(given=())
    assert structure(Pointerish, {"percentage": 0}) == Pointerish(
        percentage=0, given=("percentage",)
    )


def test_validation_paths_of_nested_objects():
    assert errors_of(Outer, {"checked": {"low": 5, "high": 1}, "rejects": [1, 2, 3]}) == [
        ("args.checked", "low must not exceed high"),
        ("args.rejects", "too many"),
    ]
    assert errors_of(Checked, {"low": 2, "high": 1}, path="") == [("", "low must not exceed high")]


def test_structure_into_collects_without_raising():
    errors: list[tuple[str, str]] = []
    assert structure_into(Checked, {"low": "x"}, "p", errors) is None
    assert errors == [("p.low", 'expected an integer, got string "x"')]
    errors.clear()
    # validation errors still return the object
    assert structure_into(Checked, {"low": 3, "high": 1}, "p", errors) == Checked(3, 1)
    assert errors == [("p", "low must not exceed high")]


def test_constructor_errors_become_config_errors():
    @attrs.frozen
    class Positive:
        value: int = attrs.field(default=1, validator=attrs.validators.gt(0))

    Positive.__module__ = __name__
    globals()["Positive"] = Positive
    try:
        errors = errors_of(Positive, {"value": 0})
    finally:
        del globals()["Positive"]
    assert len(errors) == 1 and errors[0][0] == "args" and "must be > 0" in errors[0][1]


def test_unstructure_omits_none_and_default_empty_collections():
    assert unstructure(Sample()) == {
        "flag": False,
        "count": 0,
        "small": 0,
        "ratio": 0.5,
        "label": "",
        "blob": "",
        "timeout": "5s",
        "mode": "Fast",
        "strategy": "Least",
        "inner": {"name": "", "weight": 1},
        "enableHTTPS": False,
    }
    assert unstructure({"a": (1, Inner("x"))}) == {"a": [1, {"name": "x", "weight": 1}]}


def test_unknown_field_type_is_a_programming_error():
    @attrs.frozen
    class Odd:
        value: complex = 0j

    Odd.__module__ = __name__
    globals()["Odd"] = Odd
    try:
        with pytest.raises(TypeError):
            structure(Odd, {"value": 1})
    finally:
        del globals()["Odd"]


# -- args classes checked when a plugin registers them (args_type_problems) --------------------------


class NotAttrs:
    label = "x"


@attrs.frozen
class SetField:
    labels: set[str] = attrs.Factory(set)


@attrs.frozen
class BadNested:
    inner: SetField = SetField()
    pair: tuple[int, str] = (0, "")
    either: int | str = 0
    by_number: dict[int, str] = attrs.Factory(dict)


@attrs.frozen
class ValidateTakesArguments:
    low: int = 0

    def validate(self, strict):
        return []


@attrs.frozen
class Unresolvable:
    value: NoSuchType = None  # type: ignore[name-defined]  # noqa: F821


def test_every_supported_type_passes_the_registration_check():
    for cls in (Sample, WithRequired, Pointerish, Checked, Outer):
        assert args_type_problems(cls) == [], cls


def test_args_classes_scorer_cannot_convert_say_what_is_wrong():
    assert args_type_problems(NotAttrs) == ["NotAttrs is not an attrs class (decorate it with @attrs.frozen)"]
    assert args_type_problems({"label": str}) == [
        "{'label': <class 'str'>} is not an attrs class (decorate it with @attrs.frozen)"]
    [problem] = args_type_problems(SetField)
    assert problem.startswith("SetField.labels: unsupported field type set[str] (supported: bool, int, float, str")
    assert [p.split(" (supported")[0] for p in args_type_problems(BadNested)] == [
        "BadNested.inner.labels: unsupported field type set[str]",
        "BadNested.pair: tuple[int, str]: only tuple[X, ...] is supported",
        "BadNested.either: int | str: unions other than X | None are not supported",
        "BadNested.by_number: dict[int, str]: only str keys are supported",
    ]
    assert args_type_problems(ValidateTakesArguments) == [
        "ValidateTakesArguments.validate must be a method taking no arguments (it returns a list of (path, "
        "message) pairs)"]
    [problem] = args_type_problems(Unresolvable)
    assert problem.startswith("Unresolvable: its annotations cannot be resolved (NameError: name 'NoSuchType' is "
                              "not defined")


@attrs.frozen
class CrashingValidate:
    low: int = 0

    def validate(self):
        return [("", str(1 / self.low))]


@attrs.frozen
class StringsValidate:
    low: int = 0

    def validate(self):
        return "low must be positive" if self.low < 1 else None


@attrs.frozen
class GeneratorValidate:
    low: int = 0

    def validate(self):
        if self.low < 1:
            yield ("low", "must be positive")


@attrs.frozen
class CrashingConstructor:
    low: int = attrs.field(default=0, converter=lambda value: {}[value])


def test_a_validate_that_crashes_or_returns_no_pairs_names_the_class_and_owner():
    owner = 'plugin "Tier" (scorer-tier 0.2.0)'
    assert errors_of(CrashingValidate, {}, owner=owner) == [
        ("args", 'CrashingValidate.validate() of plugin "Tier" (scorer-tier 0.2.0) raised ZeroDivisionError: '
                 "division by zero")]
    assert errors_of(StringsValidate, {}, owner=owner) == [
        ("args", "StringsValidate.validate() of plugin \"Tier\" (scorer-tier 0.2.0) returned 'low must be "
                 'positive\', expected a list of (path, message) pairs of strings, such as [("weight", "must be in '
                 '1..100")]')]
    assert structure(StringsValidate, {"low": 1}) == StringsValidate(1)  # None: no problem
    assert errors_of(GeneratorValidate, {}) == [("args.low", "must be positive")]
    assert errors_of(CrashingConstructor, {"low": 3}, owner=owner) == [
        ("args", 'CrashingConstructor of plugin "Tier" (scorer-tier 0.2.0) cannot be built: KeyError: 3')]
