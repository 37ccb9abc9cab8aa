"""Values that are not plain JSON (tapetui.core.codecs): which declared types get a codec, what a tape holds
for them, and that the standard library's codec (pydantic not installed) writes and reads the same."""

from __future__ import annotations

import collections
import dataclasses
import enum
import sys
import typing
import warnings
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Annotated, Any, NamedTuple, Optional, TypedDict, TypeVar
from uuid import UUID

import orjson
import pydantic
import pytest

from tapetui.core import codecs
from tapetui.core.codecs import Codec, CodecWarning, Unrecordable, codec_for, json_form
from tapetui.core.errors import TooDeep

WHEN = datetime(2026, 12, 1, 13, 14, 15, 123456, tzinfo=UTC)


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Size(enum.StrEnum):
    S = "s"


class Point(NamedTuple):
    x: int
    at: date


@dataclasses.dataclass
class Booking:
    ref: UUID
    price: Decimal
    when: datetime
    tags: tuple[str, ...] = ()


@dataclasses.dataclass
class Node:
    name: str
    children: list[Node] = dataclasses.field(default_factory=list)


class Slot(TypedDict):
    starts: datetime
    room: str


class Forecast(pydantic.BaseModel):
    city: str
    at: datetime
    temps: tuple[float, ...]
    booking: Booking | None = None


class Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    at: datetime
    pair: tuple[int, int]


class Opaque:
    """A class nothing can rebuild."""


