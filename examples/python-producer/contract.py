"""The custody transfer worker's public contract as a Python service sees it.

docs/contract.md sections 3 (the ``submit-transaction`` job), 4 (the events stream) and 8 (the JSON Schemas
shipped in the producer package under ``schemas/``). The schemas are the single source of truth:
this module loads them, it never restates the rules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

import jsonschema
from jsonschema.exceptions import SchemaError

#: Queue and job name of a transfer (docs/contract.md section 3).
QUEUE_NAME = "submit-transaction"
JOB_NAME = "submit-transaction"

DEFAULT_REDIS_URL = "redis://127.0.0.1:6379"
DEFAULT_PREFIX = "bull"

#: The producer package's schemas when this example sits in the worker's repository.
REPO_SCHEMAS_DIR = Path(__file__).resolve().parent.parent.parent / "packages" / "producer" / "schemas"


def _catalog() -> dict[str, Any]:
    """The contract's catalog (event types, terminal ones, failure codes) shipped beside the schemas."""
    directory = Path(os.environ.get("SCHEMAS_DIR") or REPO_SCHEMAS_DIR)
    with open(directory / "catalog.json", encoding="utf-8") as handle:
        return json.load(handle)


_CATALOG = _catalog()

#: Every event type of the stream (docs/contract.md section 4), and the ones that end a transfer:
#: read from the package's ``schemas/catalog.json``, never restated here.
EVENT_TYPES: tuple[str, ...] = tuple(_CATALOG["eventTypes"])
TERMINAL_EVENTS: frozenset[str] = frozenset(_CATALOG["terminalEventTypes"])


def job_id(sequence_id: str) -> str:
    """The job id for a transfer, the same rule as the typed producer (packages/producer/src/job-id.ts).

    BullMQ refuses job ids that look like integers, so ``jobId = sequenceId`` fails for an all-digit
    sequenceId; a fixed prefix makes every valid sequenceId a valid job id. The worker does not depend on
    the job id (one sequenceId is one transfer whatever job ids it arrives under), but the same rule in
    every producer lets BullMQ drop a duplicate enqueue of a job that is still there.
    """
    return f"transfer-{sequence_id}"


def default_events_stream(prefix: str) -> str:
    """EVENTS_STREAM's default for a QUEUE_PREFIX."""
    return f"{prefix}:transfer-events"


def env_or(name: str, default: str) -> str:
    value = os.environ.get(name, "")
    return value if value != "" else default


def default_schemas_dir() -> Path:
    """SCHEMAS_DIR when set, else the producer package's ``schemas/`` in this repository."""
    return Path(env_or("SCHEMAS_DIR", str(REPO_SCHEMAS_DIR)))


class SchemaFilesError(Exception):
    """The schema files are missing or are not JSON Schemas."""


Issue = dict[str, str]


def _issue_path(path: Iterable[Any]) -> str:
    text = ".".join(str(part) for part in path)
    return text or "(root)"


class Schemas:
    """The payload schema and one schema per event type's ``data``, loaded once and checked."""

    def __init__(self, directory: Path, event_types: Iterable[str] = EVENT_TYPES) -> None:
        self.directory = directory
        self._payload = self._load(directory / "submit-payload.schema.json")
        self._events = {event: self._load(directory / "events" / f"{event}.schema.json") for event in event_types}

    @staticmethod
    def _load(path: Path) -> Any:
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise SchemaFilesError(
                f"{path} is missing (the producer package's schemas/: in the repository, "
                f"node packages/producer/scripts/generate-schemas.ts writes them)"
            ) from None
        except (OSError, ValueError) as error:
            raise SchemaFilesError(f"{path}: {error}") from None
        cls = jsonschema.validators.validator_for(schema)
        try:
            cls.check_schema(schema)
        except SchemaError as error:
            raise SchemaFilesError(f"{path} is not a valid JSON Schema: {error.message}") from None
        return cls(schema, format_checker=cls.FORMAT_CHECKER)

    @staticmethod
    def _issues(validator: Any, instance: Any) -> list[Issue]:
        errors = sorted(validator.iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message))
        return [{"path": _issue_path(error.absolute_path), "message": error.message} for error in errors]

    def payload_issues(self, payload: Any) -> list[Issue]:
        """Every way ``payload`` breaks the submit-transaction schema; empty when it is valid."""
        return self._issues(self._payload, payload)

    def knows(self, event: str) -> bool:
        return event in self._events

    def event_issues(self, event: str, data: Any) -> list[Issue]:
        """Every way an event's ``data`` breaks its type's schema; empty when it is valid."""
        return self._issues(self._events[event], data)
