#!/usr/bin/env python3
"""A fake agent for the tests: reads its turn, asks snark over baton's MCP with the per-turn
token (claiming, in vain, to be another bot), and answers with snark's reply as JSON Lines.
With $TURN_DUMP set it keeps the turn it got there. With `--ask-caller QUESTION` it asks that
of whoever its turn answers instead (`escalate_to_user`), and says it asked. With `--attach
NAME TEXT` it keeps TEXT as artifact NAME (`artifact_put`), attaches it to its reply
(`reply_attach`) and says so."""
import json
import os
import sys
import urllib.request

turn = json.load(sys.stdin)
if os.environ.get("TURN_DUMP"):
    with open(os.environ["TURN_DUMP"], "w") as f:
        json.dump(turn, f)
url, token = os.environ["BATON_MCP_URL"], os.environ["BATON_MCP_TOKEN"]
assert turn["tools"] == {"mcp_url": url, "token": token}, turn["tools"]
session = None


def rpc(body):
    global session
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "authorization": "Bearer " + token,
    }
    if session:
        headers["mcp-session-id"] = session
        headers["mcp-protocol-version"] = "2025-06-18"
    request = urllib.request.Request(url, json.dumps(body).encode(), headers, method="POST")
    with urllib.request.urlopen(request) as response:
        session = response.headers.get("mcp-session-id") or session
        for line in response if "id" in body else []:
            line = line.decode().strip().removeprefix("data:").strip()
            if line.startswith("{") and json.loads(line).get("id") == body["id"]:
                return json.loads(line)


rpc({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "fake-agent", "version": "0"}}})
rpc({"jsonrpc": "2.0", "method": "notifications/initialized"})
if sys.argv[1:2] == ["--ask-caller"]:
    call = {"name": "escalate_to_user", "arguments": {"message": sys.argv[2]}}
    rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
    print(json.dumps({"type": "text", "delta": "I asked: " + sys.argv[2]}))
    sys.exit(0)
if sys.argv[1:2] == ["--attach"]:
    put = {"name": "artifact_put", "arguments": {"name": sys.argv[2], "text": sys.argv[3]}}
    kept = rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": put})
    artifact = json.loads(kept["result"]["content"][0]["text"])["id"]
    attach = {"name": "reply_attach", "arguments": {"ids": [artifact]}}
    rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": attach})
    print(json.dumps({"type": "text", "delta": "attached " + sys.argv[2]}))
    sys.exit(0)
call = {"name": "sessions_send", "arguments": {"target": "snark", "message": "hi there", "bot": "sec"}}
answer = rpc({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
result = json.loads(answer["result"]["content"][0]["text"])
print(json.dumps({"type": "progress", "message": "asked snark"}))
print(json.dumps({"type": "text", "delta": "snark said: " + result.get("reply", json.dumps(result))}))
