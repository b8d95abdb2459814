"""Side effects of the workflows (publish a report, pay an invoice, archive a file), each done
once per item through the ledger's idempotency keys, whatever clears or retries the task."""
