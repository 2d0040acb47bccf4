"""A minimal LSP client over stdio for the real yaml-language-server (JSON-RPC with Content-Length framing).

Only what the editor tests need: initialize, didOpen, completion, hover and the diagnostics the server
publishes. A reader thread files every message by request id or by notification method.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PROPERTY = 10  # LSP CompletionItemKind.Property
INSTALL_HINT = "run scripts/install_editor_test_deps.sh (npm install into tests/editor/)"


def server_command() -> list[str] | None:
    """The yaml-language-server to drive: the one installed under tests/editor/, else one on PATH."""
    local = HERE / "node_modules" / ".bin" / "yaml-language-server"
    if local.is_file():
        return [str(local), "--stdio"]
    found = shutil.which("yaml-language-server")
    return [found, "--stdio"] if found else None


class LanguageServer:
    def __init__(self, command: list[str], root: Path) -> None:
        self._proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, cwd=root, env={**os.environ, "NODE_NO_WARNINGS": "1"})
        self._next_id = 0
        self._responses: dict[int, queue.Queue] = {}
        self._diagnostics: dict[str, queue.Queue] = {}
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(), "workspaceFolders": None,
            "capabilities": {"textDocument": {
                "completion": {"completionItem": {"snippetSupport": False, "documentationFormat": ["markdown"]}},
                "hover": {"contentFormat": ["markdown", "plaintext"]},
                "publishDiagnostics": {},
            }},
        })
        self.notify("initialized", {})
        # schemaStore off: only the modeline's schema may judge the documents
        self.notify("workspace/didChangeConfiguration", {"settings": {"yaml": {
            "validate": True, "hover": True, "completion": True, "schemaStore": {"enable": False}}}})

    # ------------------------------------------------------------------------------------------ protocol

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self._proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self._proc.stdin.flush()

    def _read(self) -> None:
        out = self._proc.stdout
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(out.read(length))
            if "id" in message and "method" in message:  # a request from the server: answer with nothing
                self._send({"id": message["id"], "result": [None] if message["method"] ==
                            "workspace/configuration" else None})
            elif "id" in message:
                self._box(self._responses, message["id"]).put(message)
            elif message.get("method") == "textDocument/publishDiagnostics":
                self._box(self._diagnostics, message["params"]["uri"]).put(message["params"]["diagnostics"])

    def _box(self, boxes: dict, key) -> queue.Queue:
        with self._lock:
            return boxes.setdefault(key, queue.Queue())

    def request(self, method: str, params: dict[str, Any], timeout: float = 30) -> Any:
        with self._lock:
            self._next_id += 1
            rid = self._next_id
        self._send({"id": rid, "method": method, "params": params})
        reply = self._box(self._responses, rid).get(timeout=timeout)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result")

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._send({"method": method, "params": params})

    def close(self) -> None:
        try:
            self.request("shutdown", {}, timeout=5)
            self.notify("exit", {})
            self._proc.wait(timeout=5)
        except Exception:
            self._proc.kill()
            self._proc.wait()

    # --------------------------------------------------------------------------------------- documents

    def open(self, uri: str, text: str) -> None:
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                              "text": text}})

    def diagnostics(self, uri: str, timeout: float = 30) -> list[dict[str, Any]]:
        """The diagnostics the server publishes for `uri` once it has validated it against its schema."""
        return self._box(self._diagnostics, uri).get(timeout=timeout)

    def completion_keys(self, uri: str, line: int, character: int) -> set[str]:
        """The keys offered at a position (items of kind Property; not the whole-object snippets)."""
        result = self.request("textDocument/completion", {"textDocument": {"uri": uri},
                                                         "position": {"line": line, "character": character}})
        items = result.get("items", []) if isinstance(result, dict) else (result or [])
        return {item["label"] for item in items if item.get("kind") == PROPERTY}

    def hover_text(self, uri: str, line: int, character: int) -> str:
        result = self.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                    "position": {"line": line, "character": character}})
        if not result:
            return ""
        contents = result["contents"]
        if isinstance(contents, dict):
            return contents.get("value", "")
        if isinstance(contents, list):
            return "\n".join(c if isinstance(c, str) else c.get("value", "") for c in contents)
        return contents
