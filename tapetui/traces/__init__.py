"""Traces in and out: OTLP JSON imported as tapes (:mod:`tapetui.traces.importer`) and tapes exported as OTLP
JSON (:mod:`tapetui.traces.export`). Plain JSON work: OpenTelemetry itself is needed only for live spans
(:mod:`tapetui.integrations.otel`, the extra ``tapetui[otel]``)."""
