"""Intake: where a workflow's input enters (a feed snapshot, an inbox of documents)."""
