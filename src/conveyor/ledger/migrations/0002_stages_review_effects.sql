-- Stage timestamps, review routing, schema versions, batch records and idempotency keys.
ALTER TABLE conveyor.items
    ADD COLUMN schema_version integer NOT NULL DEFAULT 1,
    ADD COLUMN stage_times    jsonb   NOT NULL DEFAULT '{}'::jsonb,  -- status -> when first entered
    ADD COLUMN reason         text,                                -- why it holds its status
    ADD COLUMN review_target  text,                                -- where an approval resumes
    ADD COLUMN priority       integer NOT NULL DEFAULT 0;

-- Items already in flight get their stage times from the audit trail they already have.
UPDATE conveyor.items i
SET stage_times = s.times
FROM (
    SELECT item_id, jsonb_object_agg(to_status, first_at) AS times
    FROM (SELECT item_id, to_status, min(at) AS first_at FROM conveyor.transitions GROUP BY 1, 2) t
    GROUP BY item_id
) s
WHERE s.item_id = i.item_id;

ALTER TABLE conveyor.transitions ADD COLUMN workflow text;
UPDATE conveyor.transitions t SET workflow = split_part(t.item_id, ':', 1) WHERE workflow IS NULL;
ALTER TABLE conveyor.transitions ALTER COLUMN workflow SET NOT NULL;
-- The audit log is append-only and arrives in time order: a BRIN index serves time-window
-- reads (monitoring) at a fraction of a b-tree's cost on every transition.
CREATE INDEX transitions_at ON conveyor.transitions USING brin (at);

-- The review queue is read often and is small next to the ledger.
CREATE INDEX items_review_queue ON conveyor.items (workflow, updated_at)
    WHERE status IN ('quarantined', 'pending_review');

-- A whole batch (one input of one run) and what the gate made of it.
CREATE TABLE conveyor.batches (
    workflow   text NOT NULL,
    run_id     text NOT NULL,
    step       text NOT NULL,
    status     text NOT NULL,                   -- 'accepted' | 'quarantined' | 'failed'
    source     text,                            -- file path or query
    input_hash text,
    reason     text,
    detail     jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow, run_id, step)
);

-- One key per (item, step): a side effect or a model call claimed once, however often retried.
CREATE TABLE conveyor.effects (
    item_id      text NOT NULL,
    step         text NOT NULL,
    state        text NOT NULL DEFAULT 'claimed',  -- 'claimed' | 'done'
    result       jsonb,
    claimed_by   text NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    completed_at timestamptz,
    PRIMARY KEY (item_id, step)
);
