"""A client generated from the daemon's /openapi.json works: `openapi-python-client`
builds it, and every operation but the streaming one is called through it, against a
real daemon, its answers read back into the generated models. The streaming turn route
is described as server-sent events, which the generator hands back as raw bytes.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests._daemon import daemon

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

ADMIN = "generated-client-admin"
PACKAGE = "frontmind_api"
STREAMING = "createTurn"  # the SSE route: its bytes, not a model


def _snake(operation_id: str) -> str:
    out = ""
    for char in operation_id:
        out += f"_{char.lower()}" if char.isupper() and out else char.lower()
    return out.replace("open_a_p_i", "open_api")


def _generate(spec: dict[str, Any], into: Path) -> ModuleType:
    (into / "spec.json").write_text(json.dumps(spec))
    (into / "config.json").write_text(json.dumps({"package_name_override": PACKAGE}))
    bin_dir = str(Path(sys.executable).parent)  # its ruff formats the generated code
    result = subprocess.run(
        [
            str(Path(bin_dir) / "openapi-python-client"),
            "generate",
            "--path",
            "spec.json",
            "--config",
            "config.json",
            "--meta",
            "none",
            "--fail-on-warning",
        ],
        cwd=into,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    sys.path.insert(0, str(into))
    try:
        return importlib.import_module(PACKAGE)
    finally:
        sys.path.remove(str(into))


async def test_a_generated_client_calls_every_route(tmp_path: Path) -> None:
    async with daemon(tmp_path / "data", "--token", ADMIN) as d:
        async with d.client() as http:
            spec = (await http.get("/openapi.json")).json()
        package = _generate(spec, tmp_path)
        models = importlib.import_module(f"{PACKAGE}.models")
        client = package.AuthenticatedClient(base_url=d.url, token=ADMIN)
        operations = {
            op["operationId"]: (path, method, op)
            for path, methods in spec["paths"].items()
            for method, op in methods.items()
        }

        def api(operation_id: str) -> ModuleType:
            tag = operations[operation_id][2]["tags"][0]
            return importlib.import_module(f"{PACKAGE}.api.{tag}.{_snake(operation_id)}")

        def body(operation_id: str, payload: dict[str, Any]) -> Any:
            ref = operations[operation_id][2]["requestBody"]["content"]["application/json"]
            name = ref["schema"]["$ref"].rsplit("/", 1)[1]
            return getattr(models, name).from_dict(payload)

        called: dict[str, int] = {}
        made: dict[str, Any] = {}

        async def call(operation_id: str, **arguments: Any) -> Any:
            response = await api(operation_id).asyncio_detailed(client=client, **arguments)
            assert 200 <= response.status_code < 300, (operation_id, response.content)
            _path, _method, op = operations[operation_id]
            answer = op["responses"][str(response.status_code)]
            if "application/json" in answer.get("content", {}):
                assert response.parsed is not None, operation_id  # read into its model
            called[operation_id] = response.status_code
            return response

        # The streaming route: the generator leaves it as bytes, which are the events.
        streamed = await call(
            STREAMING,
            continuum_id="ada",
            body=body(STREAMING, {"message": "remind me to water the plants in 10 minutes"}),
        )
        assert b"event: turn.completed" in streamed.content
        assert b"event: tool.started" in streamed.content

        steps: list[tuple[str, Callable[[], dict[str, Any]], Callable[[Any], None]]] = [
            ("getHealth", dict, lambda r: None),
            ("getReady", dict, lambda r: None),
            ("listContinuums", dict, lambda r: made.update(first=r.parsed.continuums[0].id)),
            ("listTurns", lambda: {"continuum_id": "ada"}, lambda r: None),
            ("listMessages", lambda: {"continuum_id": "ada"}, lambda r: None),
            ("getContext", lambda: {"continuum_id": "ada", "message": "next?"}, lambda r: None),
            ("getModelSettings", lambda: {"continuum_id": "ada"}, lambda r: None),
            (
                "setModelSettings",
                lambda: {
                    "continuum_id": "ada",
                    "body": body("setModelSettings", {"max_tokens": 2048}),
                },
                lambda r: None,
            ),
            (
                "createReminder",
                lambda: {"body": body("createReminder", {"text": "call Bob"})},
                lambda r: made.update(reminder=r.parsed.id),
            ),
            (
                "completeReminder",
                lambda: {"reminder_id": made["reminder"], "body": body("completeReminder", {})},
                lambda r: None,
            ),
            ("listReminders", lambda: {"include_completed": True}, lambda r: None),
            ("deleteReminder", lambda: {"reminder_id": made["reminder"]}, lambda r: None),
            (
                "createMemory",
                lambda: {"body": body("createMemory", {"text": "The cat is named Tom"})},
                lambda r: made.update(memory=r.parsed.id),
            ),
            ("listMemories", dict, lambda r: None),
            ("deleteMemory", lambda: {"memory_id": made["memory"]}, lambda r: None),
            (
                "putDocument",
                lambda: {"body": body("putDocument", {"label": "notes", "content": "x"})},
                lambda r: None,
            ),
            ("listDocuments", dict, lambda r: None),
            ("deleteDocument", lambda: {"label": "notes"}, lambda r: None),
            (
                "createUser",
                lambda: {"body": body("createUser", {"name": "bob"})},
                lambda r: None,
            ),
            ("listUsers", dict, lambda r: None),
            (
                "rotateUserToken",
                lambda: {"name": "bob", "body": body("rotateUserToken", {})},
                lambda r: None,
            ),
            (
                "backupStore",
                lambda: {"body": body("backupStore", {"path": str(tmp_path / "backup.db")})},
                lambda r: None,
            ),
            ("deleteUser", lambda: {"name": "bob"}, lambda r: None),
            ("listJobs", lambda: {"continuum_id": "ada"}, lambda r: None),
            ("listMcpServers", dict, lambda r: None),
            ("reloadMcpTools", lambda: {"body": body("reloadMcpTools", {})}, lambda r: None),
            ("getMetrics", dict, lambda r: None),
            ("getOpenAPI", dict, lambda r: None),
            ("getDocs", dict, lambda r: None),
            ("deleteContinuum", lambda: {"continuum_id": "ada"}, lambda r: None),
        ]
        for operation_id, arguments, check in steps:
            response = await call(operation_id, **arguments())
            check(response)
        await client.get_async_httpx_client().aclose()
        assert await d.stop() == 0
    # Every operation the daemon describes was called through the generated client.
    assert set(called) == set(operations)
    assert made["first"] == "ada"
