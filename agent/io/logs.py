"""Logging: JSON lines in production, readable lines on a terminal.

Both formatters pass every text they print through `secrets.scrub`: a URL's
credentials or an Authorization value that reached a message, an extra or a
traceback is masked there, the last line of defence.
"""

from __future__ import annotations

import json
import logging
import sys
import time

from agent.io.secrets import scrub

_RESERVED = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        doc = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": scrub(record.getMessage()),
        }
        doc.update({k: scrub(v) if isinstance(v, str) else v for k, v in record.__dict__.items() if k not in _RESERVED})
        if record.exc_info:
            doc["exc"] = scrub(self.formatException(record.exc_info))
        return json.dumps(doc, default=lambda v: scrub(str(v)))


class TextFormatter(logging.Formatter):
    def __init__(self):
        super().__init__("%(asctime)s %(levelname)-7s %(name)s: %(message)s", "%H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        extra = {k: v for k, v in record.__dict__.items() if k not in _RESERVED}
        line = super().format(record)
        return scrub(line + ("  " + " ".join(f"{k}={v}" for k, v in extra.items()) if extra else ""))


def setup(fmt: str = "auto", level: str = "INFO", stream=None) -> None:
    stream = stream or sys.stderr
    use_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter() if use_json else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("kafka").setLevel(max(logging.WARNING, root.level))
