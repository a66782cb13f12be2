"""Logging, set up once per process: one JSON object per line in the cluster, or plain text.

Structured fields go in ``extra={"fields": {...}}``; the JSON formatter puts them at the top
level of the line, the text formatter appends them as ``key=value``.
"""

from __future__ import annotations

import datetime
import json
import logging
import sys
from collections.abc import Mapping
from typing import Any, Final, Literal

Format = Literal["json", "text"]
FORMATS: Final = ("json", "text")


def _fields(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, Mapping) else {}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        line.update(_fields(record))
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        out = super().format(record)
        extra = " ".join(f"{k}={v}" for k, v in _fields(record).items() if v not in (None, ""))
        return f"{out} {extra}" if extra else out


def setup(level: str = "INFO", fmt: Format = "json") -> None:
    """Replace the root logger's handlers with one on stderr in ``fmt``."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # No line shows thread or process names or the calling source line: skip working them out
    # for every record (the logging HOWTO's "Optimization" section names these switches).
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False
    logging._srcfile = None
    # aiohttp's access log would add a line per request next to the decision line.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
