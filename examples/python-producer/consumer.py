#!/usr/bin/env python3
"""Follows transfers on the custody transfer worker's events stream from Python.

Reads the stream (EVENTS_STREAM, default ``<QUEUE_PREFIX>:transfer-events``) with XREAD, validates
each event's ``data`` against the producer package's schema for its type
(``schemas/events/<event>.schema.json``), checks that each transfer's ``version`` runs 1, 2, 3, ...
without gaps, and stops once every transfer named has had its terminal event.

    python consumer.py SEQUENCE_ID [SEQUENCE_ID ...]    # those transfers, until each has ended
    python consumer.py --timeout 0                      # every event, until Ctrl-C

Prints one JSON line per event: the entry's fields with ``data`` and ``metadata`` parsed, plus
``"valid": true``, or ``"valid": false`` with ``"issues"`` (``null`` for a type it has no schema for).

Exit codes: 0 every transfer ended and every event was valid; 1 an event broke its schema or the
version order; 2 usage or schema files; 3 Redis unreachable; 4 timed out before every transfer ended.
Environment: REDIS_URL, QUEUE_PREFIX, EVENTS_STREAM, SCHEMAS_DIR (the options override them).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import redis

from contract import (
    DEFAULT_PREFIX,
    DEFAULT_REDIS_URL,
    TERMINAL_EVENTS,
    Schemas,
    SchemaFilesError,
    default_events_stream,
    default_schemas_dir,
    env_or,
)

EXIT_OK, EXIT_INVALID, EXIT_USAGE, EXIT_REDIS, EXIT_TIMEOUT = 0, 1, 2, 3, 4
BLOCK_MS = 1_000
BATCH = 500


def emit(line: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def parse_json(text: str) -> tuple[Any, str | None]:
    try:
        return json.loads(text), None
    except ValueError as error:
        return None, str(error)


class Follower:
    """Checks and prints the events of the transfers it follows (all of them when none is named)."""

    def __init__(self, schemas: Schemas, watched: set[str], from_start: bool) -> None:
        self.schemas = schemas
        self.watched = watched
        self.pending = set(watched)
        self.from_start = from_start
        self.last_version: dict[str, int] = {}
        self.ended: set[str] = set()
        self.invalid = 0

    def follows(self, sequence_id: str) -> bool:
        return not self.watched or sequence_id in self.watched

    def check(self, entry_id: str, fields: dict[str, str]) -> None:
        event = fields.get("event", "")
        sequence_id = fields.get("sequenceId", "")
        if not self.follows(sequence_id):
            return
        issues: list[dict[str, str]] = []

        data, error = parse_json(fields.get("data", ""))
        if error is not None:
            issues.append({"path": "data", "message": f"not JSON: {error}"})
        metadata: Any = None
        if fields.get("metadata", ""):
            metadata, error = parse_json(fields["metadata"])
            if error is not None:
                issues.append({"path": "metadata", "message": f"not JSON: {error}"})

        valid: bool | None
        if not self.schemas.knows(event):
            valid = None  # a type newer than this consumer: events only grow within a major version
        else:
            if data is not None or not issues:
                issues += [{"path": f"data.{i['path']}" if i["path"] != "(root)" else "data", "message": i["message"]}
                           for i in self.schemas.event_issues(event, data)]
            issues += self._order_issues(event, sequence_id, fields.get("version", ""))
            valid = not issues

        line: dict[str, Any] = {
            "id": entry_id,
            "event": event,
            "sequenceId": sequence_id,
            "walletId": fields.get("walletId", ""),
            "coin": fields.get("coin", ""),
            "version": fields.get("version", ""),
            "at": fields.get("at", ""),
            "data": data,
            "metadata": metadata,
            "valid": valid,
        }
        if issues:
            line["issues"] = issues
        if valid is False:
            self.invalid += 1
        emit(line)
        if event in TERMINAL_EVENTS:
            self.pending.discard(sequence_id)

    def _order_issues(self, event: str, sequence_id: str, version_text: str) -> list[dict[str, str]]:
        if event == "reconcile.completed" or not sequence_id:
            return []  # not a transfer's event (version 0), or a rejected payload without a sequenceId
        if not version_text.isdigit():
            return [{"path": "version", "message": f"not a counter: {version_text!r}"}]
        version = int(version_text)
        issues = []
        last = self.last_version.get(sequence_id)
        expected = (last + 1) if last is not None else (1 if self.from_start else None)
        if expected is not None and version != expected:
            issues.append({"path": "version", "message": f"{version}, expected {expected} (a gap or a duplicate)"})
        if sequence_id in self.ended:
            issues.append({"path": "event", "message": "an event after the transfer's terminal event"})
        if event in TERMINAL_EVENTS:
            self.ended.add(sequence_id)
        self.last_version[sequence_id] = version
        return issues


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sequence_ids", nargs="*", metavar="SEQUENCE_ID", help="transfers to follow (default: every event)")
    parser.add_argument("--redis-url", default=env_or("REDIS_URL", DEFAULT_REDIS_URL))
    parser.add_argument("--prefix", default=env_or("QUEUE_PREFIX", DEFAULT_PREFIX), help="the worker's QUEUE_PREFIX")
    parser.add_argument("--stream", default=None, help="the worker's EVENTS_STREAM (default <prefix>:transfer-events)")
    parser.add_argument("--schemas", type=Path, default=default_schemas_dir(), help="the producer package's schemas/")
    parser.add_argument("--from", dest="start", default="0",
                        help="stream id to read after: 0 (default) reads the stream from its start, $ only new events")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before giving up; 0 = never")
    args = parser.parse_args(argv)
    stream = args.stream or env_or("EVENTS_STREAM", default_events_stream(args.prefix))

    try:
        schemas = Schemas(args.schemas)
    except SchemaFilesError as error:
        print(f"consumer: {error}", file=sys.stderr)
        return EXIT_USAGE

    follower = Follower(schemas, set(args.sequence_ids), from_start=args.start in ("0", "0-0"))
    deadline = time.monotonic() + args.timeout if args.timeout > 0 else None
    client = redis.Redis.from_url(args.redis_url, decode_responses=True, socket_connect_timeout=5,
                                  socket_timeout=(BLOCK_MS / 1000) + 10)
    try:
        cursor = args.start
        if cursor == "$":  # resolve it once, so no event falls between two reads
            last = client.xrevrange(stream, count=1)
            cursor = last[0][0] if last else "0-0"
        while not args.sequence_ids or follower.pending:
            if deadline is not None and time.monotonic() >= deadline:
                if not args.sequence_ids:
                    break  # following everything: the timeout is just where it stops
                print(json.dumps({"timeout": args.timeout, "waiting": sorted(follower.pending)}), file=sys.stderr)
                return EXIT_TIMEOUT
            reply = client.xread({stream: cursor}, count=BATCH, block=BLOCK_MS)
            for _stream, entries in reply or []:
                for entry_id, fields in entries:
                    cursor = entry_id
                    follower.check(entry_id, fields)
    except redis.RedisError as error:
        print(f"consumer: Redis: {error}", file=sys.stderr)
        return EXIT_REDIS
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
    return EXIT_INVALID if follower.invalid else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
