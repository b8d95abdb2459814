-- "The newest items of a workflow" read an index no move writes (issue 32).
--
-- A move's update of a state row is never a HOT update (it changes the status, which the run and
-- queue indexes hold), so it adds an entry to every index of item_states, whatever columns the
-- index holds. item_states_workflow_newest (workflow, updated_at DESC, item_id) served one read,
-- `conveyor items --workflow W` without a run, and cost every move of every item an entry of
-- ~70 B and its page splits. Measured on 100k items beside the code before (bench/ledger.py):
-- four moves 1.17x as fast (two lanes 1.36x), WAL per move 1,012 B instead of 1,303 B; a receive
-- writes the same (the index's entry moved with it). 4.1 s on 2M items.
--
-- "Newest first" is now the newest received first (ties by item id), read from an index on the
-- item's body, which is written when the item is received and no move adds to. The order is also
-- the one a listing paged by offset needs: an item that moves while someone pages through the
-- listing no longer jumps to its first page, shifting the others. The workflow is the first part
-- of every item id (`<workflow>:<business key>`; a workflow name holds no colon), so the body
-- needs no workflow column of its own.
--
-- The previous release's workers, during a rollout, still order by updated_at: correct, but a
-- sort of the workflow's items instead of an index read.

CREATE INDEX item_bodies_workflow_received
    ON conveyor.item_bodies ((split_part(item_id, ':', 1)), created_at DESC, item_id);

DROP INDEX conveyor.item_states_workflow_newest;

-- The view's item id is the body's (the same value: the view is an inner join on it), so that a
-- filter on the workflow part of the id, and an order by (created_at, item_id), both reach the
-- body's index.
CREATE OR REPLACE VIEW conveyor.items AS
SELECT b.item_id, s.workflow, b.business_key, s.run_id, s.status, b.payload, b.input_hash, s.attempts,
       s.last_error, b.ai_result, b.confidence, b.created_at, s.updated_at, b.schema_version,
       s.stage_times, s.reason, s.review_target, s.priority, s.workflow_version
FROM conveyor.item_states s
JOIN conveyor.item_bodies b ON b.item_id = s.item_id;

ANALYZE conveyor.item_bodies;
