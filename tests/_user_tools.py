"""Tools for the config tests to name in `[[tool]] use = "tests._user_tools:…"`."""

from __future__ import annotations

from typing import Annotated

import msgspec

from frontmind import Turn, tool


def weather(city: Annotated[str, msgspec.Meta(description="A city name.")]) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


@tool(timeout_s=3, guidance="convert: use it for every unit conversion.")
async def convert(value: float, unit: str = "km", *, turn: Turn) -> dict[str, object]:
    """Convert a distance to miles."""
    return {"miles": round(value * 0.621371, 3) if unit == "km" else value, "in": turn.continuum_id}


NOT_A_FUNCTION = 42
