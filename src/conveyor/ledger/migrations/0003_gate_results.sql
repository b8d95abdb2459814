-- What the validation gate found, row by row: why an item was quarantined (every failed
-- expectation with the offending value), and the rows that never became an item of their own
-- (a business key repeated in the same input, a key the ledger already holds with other data).
-- The batch as a whole (accepted or quarantined, input hash, per-expectation counts) stays in
-- conveyor.batches; rows that passed are not repeated here.
CREATE TABLE conveyor.gate_results (
    workflow    text NOT NULL,
    run_id      text NOT NULL,
    step        text NOT NULL,                  -- the gate task
    row_key     text NOT NULL,                  -- 'row 57' of a file, or the item id in ledger mode
    row_number  integer,                        -- 1-based data row of the input
    item_id     text,                           -- the item the row is (or is a repeat of)
    outcome     text NOT NULL,                  -- 'quarantined' | 'duplicate' | 'conflict'
    failures    jsonb NOT NULL DEFAULT '[]'::jsonb,  -- [{expectation, column, value, message}]
    row_data    jsonb,                          -- the row as read, long cells shortened
    suite       text NOT NULL,
    input_hash  text NOT NULL,                  -- the input the finding belongs to
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow, run_id, step, row_key)
);
CREATE INDEX gate_results_item ON conveyor.gate_results (item_id) WHERE item_id IS NOT NULL;
