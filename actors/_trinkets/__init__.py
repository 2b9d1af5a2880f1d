"""The built-in trinkets."""

from ._datetime import DateTimeTrinket
from ._manifest import ManifestTrinket
from ._memories import MemoriesTrinket
from ._reminders import RemindersTrinket
from ._search import ContextSearcher, SearchTrinket, searcher_name
from ._system import DomainDocTrinket, StaticTrinket

__all__ = [
    "ContextSearcher",
    "DateTimeTrinket",
    "DomainDocTrinket",
    "ManifestTrinket",
    "MemoriesTrinket",
    "RemindersTrinket",
    "SearchTrinket",
    "StaticTrinket",
    "searcher_name",
]
