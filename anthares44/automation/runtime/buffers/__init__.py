"""Debounce and batch (§22, docs/flow.md "Debounce and batch"): events delivered to a workflow that declares one
create no run of their own; they join the open buffer of their key, and the run started when it flushes carries
them.

  keys.py     the buffer key of an event (the workflow's `key` CEL), or E_FLOW_KEY_INVALID
  intake.py   an event joins its buffer inside the ingestion transaction (bus, webhook, envelope delivery)
  flush.py    one buffer becomes one run: the conditional transition open -> flushed and the run, together
  flusher.py  `BufferFlusher`: flushes the buffers that come due on the engine's clock (serve, the test kit)
  views.py    open buffers (`flow buffers`), the events a run carries (`runs show`), the metrics
"""
