"""An A2A agent built with the official a2a-sdk server classes, for baton's outbound tests.

Usage: peer.py <delay_seconds> <log_file> [<reply>]. Listens on a free loopback port and
prints it on the first line of stdout. Each message is answered, after <delay_seconds>, by a
completed task whose artifact is `peer heard: <text>`, or with <reply>: <reply> streamed in
8-character chunks 40 ms apart, then a file `notes.txt` (raw bytes). Each message received is
appended to <log_file> as a JSON line (messageId, text, metadata).
"""

import asyncio
import json
import socket
import sys

import uvicorn
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from a2a.helpers import new_raw_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill

DELAY = float(sys.argv[1])
LOG = sys.argv[2]
REPLY = sys.argv[3] if len(sys.argv) > 3 else None


class Echo(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        text = context.get_user_input()
        with open(LOG, "a") as log:
            log.write(json.dumps({"messageId": message.message_id, "text": text,
                                  "metadata": MessageToDict(message.metadata)}) + "\n")
        task = context.current_task or new_task_from_user_message(message)
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        await asyncio.sleep(DELAY)
        if REPLY is None:
            await updater.add_artifact([new_text_part(f"peer heard: {text}")], name="reply")
        else:
            for n, at in enumerate(range(0, len(REPLY), 8)):
                await updater.add_artifact([new_text_part(REPLY[at:at + 8])],
                                           artifact_id="reply", name="reply", append=n > 0)
                await asyncio.sleep(0.04)
            await updater.add_artifact([new_raw_part(b"the notes\n", "text/plain", "notes.txt")],
                                       artifact_id="notes", name="notes")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.cancel()


async def main() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    card = AgentCard(
        name="peer",
        description="Echoes what it is told.",
        version="1.0",
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/",
                                             protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="Echoes what it is told.",
                           tags=["echo"])],
    )
    handler = DefaultRequestHandler(agent_executor=Echo(), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/")
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes), log_level="warning"))
    print(port, flush=True)
    await server.serve(sockets=[sock])


asyncio.run(main())
