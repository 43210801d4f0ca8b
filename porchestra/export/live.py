"""`--otlp-endpoint URL`: OpenTelemetry spans sent to a collector the user runs, while the run goes.

An event-log listener feeds each (already redacted) event to a SpanBuilder whose spans go through a
BatchSpanProcessor to the OTLP/HTTP exporter: a model call's span is sent when the call has returned,
a worker's when it ends, the root's at task end; `close()` flushes what is left.
"""

from __future__ import annotations

import logging
from typing import Any

from .otel import SpanBuilder, otlp_exporter

log = logging.getLogger(__name__)


class LiveOTLPListener:
    def __init__(self, endpoint: str):
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        self.endpoint = endpoint
        otlp_exporter(endpoint)  # fails now (missing extra) rather than at the first event
        self._builder: SpanBuilder | None = None
        # a builder's shutdown flushes and closes its processor: each trace gets its own
        self._make = lambda: SpanBuilder([BatchSpanProcessor(otlp_exporter(endpoint), schedule_delay_millis=500)])

    def __call__(self, e: dict[str, Any]) -> None:
        try:
            if self._builder is None or self._builder.closed:
                self._builder = self._make()  # one trace per task (eval runs several through one listener)
            self._builder.feed(e)
        except Exception as exc:  # tracing must never break the run it observes
            log.warning("OTLP live export: %s: %s", type(exc).__name__, exc)

    def close(self) -> None:
        if self._builder is not None and not self._builder.closed:
            self._builder.close()


def live_otlp_listener(endpoint: str) -> LiveOTLPListener:
    return LiveOTLPListener(endpoint)
