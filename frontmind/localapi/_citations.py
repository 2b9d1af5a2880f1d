"""Citations the default responder writes for the sources a request asks it to cite.

Docs ("Citations", build-with-claude/citations): a `document` block with
`citations: {"enabled": true}` is cited by a `char_location` (plain-text documents: the
0-based `start_char_index` and exclusive `end_char_index` of `cited_text`) or a
`content_block_location` (custom-content documents: the 0-based `start_block_index` and
exclusive `end_block_index` of the cited blocks); `document_index` counts every document
block of the request in order. Docs ("Search results", build-with-claude/search-results):
a `search_result` block with citations enabled is cited by a `search_result_location`
(`search_result_index` counts the request's search_result blocks in order, in messages
and inside tool results, apart from documents; `source` and `title` repeat the block's).
`cited_text` is not counted as output.

Chosen: only sources whose `citations.enabled` is true are cited (the docs make citations
opt-in per block), and only those of the last user message, which is what the reply
answers. PDFs (`page_location`) are not cited: the local API reads no page text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._schema import DocumentBlock, MessagesRequest, SearchResultBlock, ToolResultBlock

__all__ = ["citations_for", "citations_on"]

_CITED_CHARS = 160  # how much of a plain-text document one citation quotes


def _enabled(config: Any) -> bool:
    return isinstance(config, dict) and config.get("enabled") is True


def _sources(content: Any) -> Iterator[DocumentBlock | SearchResultBlock]:
    if isinstance(content, str):
        return
    for block in content or ():
        if isinstance(block, DocumentBlock | SearchResultBlock):
            yield block
        elif isinstance(block, ToolResultBlock):
            yield from _sources(block.content)


def _document_citation(block: DocumentBlock, index: int) -> dict[str, Any] | None:
    source = block.source
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        data = str(source["data"])
        # The first sentence, as a model quoting its source would.
        end = data.find(". ")
        end = min(end + 1 if end >= 0 else len(data), _CITED_CHARS)
        return {
            "type": "char_location",
            "cited_text": data[:end],
            "document_index": index,
            "document_title": block.title,
            "start_char_index": 0,
            "end_char_index": end,
        }
    if source.get("type") == "content" and isinstance(source.get("content"), list):
        parts = source["content"]
        if not parts or not isinstance(parts[0], dict):
            return None
        return {
            "type": "content_block_location",
            "cited_text": str(parts[0].get("text", "")),
            "document_index": index,
            "document_title": block.title,
            "start_block_index": 0,
            "end_block_index": 1,
        }
    return None


def _search_citation(block: SearchResultBlock, index: int) -> dict[str, Any] | None:
    if not block.content:
        return None
    return {
        "type": "search_result_location",
        "cited_text": block.content[0].text,
        "search_result_index": index,
        "source": block.source,
        "title": block.title,
        "start_block_index": 0,
        "end_block_index": 1,
    }


def citations_on(request: MessagesRequest) -> bool:
    """Whether any source of the request, in any turn, has citations enabled."""
    return any(
        _enabled(block.citations)
        for message in request.messages
        for block in _sources(message.content)
    )


def citations_for(request: MessagesRequest) -> list[tuple[str, dict[str, Any]]]:
    """(what the reply says, its citation) for each citable source of the last user
    message, in order."""
    documents = results = 0
    last_user = max((i for i, m in enumerate(request.messages) if m.role == "user"), default=-1)
    cited: list[tuple[str, dict[str, Any]]] = []
    if last_user < 0 or not any(
        _enabled(block.citations) for block in _sources(request.messages[last_user].content)
    ):
        return cited  # nothing to cite: the sources before it need not be counted
    for position, message in enumerate(request.messages):
        for block in _sources(message.content):
            citation: dict[str, Any] | None = None
            if isinstance(block, DocumentBlock):
                if position == last_user and _enabled(block.citations):
                    citation = _document_citation(block, documents)
                documents += 1
            else:
                if position == last_user and _enabled(block.citations):
                    citation = _search_citation(block, results)
                results += 1
            if citation is not None:
                name = citation.get("document_title") or citation.get("title") or "the source"
                cited.append((f"{name} says: {citation['cited_text']}", citation))
    return cited
