"""The model catalog Frontmind runs with: the shipped `models.toml`, the Models API's
answers over it (when Frontmind has a key of its own), then the config's `[[models]]`
rows over both.

The file is package data (`frontmind/models.toml`); the actors receive the catalog built
here (a `ModelSource`) and never read the file themselves (they know nothing of
`frontmind`).

Online, the first time a model is met (the config's model when Frontmind opens, a
continuum's when its settings are set or its first turn runs), `GET /v1/models/{id}` is
read through the SDK and its answer kept in storage with the time it was fetched; it is
asked again once that answer is older than `REFRESH_SECONDS`, by a new process or by a
running one (`ModelSource` meets a model again once it met it that long ago). A 404
refuses the model at settings time. If the API cannot be reached, a kept answer
(however old) or else the shipped data is used, with a warning in the log.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any, Protocol

import msgspec

from actors import (
    MeetModel,
    ModelCatalog,
    ModelError,
    ModelFacts,
    ModelPatch,
    ModelRow,
    SettingsError,
    apply_patches,
    decode_catalog,
    row_from_facts,
)
from storage import Storage, excerpt

__all__ = [
    "MODELS_RESOURCE",
    "REFRESH_SECONDS",
    "load_catalog",
    "local_api_rows",
    "models_api_meet",
    "shipped_catalog",
]

log = logging.getLogger("frontmind.models")

MODELS_RESOURCE = "models.toml"
# How long the Models API's answer for a model is used before it is asked again.
REFRESH_SECONDS = 24 * 3600.0


@functools.cache
def shipped_catalog() -> ModelCatalog:
    """The catalog of the data file shipped with this release."""
    data = resources.files("frontmind").joinpath(MODELS_RESOURCE).read_bytes()
    return decode_catalog(data)


def load_catalog(patches: Iterable[ModelPatch] = ()) -> ModelCatalog:
    """The shipped catalog with the config's `[[models]]` rows laid over it."""
    return apply_patches(shipped_catalog(), patches)


def local_api_rows(catalog: ModelCatalog, patches: Iterable[ModelPatch]) -> list[dict[str, Any]]:
    """The rows the config's `[[models]]` made, whole, as the local API takes them
    (`LocalMessagesAPI(models=...)`): offline, it serves the models Frontmind runs with."""
    rows: dict[str, dict[str, Any]] = {}
    for patch in patches:
        row = catalog.lookup(patch.name)
        if row is not None and row.name == patch.name:
            rows[row.name] = msgspec.to_builtins(row)
    return list(rows.values())


class _FactsClient(Protocol):
    async def model_facts(self, name: str) -> ModelFacts | None: ...


_decode_facts = msgspec.json.Decoder(ModelFacts).decode


def models_api_meet(
    base: ModelCatalog,
    patches: Iterable[ModelPatch],
    storage: Storage,
    client: _FactsClient,
    clock: Callable[[], float],
) -> MeetModel:
    """How a model met for the first time is looked up online (see the module doc)."""
    corrections = list(patches)

    async def meet(name: str) -> ModelRow | None:
        stored = await storage.model_facts(name)
        now = clock()
        if stored is not None and now - stored[1] < REFRESH_SECONDS:
            facts = _decode_facts(stored[0])
        else:
            try:
                fresh = await client.model_facts(name)
            except ModelError as exc:
                if stored is None:
                    log.warning(
                        "the Models API was not reached for %s (%s): using the data", name, exc
                    )
                    return None
                log.warning(
                    "the Models API was not reached for %s (%s): using its last answer", name, exc
                )
                facts = _decode_facts(stored[0])
            else:
                if fresh is None:
                    raise SettingsError(
                        "model: the Models API answers 404 not_found_error for "
                        f"{excerpt(name)!r}: "
                        "no such model for this key (unknown or retired); known to "
                        f"Frontmind's data: {', '.join(base.names())}"
                    )
                facts = fresh
                await storage.put_model_facts(name, msgspec.json.encode(facts), now)
        row = row_from_facts(base.lookup(name), name, facts, base.dynamic_server_tools)
        # The config's corrections stand over the API's answer.
        own = [p for p in corrections if p.name == row.name]
        if own:
            row = apply_patches(ModelCatalog([row]), own).lookup(row.name) or row
        return row

    return meet
