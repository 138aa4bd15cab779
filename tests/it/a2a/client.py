# Drives baton's A2A server with the official a2a-sdk client (scripts/test-deps-python).
# Usage: client.py [--binding=<binding>] <base> <bot> <mode> <text> <message_id> [<task_id>
# <context_id>]; prints one JSON object. The binding the client takes from the card is JSONRPC
# unless --binding names another (HTTP+JSON); "transport" says which transport it picked.
# Modes: send (blocking, then GetTask), stream (streaming send), twice (the same messageId sent
# twice), stream-twice (the same, streamed), immediately (returnImmediately), cancel (CancelTask of the task id given as <text>),
# get (GetTask of the task id given as <text>), file (the text with a file part: notes.txt
# inline and a URL), list (ListTasks pages of <text> tasks each, following nextPageToken to the
# last page). With a task and context id, the message is sent on that task (an answer to its
# question). An A2A error of cancel or get is printed as {"error": its class, "message": ...}.
import asyncio
import json
import sys

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.client.card_resolver import A2ACardResolver
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError
from google.protobuf import json_format


def as_json(message):
    return json_format.MessageToDict(message)


async def main(binding, base, bot, mode, text, message_id, task_id="", context_id=""):
    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, f"{base}/a2a/{bot}").get_agent_card()
        config = ClientConfig(
            httpx_client=http,
            streaming=mode in ("stream", "stream-twice"),
            supported_protocol_bindings=[binding],
        )
        client = ClientFactory(config).create(card)
        transport = type(client._transport).__name__

        if mode in ("cancel", "get"):
            try:
                if mode == "cancel":
                    task = await client.cancel_task(pb.CancelTaskRequest(id=text))
                    out = {"canceled": as_json(task)}
                else:
                    out = {"got": as_json(await client.get_task(pb.GetTaskRequest(id=text)))}
            except A2AError as err:
                out = {"error": type(err).__name__, "message": str(err)}
            out["transport"] = transport
            print(json.dumps(out), flush=True)
            return

        if mode == "list":
            pages, token = [], ""
            while True:
                request = pb.ListTasksRequest(page_size=int(text), page_token=token)
                page = await client.list_tasks(request)
                pages.append(as_json(page))
                token = page.next_page_token
                if not token or len(pages) > 20:
                    break
            print(json.dumps({"pages": pages, "transport": transport}), flush=True)
            return

        parts = [pb.Part(text=text)]
        if mode == "file":
            parts.append(
                pb.Part(raw=b"apples: 3", filename="notes.txt", media_type="text/plain")
            )
            parts.append(pb.Part(url="https://files.example/plan.pdf", filename="plan.pdf"))

        async def send():
            request = pb.SendMessageRequest(
                message=pb.Message(
                    message_id=message_id,
                    role=pb.ROLE_USER,
                    parts=parts,
                    task_id=task_id,
                    context_id=context_id,
                )
            )
            if mode == "immediately":
                request.configuration.return_immediately = True
            return [as_json(event) async for event in client.send_message(request)]

        out = {"card": as_json(card), "transport": transport, "events": await send()}
        if mode in ("twice", "stream-twice"):
            out["again"] = await send()
        task_id = next(
            (e["task"]["id"] for e in out["events"] if "task" in e),
            None,
        )
        if task_id is not None:
            task = await client.get_task(pb.GetTaskRequest(id=task_id))
            out["got"] = as_json(task)
        print(json.dumps(out), flush=True)


args = sys.argv[1:]
binding = "JSONRPC"
if args and args[0].startswith("--binding="):
    binding = args.pop(0).split("=", 1)[1]
asyncio.run(main(binding, *args[:7]))
