"""A personal assistant on the daemon: talk to it, and have its reminders delivered.

Start the daemon, then this program beside it:

    frontmind serve --offline                 # or with ANTHROPIC_API_KEY set
    python examples/assistant.py http://127.0.0.1:8765 "Remind me to stretch in 1 minute"

It sends the message (if any) as a turn and prints the reply, then watches the
reminders through `frontmind.Client`: each one that falls due is delivered (printed
here; send it wherever you like) and marked complete, so it is delivered once. The
model sees what is still open in every turn's notification center. `--once` delivers
what is due now and exits (for cron); `--token` is the daemon's bearer token, if any.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import anyio

from frontmind import Client, ClientError, TextDelta, ToolStarted, TurnError

POLL_SECONDS = 30


async def say(client: Client, message: str) -> None:
    async for event in client.turn("assistant", message):
        if isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
        elif isinstance(event, ToolStarted):
            print(f"[{event.name}] ", end="", flush=True)
        elif isinstance(event, TurnError):
            print(f"\n(error: {event.message})")
    print()


async def deliver_due(client: Client) -> int:
    """Deliver every open reminder that is due; returns how many."""
    delivered = 0
    page = await client.reminders(limit=500)
    while True:
        for reminder in page:
            if reminder.due_at is not None and reminder.due_at <= datetime.now(UTC):
                due = reminder.due_at.astimezone()  # in this machine's zone
                print(f"⏰ {reminder.text} (due {due:%H:%M})", flush=True)
                await client.complete_reminder(reminder.id)
                delivered += 1
        if page.next_cursor is None:
            return delivered
        page = await client.reminders(limit=500, cursor=page.next_cursor)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the daemon's base URL")
    parser.add_argument("message", nargs="?", help="something to tell the assistant first")
    parser.add_argument("--token", default=None, help="the daemon's bearer token")
    parser.add_argument("--once", action="store_true", help="deliver what is due, then exit")
    args = parser.parse_args()
    async with Client(args.url, token=args.token) as client:
        try:
            await client.health()
        except ClientError as exc:
            raise SystemExit(f"assistant: {exc}") from None
        if args.message:
            await say(client, args.message)
        while True:
            await deliver_due(client)
            if args.once:
                return
            await anyio.sleep(POLL_SECONDS)


if __name__ == "__main__":
    anyio.run(main)
