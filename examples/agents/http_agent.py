#!/usr/bin/env python3
"""A small agent behind baton's `http` backend: it takes the turn as the POST body and answers
with baton's events as NDJSON, streaming its reply word by word.

    python3 examples/agents/http_agent.py 9100     # then: backend = "http", url = "http://127.0.0.1:9100/turn"

Replace `think` with your agent. It may call baton's tools meanwhile: the turn's `tools`
holds the MCP URL and this turn's bearer token.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def think(turn):
    """The reply to the turn's last message."""
    last = turn["messages"][-1]
    return f"{turn['bot']} heard {last.get('name') or 'someone'}: {last['content']}"


class Turn(BaseHTTPRequestHandler):
    def do_POST(self):
        turn = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        for n, word in enumerate(think(turn).split(" ")):
            event = {"type": "text", "delta": word if n == 0 else " " + word}
            self.wfile.write((json.dumps(event) + "\n").encode())
            self.wfile.flush()
        self.wfile.write(b'{"type": "usage", "prompt_tokens": 0, "completion_tokens": 0}\n')

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 9100), Turn)
print(f"listening on {server.server_address[1]}", flush=True)
server.serve_forever()
