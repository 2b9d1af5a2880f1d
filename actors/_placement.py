"""The placement registry: the one place that decides where every section goes.

Trinkets never declare their own placement. For every section the registry knows its
placement (system prompt or notification center), whether it is cached, its order and
its priority (which sections the notification center's budget shortens first).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Literal

import msgspec

from ._exceptions import SectionConfigError

__all__ = [
    "BUILTIN_SECTIONS",
    "PLACEMENT_NOTIFICATION",
    "PLACEMENT_SYSTEM",
    "Placement",
    "PlacementRegistry",
    "SectionSpec",
]

Placement = Literal["system", "notification"]
PLACEMENT_SYSTEM: Final = "system"
PLACEMENT_NOTIFICATION: Final = "notification"


class SectionSpec(msgspec.Struct, frozen=True):
    name: str
    placement: Placement
    cached: bool
    order: int
    priority: int = 0  # higher survives the notification budget longer


BUILTIN_SECTIONS: tuple[SectionSpec, ...] = (
    SectionSpec("base_prompt", PLACEMENT_SYSTEM, cached=True, order=10),
    SectionSpec("domaindoc", PLACEMENT_SYSTEM, cached=True, order=20),
    SectionSpec("tool_guidance", PLACEMENT_SYSTEM, cached=True, order=30),
    SectionSpec("tool_hints", PLACEMENT_SYSTEM, cached=True, order=40),
    SectionSpec("datetime_section", PLACEMENT_NOTIFICATION, cached=False, order=10, priority=50),
    SectionSpec(
        "conversation_manifest", PLACEMENT_NOTIFICATION, cached=False, order=20, priority=30
    ),
    SectionSpec("active_reminders", PLACEMENT_NOTIFICATION, cached=False, order=30, priority=40),
    SectionSpec(
        "context_search_results", PLACEMENT_NOTIFICATION, cached=False, order=40, priority=20
    ),
    SectionSpec("relevant_memories", PLACEMENT_NOTIFICATION, cached=False, order=50, priority=10),
)


class PlacementRegistry:
    """Immutable once built; `legacy()` derives the all-in-the-system-prompt layout."""

    def __init__(self, specs: Iterable[SectionSpec] = BUILTIN_SECTIONS) -> None:
        by_name: dict[str, SectionSpec] = {}
        for spec in specs:
            if spec.name in by_name:
                raise SectionConfigError(f"section {spec.name!r} is registered twice")
            if not spec.name.isidentifier():
                raise SectionConfigError(
                    f"section name {spec.name!r} must be an identifier (letters, digits, _)"
                )
            if spec.placement == PLACEMENT_SYSTEM and not spec.cached:
                # Everything in the system prompt is in the prefix of the history
                # breakpoint: uncached system text would invalidate the history cache.
                raise SectionConfigError(
                    f"section {spec.name!r}: an uncached section belongs in the notification "
                    "center, not the system prompt"
                )
            by_name[spec.name] = spec
        self._specs = by_name
        self._ordered = tuple(
            sorted(by_name.values(), key=lambda s: (s.placement != PLACEMENT_SYSTEM, s.order))
        )

    def with_sections(self, extra: Iterable[SectionSpec]) -> PlacementRegistry:
        return PlacementRegistry([*self._specs.values(), *extra])

    def legacy(self) -> PlacementRegistry:
        """The layout the notification center replaced: every section in the system prompt."""
        return PlacementRegistry(
            msgspec.structs.replace(
                spec,
                placement=PLACEMENT_SYSTEM,
                cached=True,
                order=spec.order + (1000 if spec.placement != PLACEMENT_SYSTEM else 0),
            )
            for spec in self._specs.values()
        )

    def spec(self, name: str) -> SectionSpec:
        try:
            return self._specs[name]
        except KeyError:
            known = ", ".join(sorted(self._specs))
            raise SectionConfigError(
                f"section {name!r} is not in the placement registry (known: {known}); "
                "register it with a placement before adding its trinket"
            ) from None

    def ordered(self) -> tuple[SectionSpec, ...]:
        """System sections first, then notification sections, each by order."""
        return self._ordered

    def __contains__(self, name: object) -> bool:
        return name in self._specs
