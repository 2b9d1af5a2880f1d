"""The model catalog Frontmind runs with: the shipped `models.toml`, then the config's
`[[models]]` rows over it (and, online, the Models API's answers; see `_models_api.py`).

The file is package data (`frontmind/models.toml`); the actors receive the catalog built
here and never read the file themselves (they know nothing of `frontmind`).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from importlib import resources

from actors import ModelCatalog, ModelPatch, apply_patches, decode_catalog

__all__ = ["MODELS_RESOURCE", "load_catalog", "shipped_catalog"]

MODELS_RESOURCE = "models.toml"


@functools.cache
def shipped_catalog() -> ModelCatalog:
    """The catalog of the data file shipped with this release."""
    data = resources.files("frontmind").joinpath(MODELS_RESOURCE).read_bytes()
    return decode_catalog(data)


def load_catalog(patches: Iterable[ModelPatch] = ()) -> ModelCatalog:
    """The shipped catalog with the config's `[[models]]` rows laid over it."""
    return apply_patches(shipped_catalog(), patches)
