"""What both adapters share about background jobs: their kinds, payloads, retry backoff
and the encoding of their usage records.

A job is written in the same transaction as the turn that made it due (the turn that
closed a segment), so it survives a restart. A worker claims one atomically; a claim
not finished within the lease (its worker died) is claimable again. A failure is kept
(`last_error`) and the job is retried later, with exponential backoff, until
MAX_ATTEMPTS claims in all, those its worker never finished counted too (a job that
kills its process is given up, not run at every restart).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ._records import Job, JobUsage
from ._time import moment, moment_or_none

__all__ = [
    "LEASE_SECONDS",
    "MAX_ATTEMPTS",
    "SEGMENT_SUMMARY",
    "SegmentJob",
    "backoff",
    "job_from_row",
    "job_key",
    "segment_job_payload",
    "usage_decoder",
]

SEGMENT_SUMMARY = "segment_summary"
LEASE_SECONDS = 300.0  # an unfinished claim older than this is claimable again
MAX_ATTEMPTS = 6


class SegmentJob(msgspec.Struct, frozen=True):
    """The payload of a segment_summary job."""

    segment_id: int


usage_decoder = msgspec.json.Decoder(JobUsage)
_encoder = msgspec.json.Encoder()


def segment_job_payload(segment_id: int) -> str:
    return _encoder.encode(SegmentJob(segment_id)).decode()


def backoff(attempts: int) -> float:
    """Seconds before the next try after `attempts` failed ones: 30 s, 1, 2, 4 … min, at
    most an hour."""
    return float(min(30 * 2 ** max(attempts - 1, 0), 3600))


def job_key(user: str, continuum_id: str) -> str:
    """(user, continuum) as one string, for excluding busy continuums in SQL. Neither a
    user name nor a continuum id can hold ':'."""
    return f"{user}:{continuum_id}"


def job_from_row(row: Sequence[Any]) -> Job:
    """A Job from (id, owner, kind, continuum_id, payload, state, attempts, next_at,
    claimed_at, last_error, created_at, finished_at, record)."""
    record = row[12]
    payload = row[4]
    return Job(
        int(row[0]),
        str(row[1]),
        str(row[2]),
        str(row[3]),
        payload if isinstance(payload, str) else bytes(payload).decode(),
        row[5],
        int(row[6]),
        moment(row[7]),
        moment_or_none(row[8]),
        None if row[9] is None else str(row[9]),
        moment(row[10]),
        moment_or_none(row[11]),
        None if record is None else usage_decoder.decode(bytes(record)),
    )