@pytest.fixture(params=["pydantic", "stdlib"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Codecs built with pydantic, and with the standard library's codec as when pydantic is not installed."""
    monkeypatch.setattr(codecs, "_CACHE", {})
    if request.param == "stdlib":
        monkeypatch.setitem(sys.modules, "pydantic", None)  # `import pydantic` raises ImportError
        assert codecs._import_pydantic() is None
    yield request.param


def as_json(data: Any) -> Any:
    """``data`` through real JSON: what a tape holds and a replay reads."""
    return orjson.loads(orjson.dumps(data))


# A value of each declared type that gets a codec, with the JSON a tape holds for it.
ROUND_TRIPS: list[tuple[Any, Any, Any]] = [
    (datetime, WHEN, "2026-12-01T13:14:15.123456Z"),
    (datetime, datetime(2026, 1, 2, 3, 4, 5), "2026-01-02T03:04:05"),
    (datetime, datetime(2026, 1, 2, tzinfo=timezone(timedelta(hours=2))), "2026-01-02T00:00:00+02:00"),
    (date, date(2026, 1, 2), "2026-01-02"),
    (time, time(1, 2, 3, 5), "01:02:03.000005"),
    (UUID, UUID(int=7), "00000000-0000-0000-0000-000000000007"),
    (Decimal, Decimal("19.90"), "19.90"),
    (Color, Color.BLUE, "blue"),
    (Size, Size.S, "s"),
    (tuple, (1, "a", None), [1, "a", None]),
    (tuple[int, str], (1, "a"), [1, "a"]),
    (tuple[datetime, ...], (WHEN,), ["2026-12-01T13:14:15.123456Z"]),
    (Point, Point(1, date(2026, 1, 2)), [1, "2026-01-02"]),
    (set[int], {3}, [3]),
    (frozenset[str], frozenset({"a"}), ["a"]),
    (list[tuple[int, int]], [(1, 2), (3, 4)], [[1, 2], [3, 4]]),
    (dict[str, datetime], {"a": WHEN}, {"a": "2026-12-01T13:14:15.123456Z"}),
    (Optional[Decimal], None, None),  # noqa: UP045 - the typing spelling is one a tool may use
    (Decimal | None, Decimal("1.5"), "1.5"),
    (Annotated[datetime, "meta"], WHEN, "2026-12-01T13:14:15.123456Z"),
    (
        list[Booking],
        [Booking(UUID(int=7), Decimal("19.90"), WHEN, ("x",))],
        [
            {
                "ref": "00000000-0000-0000-0000-000000000007",
                "price": "19.90",
                "when": "2026-12-01T13:14:15.123456Z",
                "tags": ["x"],
            }
        ],
    ),
    (Node, Node("a", [Node("b")]), {"name": "a", "children": [{"name": "b", "children": []}]}),
    (Slot, {"starts": WHEN, "room": "1"}, {"starts": "2026-12-01T13:14:15.123456Z", "room": "1"}),
]


@pytest.mark.parametrize(("tp", "value", "stored"), ROUND_TRIPS, ids=lambda x: repr(x)[:40])
def test_a_declared_type_comes_back_equal_and_of_the_same_type(backend: str, tp: Any, value: Any, stored: Any) -> None:
    codec = codec_for(tp)
    assert codec is not None
    data = codec.encode(value)
    assert data == stored and as_json(data) == data  # exactly as JSON holds it: no tuple, no datetime
    back = codec.decode(as_json(data))
    assert back == value and type(back) is type(value)
    if isinstance(value, (list, dict)):  # the items too, not only the container
        items = value if isinstance(value, list) else list(value.values())
        got = back if isinstance(back, list) else list(back.values())
        assert [type(x) for x in got] == [type(x) for x in items]


@pytest.mark.parametrize(("tp", "value", "stored"), ROUND_TRIPS, ids=lambda x: repr(x)[:40])
def test_a_tape_written_with_pydantic_replays_without_it(
    monkeypatch: pytest.MonkeyPatch, tp: Any, value: Any, stored: Any
) -> None:
    monkeypatch.setattr(codecs, "_CACHE", {})
    with_pydantic = codec_for(tp)
    assert with_pydantic is not None
    data = as_json(with_pydantic.encode(value))
    monkeypatch.setattr(codecs, "_CACHE", {})
    monkeypatch.setitem(sys.modules, "pydantic", None)
    without = codec_for(tp)
    assert without is not None
    assert without.encode(value) == data  # the same JSON, byte for byte
    assert without.decode(data) == value == with_pydantic.decode(as_json(without.encode(value)))


def test_pydantic_models_round_trip() -> None:
    value = Forecast(city="Oslo", at=WHEN, temps=(1.5, 2.0), booking=Booking(UUID(int=1), Decimal("2"), WHEN))
    for tp in (Forecast, list[Forecast], Forecast | None):
        codec = codec_for(tp)
        assert codec is not None
        given = [value] if tp == list[Forecast] else value
        back = codec.decode(as_json(codec.encode(given)))
        assert back == given
    codec = codec_for(Forecast)
    assert codec is not None
    back = codec.decode(as_json(codec.encode(value)))
    assert type(back) is Forecast and type(back.temps) is tuple and type(back.booking) is Booking


def test_a_strict_model_is_read_back_from_json() -> None:
    """Strict models refuse an ISO string for a datetime in Python mode; what a tape holds is JSON."""
    codec = codec_for(Strict)
    assert codec is not None
    value = Strict(at=WHEN, pair=(1, 2))
    assert codec.decode(as_json(codec.encode(value))) == value


@pytest.mark.parametrize(
    "tp",
    [
        None,
        Any,
        str,
        int,
        float,
        bool,
        type(None),
        dict,
        list,
        object,
        dict[str, int],
        list[dict[str, Any]],
        typing.List[str],  # noqa: UP006 - the old spelling is still a declared type
        Optional[str],  # noqa: UP045
        str | None,
        typing.Literal["a", "b"],
        "datetime",  # an annotation that did not resolve
        TypeVar("T"),
        Opaque,  # nothing can rebuild it: its value goes through json_form (and is refused there)
        list[Opaque],
    ],
    ids=repr,
)
def test_no_codec_for_undeclared_json_or_unknown_types(backend: str, tp: Any) -> None:
    assert codec_for(tp) is None


def test_codecs_are_cached_per_type_and_unhashable_types_still_work(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "_CACHE", {})
    assert codec_for(list[datetime]) is codec_for(list[datetime])
    assert codec_for(int) is None and int in codecs._CACHE  # a "no codec" answer is cached too
    unhashable = Annotated[datetime, {"unhashable": []}]
    with pytest.raises(TypeError):
        hash(unhashable)
    codec = codec_for(unhashable)
    assert isinstance(codec, Codec) and codec.decode(codec.encode(WHEN)) == WHEN


def test_a_union_other_than_optional_has_no_stdlib_codec(backend: str) -> None:
    codec = codec_for(datetime | int)
    assert (codec is None) == (backend == "stdlib")


def test_encode_names_the_first_path_that_has_no_json_form(backend: str) -> None:
    codec = codec_for(list[Booking])
    assert codec is not None
    bad = Booking(UUID(int=1), Decimal("1"), object())  # type: ignore[arg-type]
    with pytest.raises(Unrecordable) as e:
        codec.encode([Booking(UUID(int=1), Decimal("1"), WHEN), bad])
    assert (e.value.path, e.value.type_name) == ("result[1].when", "object")
    assert str(e.value) == "result[1].when is a object, not a JSON value"
    assert isinstance(e.value, TypeError)


def test_a_value_that_does_not_have_the_declared_type_is_written_as_its_json_form(backend: str) -> None:
    codec = codec_for(datetime)
    assert codec is not None
    assert codec.encode("not a date") == "not a date"
    with pytest.raises(Exception):  # noqa: B017 - whatever the rebuild raises; the caller falls back on the data
        codec.decode("not a date")
    with pytest.raises(Unrecordable):
        codec.encode(object())


def test_a_redacted_field_fails_the_rebuild(backend: str) -> None:
    codec = codec_for(Booking)
    assert codec is not None
    data = as_json(codec.encode(Booking(UUID(int=1), Decimal("1"), WHEN)))
    data["price"] = "[REDACTED]"
    with pytest.raises(Exception):  # noqa: B017 - pydantic's ValidationError, or decimal's InvalidOperation
        codec.decode(data)


def test_codec_warning_is_a_user_warning() -> None:
    with pytest.warns(CodecWarning):
        warnings.warn("x", CodecWarning, stacklevel=1)
    assert issubclass(CodecWarning, UserWarning)


# ---- json_form -----------------------------------------------------------------------------------------


def test_json_values_come_back_as_the_very_same_object() -> None:
    for value in [
        {"a": 1, "b": [1.5, "x", None, True, {"c": []}]},
        [{"a": {"b": {"c": [1, 2]}}}],
        "text",
        3,
        None,
    ]:
        assert json_form(value) is value


def test_tuples_become_lists_recursively_and_only_what_changed_is_copied() -> None:
    inner = {"k": [1, 2]}
    value = {"a": (1, (2, 3)), "same": inner}
    out = json_form(value)
    assert out == {"a": [1, [2, 3]], "same": {"k": [1, 2]}}
    assert out is not value and out["same"] is inner
    assert value == {"a": (1, (2, 3)), "same": inner}  # the argument is never changed


def test_subclasses_become_their_plain_type_and_non_finite_floats_null() -> None:
    out = json_form({"s": Size.S, "d": collections.OrderedDict(a=1), "nan": float("nan"), "inf": [float("inf")]})
    assert out == {"s": "s", "d": {"a": 1}, "nan": None, "inf": [None]}
    assert type(out["s"]) is str and type(out["d"]) is dict


def test_a_pydantic_model_becomes_its_json_dump() -> None:
    value = {"f": Forecast(city="Oslo", at=WHEN, temps=(1.0,))}
    dumped = {"city": "Oslo", "at": "2026-12-01T13:14:15.123456Z", "temps": [1.0], "booking": None}
    assert json_form(value, "args") == {"f": dumped}


@pytest.mark.parametrize(
    ("value", "path", "type_name"),
    [
        ({"items": [1, 2, {"when": WHEN}]}, "result.items[2].when", "datetime"),
        ([Booking(UUID(int=1), Decimal("1"), WHEN)], "result[0]", "Booking"),
        ({"s": {1, 2}}, "result.s", "set"),
        ({"c": Color.RED}, "result.c", "Color"),
        (b"bytes", "result", "bytes"),
        ({"a": {1: "x"}}, "result.a", "int"),
    ],
)
def test_anything_else_is_unrecordable_naming_the_path_and_the_type(value: Any, path: str, type_name: str) -> None:
    with pytest.raises(Unrecordable) as e:
        json_form(value)
    assert (e.value.path, e.value.type_name) == (path, type_name)
    assert path in str(e.value) and type_name in str(e.value)


def test_the_message_reads_as_the_issue_says() -> None:
    with pytest.raises(Unrecordable, match=r"^result\.items\[2\]\.when is a datetime, not a JSON value$"):
        json_form({"items": [1, 2, {"when": WHEN}]})
    with pytest.raises(Unrecordable, match=r"^args\.q is a datetime, not a JSON value$"):
        json_form({"q": WHEN}, "args")


def test_json_form_takes_values_as_deep_as_redaction_does_and_names_deeper_ones() -> None:
    deep: Any = "leaf"
    for _ in range(900):
        deep = {"a": deep}
    assert json_form(deep) is deep
    deeper: Any = "leaf"
    for _ in range(20_000):
        deeper = [deeper]
    with pytest.raises(TooDeep):
        json_form(deeper)
