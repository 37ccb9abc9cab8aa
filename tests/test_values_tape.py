"""Record and replay return equal values of equal types (tapetui.core.codecs, through a real Tape)."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pydantic
import pytest

from tapetui import Tape, TapeError, ToolRegistry
from tapetui.core.codecs import CodecWarning
from tapetui.core.config import Config

WHEN = datetime(2026, 12, 1, 13, 14, 15, 123456, tzinfo=UTC)


class Forecast(pydantic.BaseModel):
    city: str
    at: datetime
    temps: tuple[float, ...]


@dataclasses.dataclass
class Booking:
    ref: uuid.UUID
    price: Decimal
    when: datetime


class Query(pydantic.BaseModel):
    city: str
    days: int = 3


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool()
    def now(again: int = 0) -> datetime:
        return WHEN

    @reg.tool()
    def pair() -> tuple[int, str]:
        return (1, "a")

    @reg.tool()
    def forecast(q: Query) -> Forecast:
        return Forecast(city=q.city, at=WHEN, temps=(1.5, 2.0))

    @reg.tool()
    async def book(city: str) -> list[Booking]:
        return [Booking(uuid.UUID(int=7), Decimal("19.90"), WHEN)]

    @reg.tool()
    def untyped_tuple():  # type: ignore[no-untyped-def]  # noqa: ANN202 - no annotation on purpose
        return (1, [2, (3,)])

    @reg.tool()
    def untyped_when():  # type: ignore[no-untyped-def]  # noqa: ANN202
        return {"items": [{"when": WHEN}]}

    @reg.tool()
    def login(user: str) -> Forecast:
        return Forecast(city="token=abcdefghijklmnopqrstuvwxyz0123456789", at=WHEN, temps=())

    return reg


def _both(tmp_path: Path, tool: str, args: dict[str, Any]) -> tuple[Any, Any]:
    path = tmp_path / f"{tool}.jsonl"
    config = Config.for_dir(tmp_path)
    out = []
    for mode in ("record", "replay"):
        with Tape(path, mode, _registry(), config=config) as tape:
            out.append(asyncio.run(tape.acall(tool, args)) if tool == "book" else tape.call(tool, args))
    return out[0], out[1]


@pytest.mark.parametrize(
    ("tool", "args", "expected"),
    [
        ("now", {}, WHEN),
        ("pair", {}, (1, "a")),
        ("book", {"city": "Oslo"}, [Booking(uuid.UUID(int=7), Decimal("19.90"), WHEN)]),
        ("untyped_tuple", {}, [1, [2, [3]]]),  # no codec: the JSON form, in both modes
    ],
)
def test_record_and_replay_return_equal_values_of_equal_types(
    tmp_path: Path, tool: str, args: dict[str, Any], expected: Any
) -> None:
    recorded, replayed = _both(tmp_path, tool, args)
    assert recorded == replayed == expected
    assert type(recorded) is type(replayed) is type(expected)
    if isinstance(expected, list) and expected and dataclasses.is_dataclass(expected[0]):
        assert type(replayed[0]) is Booking and type(replayed[0].price) is Decimal


def test_pydantic_models_as_argument_and_result(tmp_path: Path) -> None:
    recorded, replayed = _both(tmp_path, "forecast", {"q": Query(city="Oslo")})
    assert isinstance(replayed, Forecast) and recorded == replayed
    assert replayed.temps == (1.5, 2.0) and replayed.at == WHEN
    (line,) = [r for r in map(orjson.loads, (tmp_path / "forecast.jsonl").read_bytes().splitlines()) if "args" in r]
    assert line["args"] == {"q": {"city": "Oslo", "days": 3}}  # the model's JSON dump
    with Tape(tmp_path / "forecast.jsonl", "replay", _registry(), config=Config.for_dir(tmp_path)) as tape:
        assert tape.call("forecast", {"q": {"city": "Oslo", "days": 3}}) == recorded  # the same key as a dict


def test_a_result_with_no_json_form_and_no_codec_is_recorded_as_an_error_naming_its_path(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    config = Config.for_dir(tmp_path)
    with (
        Tape(path, "record", _registry(), config=config) as tape,
        pytest.raises(TapeError, match=r"result\.items\[0\]\.when is a datetime"),
    ):
        tape.call("untyped_when", {})
    (line,) = [r for r in map(orjson.loads, path.read_bytes().splitlines()) if r.get("type") == "call"]
    assert "result.items[0].when is a datetime" in line["error"]["message"]
    with (
        Tape(path, "replay", _registry(), config=config) as tape,
        pytest.raises(TapeError, match=r"result\.items\[0\]\.when is a datetime"),
    ):
        tape.call("untyped_when", {})


def test_a_redacted_field_comes_back_redacted(tmp_path: Path) -> None:
    recorded, replayed = _both(tmp_path, "login", {"user": "ann"})
    assert recorded.city.startswith("token=abcdef")  # what the tool returned
    assert isinstance(replayed, Forecast) and "abcdef" not in replayed.city


def test_a_recording_that_no_longer_fits_the_type_comes_back_as_json_with_one_warning(tmp_path: Path) -> None:
    path = tmp_path / "now.jsonl"
    config = Config.for_dir(tmp_path)
    with Tape(path, "record", _registry(), config=config) as tape:
        tape.call("now", {})
        tape.call("now", {"again": 1})
    text = path.read_bytes().replace(b'"2026-12-01T13:14:15.123456Z"', b'"not a date"')
    path.write_bytes(text)
    with Tape(path, "replay", _registry(), config=config) as tape, pytest.warns(CodecWarning, match="now") as caught:
        assert tape.call("now", {}) == "not a date"
        assert tape.call("now", {"again": 1}) == "not a date"
    assert len([w for w in caught if issubclass(w.category, CodecWarning)]) == 1
