"""`frontmind inspect --url` and `stats --url`: what they show, read from a running
daemon through `frontmind.Client` instead of from the data directory (which the daemon
holds). The token says whose data it is: a user's token reads that user's."""

from __future__ import annotations

from actors import ModelRequest
from storage import Job, TurnRecord

from .._client import Client

__all__ = ["remote_context", "remote_records", "turn_records"]

PAGE = 1000


async def remote_context(
    url: str, token: str | None, continuum_id: str, message: str
) -> ModelRequest:
    async with Client(url, token=token) as client:
        return await client.context(continuum_id, message)


async def turn_records(client: Client, continuum_id: str) -> list[TurnRecord]:
    """Every turn record of a continuum, in time order: all its pages, not the latest."""
    # Pages run from the latest turns back; each page is in time order.
    pages = [await client.turns(continuum_id, PAGE)]
    while pages[-1].next_cursor is not None:
        pages.append(await client.turns(continuum_id, PAGE, cursor=pages[-1].next_cursor))
    return [record for page in reversed(pages) for record in page]


async def remote_records(
    url: str, token: str | None, continuum_id: str | None
) -> tuple[list[TurnRecord], list[Job]]:
    """Every turn record (of one continuum, or of all) in time order, and the jobs."""
    async with Client(url, token=token) as client:
        if continuum_id is not None:
            ids = [continuum_id]
        else:
            ids = []
            listed = await client.continuums(limit=PAGE)
            while True:
                ids.extend(c.id for c in listed)
                if listed.next_cursor is None:
                    break
                listed = await client.continuums(limit=PAGE, cursor=listed.next_cursor)
        records: list[TurnRecord] = []
        for cid in ids:
            records.extend(await turn_records(client, cid))
        records.sort(key=lambda r: r.started_at)
        jobs = await client.jobs(continuum_id, limit=PAGE)
        found = list(jobs)
        while jobs.next_cursor is not None:
            jobs = await client.jobs(continuum_id, limit=PAGE, cursor=jobs.next_cursor)
            found.extend(jobs)
        return records, found
