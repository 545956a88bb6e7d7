#!/usr/bin/env python3
"""Hands transfers to the custody transfer worker from Python.

Validates each payload with the producer package's JSON Schema (``submit-payload.schema.json``) and
enqueues the valid ones on the worker's BullMQ queue with the Python ``bullmq`` client: queue and job
name ``submit-transaction``, prefix QUEUE_PREFIX, job id ``transfer-<sequenceId>``. A payload that
breaks the schema is refused here, with the schema's errors, and never reaches Redis.

    python producer.py payload.json [more.json ...]     # '-' reads one payload from stdin

Prints one JSON line per payload (the refusals first: they are decided before connecting):
    {"source": "bad.json", "status": "refused", "issues": [{"path": "coin", "message": "..."}]}
    {"source": "payload.json", "status": "enqueued", "sequenceId": "...", "jobId": "transfer-..."}
With --check it only validates: ``"status": "valid"`` or ``"refused"``, no Redis, no bullmq needed.

Exit codes: 0 every payload enqueued; 1 at least one refused (the valid ones are still enqueued);
2 usage or schema files; 3 Redis unreachable or the enqueue failed.
Environment: REDIS_URL, QUEUE_PREFIX, SCHEMAS_DIR (the options override them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis

from contract import (
    DEFAULT_PREFIX,
    DEFAULT_REDIS_URL,
    JOB_NAME,
    QUEUE_NAME,
    Schemas,
    SchemaFilesError,
    default_schemas_dir,
    env_or,
    job_id,
)

EXIT_OK, EXIT_REFUSED, EXIT_USAGE, EXIT_REDIS = 0, 1, 2, 3
#: Give up on an unreachable Redis after this long instead of retrying for minutes.
CONNECT_TIMEOUT_S = 5.0


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def read_payload(source: str) -> Any:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    return json.loads(text)


async def enqueue(valid: list[tuple[str, dict[str, Any]]], redis_url: str, prefix: str) -> int:
    from bullmq import Queue  # here, so that --check runs where only jsonschema is installed

    # Our own connection, so an unreachable Redis fails within seconds (the client bullmq would build
    # from a URL retries for minutes). bullmq needs decode_responses=True.
    client = aioredis.Redis.from_url(
        redis_url, decode_responses=True, socket_connect_timeout=CONNECT_TIMEOUT_S, socket_timeout=30
    )
    queue = None
    code = EXIT_OK
    try:
        try:
            await asyncio.wait_for(client.ping(), CONNECT_TIMEOUT_S)
        except (OSError, asyncio.TimeoutError, aioredis.RedisError) as error:
            for source, payload in valid:
                emit({"source": source, "status": "error", "sequenceId": payload["halfSigned"]["sequenceId"],
                      "error": f"Redis unreachable: {error or type(error).__name__}"})
            return EXIT_REDIS
        queue = Queue(QUEUE_NAME, {"connection": client, "prefix": prefix})
        for source, payload in valid:
            sequence_id = payload["halfSigned"]["sequenceId"]
            try:
                job = await queue.add(JOB_NAME, payload, {"jobId": job_id(sequence_id)})
            except (OSError, aioredis.RedisError) as error:
                emit({"source": source, "status": "error", "sequenceId": sequence_id, "error": str(error)})
                code = EXIT_REDIS
                continue
            emit({"source": source, "status": "enqueued", "sequenceId": sequence_id, "jobId": job.id})
    finally:
        if queue is not None:
            await queue.close()
        await client.aclose()
    return code


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("payloads", nargs="+", metavar="PAYLOAD", help="JSON file with one payload, or - for stdin")
    parser.add_argument("--redis-url", default=env_or("REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--prefix", default=env_or("QUEUE_PREFIX", DEFAULT_PREFIX), help="the worker's QUEUE_PREFIX")
    parser.add_argument("--schemas", type=Path, default=default_schemas_dir(), help="the producer package's schemas/")
    parser.add_argument("--check", action="store_true", help="validate only: print the verdicts, enqueue nothing")
    args = parser.parse_args(argv)

    try:
        schemas = Schemas(args.schemas, event_types=())
    except SchemaFilesError as error:
        print(f"producer: {error}", file=sys.stderr)
        return EXIT_USAGE

    # Validate everything first: a refused payload never touches Redis.
    valid: list[tuple[str, dict[str, Any]]] = []
    refused = 0
    for source in args.payloads:
        try:
            payload = read_payload(source)
        except (OSError, ValueError) as error:
            emit({"source": source, "status": "refused", "issues": [{"path": "(root)", "message": f"unreadable JSON: {error}"}]})
            refused += 1
            continue
        issues = schemas.payload_issues(payload)
        if issues:
            emit({"source": source, "status": "refused", "issues": issues})
            refused += 1
            continue
        if args.check:
            emit({"source": source, "status": "valid", "sequenceId": payload["halfSigned"]["sequenceId"]})
            continue
        valid.append((source, payload))

    code = asyncio.run(enqueue(valid, args.redis_url, args.prefix)) if valid else EXIT_OK
    if code != EXIT_OK:
        return code
    return EXIT_REFUSED if refused else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
