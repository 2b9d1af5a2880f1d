"""`LocalMessagesAPI`: the local Messages API server as an async context manager."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal

from ._app import LocalAPIState, RecordedRequest, build_app
from ._clock import Clock, MonotonicClock
from ._faults import Fault, Latency
from ._models import served_models
from ._responder import DefaultResponder, Responder
from ._serve import serve_local

__all__ = ["LocalMessagesAPI"]


class LocalMessagesAPI:
    """A real HTTP server on loopback that the unmodified `anthropic` SDK can talk to.

    async with LocalMessagesAPI() as api:
        client = AsyncAnthropic(api_key="test", base_url=api.base_url)

    `account`: the simulated account's age for preserved thinking's prefix check ("new":
    created on or after 2026-08-31, enforced by default on Fable 5.1 and its peers).
    `context_management`: applied to every request that sends none, as a client sending
    it with the beta client would (benchmarks of Frontmind's own requests).
    `models`: rows in models.toml's `[[model]]` shape served beside the shipped ones, each
    over the shipped row of its name (the fields it gives) or a new model (then with
    `context_window` and `max_output`): Frontmind offline passes its config's
    `[[models]]` rows here.
    """

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        clock: Clock | None = None,
        latency: Latency | None = None,
        api_key: str | None = None,
        verify_foreign_signatures: bool = False,
        token_counts: Literal["calibrated", "plain"] = "calibrated",
        account: Literal["new", "old"] = "new",
        context_management: dict[str, Any] | None = None,
        models: Iterable[Mapping[str, Any]] = (),
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.state = LocalAPIState(
            responder=responder or DefaultResponder(),
            clock=clock or MonotonicClock(),
            latency=latency or Latency(),
            api_key=api_key,
            models=served_models(models),
            verify_foreign_signatures=verify_foreign_signatures,
            token_counts=token_counts,
            account=account,
            context_management=context_management,
        )
        self._host = host
        self._port = port
        self._url: str | None = None
        self._context: AbstractAsyncContextManager[str] | None = None

    @property
    def base_url(self) -> str:
        if self._url is None:
            raise RuntimeError("the local Messages API is not running")
        return self._url

    @property
    def requests(self) -> list[RecordedRequest]:
        """Requests received so far, oldest first: the most recent 1,000, and of those
        only as many as hold 64 MiB of bodies (`state.record_limit`, `state.record_bytes`)."""
        return list(self.state.requests)

    def message_bodies(self) -> list[Any]:
        """Decoded bodies of the `/v1/messages` requests received so far."""
        return [r.json() for r in self.state.requests if r.path == "/v1/messages"]

    def schedule(self, *faults: Fault) -> None:
        """Apply these faults to the next requests, one each, in order."""
        self.state.faults.extend(faults)

    def take_down(self, *urls: str) -> None:
        """From now on, an image or a document by one of these URLs cannot be downloaded:
        a request holding one is refused as the live API refuses it (`_fetch.py`)."""
        self.state.gone_urls.update(urls)

    def set_latency(self, latency: Latency) -> None:
        self.state.latency = latency

    async def __aenter__(self) -> LocalMessagesAPI:
        self._context = self._serve()
        self._url = await self._context.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._context is not None
        try:
            await self._context.__aexit__(*exc_info)
        finally:
            self._url = None

    def _serve(self) -> AbstractAsyncContextManager[str]:
        return serve_local(build_app(self.state), self._host, self._port)
