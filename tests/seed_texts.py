"""The seed manual's YAML examples, exactly as written in tests/data/seeds/000_498f9e75a97da820.txt (the
examples/ copies are checked byte for byte against the seed by tests/cli; these are the literals the compiler
and schema tests use)."""


SEED_WORKFLOW = """\
name: invoice-settle
version: 3
trigger:
  event: billing.invoice.finalized
concurrency:
  max: 25
  partitionKey: "{{ input.invoiceId }}"
steps:
  - id: reserve-funds
    uses: connector/payments.authorize
    timeout: 15s
    retry: { max: 5, strategy: exponential-jitter }
    compensate: connector/payments.void
  - id: mark-paid
    uses: sql/execute
    timeout: 5s
    query: "update invoices set status='paid' where id = $1"
"""

SEED_EVENT_TRIGGER = """\
- id: trg_refund_large
  type: event
  event: billing.refund.requested
  filter: "data.amountCents > 500000 && data.currency == 'BRL'"
  workflow: wf_refund_review
  deliver:
    maxAge: 6h        # evento mais velho que isso vai direto para a DLQ
    dropOnFilterMiss: true
"""

SEED_SCHEDULE_TRIGGER = """\
- id: trg_nightly_reconcile
  type: schedule
  cron: "15 3 * * *"
  tz: America/Sao_Paulo
  workflow: wf_reconcile_ledger
  dstPolicy: skip-nonexistent   # skip-nonexistent | run-once | run-twice
  overlap: skip                 # skip | queue | allow
  catchUp:
    enabled: true
    maxOccurrences: 3           # recupera no máximo 3 ocorrências perdidas
    maxAge: 12h
"""

SEED_CONNECTOR = """\
- id: con_erp_private
  type: vpn/http
  baseUrl: https://erp.interno.local
  network: vpn_pj_checkout
  auth:
    kind: oauth2-client-credentials
    secretRef: sec_erp_client
  retryOn: [408, 429, 500, 502, 503, 504]
  timeout: 20s
  circuitBreaker:
    errorRateThreshold: 0.5   # abre com 50% de erro na janela
    window: 60s
    openFor: 30s
"""
