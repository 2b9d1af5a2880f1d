"""After startup the daemon freezes its long-lived objects out of the collector's way."""

from __future__ import annotations

import gc

import frontmind.server._daemon  # noqa: F401  (everything the daemon imports is alive)
from frontmind.server._startup import freeze_startup_objects


def test_a_full_collection_no_longer_walks_the_startup_objects() -> None:
    assert gc.get_freeze_count() == 0
    tracked = len(gc.get_objects())
    try:
        freeze_startup_objects()
        assert gc.get_freeze_count() >= tracked // 2
        assert len(gc.get_objects()) < tracked // 10  # what a full collection walks now
    finally:
        gc.unfreeze()
