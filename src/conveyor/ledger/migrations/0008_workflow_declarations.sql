-- Workflows are declared in Python next to their DAGs and stored here when a DAG runs, so every
-- process (CLI, API server, triggerer, workflow_health) reads one definition without importing
-- a DAG file. A changed declaration is a new version; items keep the version they came in under.
CREATE TABLE conveyor.workflows (
    name        text NOT NULL,
    version     integer NOT NULL,
    digest      text NOT NULL,                  -- sha256 of the canonical definition
    definition  jsonb NOT NULL,
    declared_by text,                           -- 'dag.task#try' that stored it
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, version),
    UNIQUE (name, digest)
);

-- NULL for items received before declarations were stored: they follow the latest version.
ALTER TABLE conveyor.items ADD COLUMN workflow_version integer;

-- pending_approval (a routine approval, not an exception) joins the review statuses.
DROP INDEX IF EXISTS conveyor.items_review_queue;
CREATE INDEX items_review_queue ON conveyor.items (workflow, updated_at)
    WHERE status IN ('quarantined', 'pending_review', 'pending_approval');
DROP INDEX IF EXISTS conveyor.items_review_queue_order;
CREATE INDEX items_review_queue_order ON conveyor.items (priority DESC, updated_at)
    WHERE status IN ('quarantined', 'pending_review', 'pending_approval');
DROP INDEX IF EXISTS conveyor.transitions_review_decisions;
CREATE INDEX transitions_review_decisions ON conveyor.transitions (workflow, run_id)
    WHERE from_status IN ('quarantined', 'pending_review', 'pending_approval');

-- "Was this exact input gated before, in another run?": a re-sent extract is named at the gate.
CREATE INDEX batches_input ON conveyor.batches (workflow, step, input_hash);

-- The payments table of 0007 was the invoice example's stand-in ERP, not the library's: the
-- example now creates its own. An empty one goes; one holding payments stays where it is (the
-- example takes it over), so no record of a payment is ever lost by an upgrade.
DO $$
BEGIN
    IF to_regclass('conveyor.payments') IS NOT NULL AND NOT EXISTS (SELECT 1 FROM conveyor.payments) THEN
        DROP TABLE conveyor.payments;
    END IF;
END
$$;
