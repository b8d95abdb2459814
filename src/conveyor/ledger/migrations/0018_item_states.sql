-- The hot path's narrow state row (issue 32): what a move changes leaves the wide item row.
--
-- Every move rewrote the whole item row (payload, AI result: ~600 B) and an entry in each of its
-- indexes. An item is now two rows of one key:
--   item_states  what moves: status, times, reason, attempts (~300 B), with the indexes the
--                reads of the review queue, of runs and of "the newest items" need;
--   item_bodies  what an item is: its payload, hash, AI result, written when it is received and
--                again only by a move that carries new data (the AI step's result, a correction).
-- `conveyor.items` stays the name every read uses: a view of both rows (the ledger's reads of
-- state columns only go to item_states). It also takes INSERT, UPDATE, DELETE and row locks (the
-- triggers below; an inner join, which FOR UPDATE may lock), so a worker still on the previous
-- release keeps receiving, claiming and moving through it while a deployment rolls out; the
-- ledger's own statements write the two tables directly.
--
-- Measured on 100k items beside the code before (bench/ledger.py): four moves 1.2x as fast, WAL
-- per move 1,308 B instead of 1,873 B; a receive writes 1,391 B per item instead of 1,243 B (a
-- second row and key). 12.8 s on 2M items. The dropped columns of item_bodies keep their old
-- bytes in rows written before this migration until the table is rewritten (VACUUM FULL).

CREATE TABLE conveyor.item_states (
    item_id          text        NOT NULL,
    workflow         text        NOT NULL,
    run_id           text        NOT NULL,
    status           text        NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now(),
    stage_times      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    reason           text,
    review_target    text,
    attempts         integer     NOT NULL DEFAULT 0,
    last_error       text,
    priority         integer     NOT NULL DEFAULT 0,
    workflow_version integer
) WITH (fillfactor = 70);  -- room on the page for the next version of a row: no page hop per move

INSERT INTO conveyor.item_states (item_id, workflow, run_id, status, updated_at, stage_times, reason,
                                  review_target, attempts, last_error, priority, workflow_version)
SELECT item_id, workflow, run_id, status, updated_at, stage_times, reason, review_target, attempts,
       last_error, priority, workflow_version
FROM conveyor.items;

ALTER TABLE conveyor.item_states ADD CONSTRAINT item_states_pkey PRIMARY KEY (item_id);

DROP INDEX conveyor.items_workflow_run_status;
DROP INDEX conveyor.items_review_queue;
DROP INDEX conveyor.items_review_queue_order;
DROP INDEX conveyor.items_workflow_newest;

ALTER TABLE conveyor.items RENAME TO item_bodies;
ALTER INDEX conveyor.items_pkey RENAME TO item_bodies_pkey;
ALTER INDEX conveyor.items_business_key RENAME TO item_bodies_business_key;
ALTER TABLE conveyor.item_bodies
    DROP COLUMN workflow,
    DROP COLUMN run_id,
    DROP COLUMN status,
    DROP COLUMN updated_at,
    DROP COLUMN stage_times,
    DROP COLUMN reason,
    DROP COLUMN review_target,
    DROP COLUMN attempts,
    DROP COLUMN last_error,
    DROP COLUMN priority,
    DROP COLUMN workflow_version;

-- The same indexes as before, on the narrow row (the queue's are partial: a move outside the
-- queue's statuses writes no entry in them).
CREATE INDEX item_states_workflow_run_status ON conveyor.item_states (workflow, run_id, status);
CREATE INDEX item_states_review_queue ON conveyor.item_states (workflow, updated_at)
    WHERE status IN ('quarantined', 'pending_review', 'pending_approval');
CREATE INDEX item_states_review_queue_order ON conveyor.item_states (priority DESC, updated_at)
    WHERE status IN ('quarantined', 'pending_review', 'pending_approval');
CREATE INDEX item_states_workflow_newest ON conveyor.item_states (workflow, updated_at DESC, item_id);

-- The item as every read knows it: each state row has its body (both are written by one statement).
CREATE VIEW conveyor.items AS
SELECT s.item_id, s.workflow, b.business_key, s.run_id, s.status, b.payload, b.input_hash, s.attempts,
       s.last_error, b.ai_result, b.confidence, b.created_at, s.updated_at, b.schema_version,
       s.stage_times, s.reason, s.review_target, s.priority, s.workflow_version
FROM conveyor.item_states s
JOIN conveyor.item_bodies b ON b.item_id = s.item_id;

-- Writes through the view (the previous release's statements; tests' fixtures), row by row.
CREATE FUNCTION conveyor.items_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO conveyor.item_bodies (item_id, business_key, payload, input_hash, ai_result, confidence,
                                          created_at, schema_version)
        VALUES (NEW.item_id, NEW.business_key, NEW.payload, NEW.input_hash, NEW.ai_result, NEW.confidence,
                COALESCE(NEW.created_at, now()), COALESCE(NEW.schema_version, 1));
        INSERT INTO conveyor.item_states (item_id, workflow, run_id, status, updated_at, stage_times, reason,
                                          review_target, attempts, last_error, priority, workflow_version)
        VALUES (NEW.item_id, NEW.workflow, NEW.run_id, NEW.status, COALESCE(NEW.updated_at, now()),
                COALESCE(NEW.stage_times, '{}'::jsonb), NEW.reason, NEW.review_target,
                COALESCE(NEW.attempts, 0), NEW.last_error, COALESCE(NEW.priority, 0), NEW.workflow_version);
        RETURN NEW;
    ELSIF TG_OP = 'UPDATE' THEN
        UPDATE conveyor.item_states SET
            item_id = NEW.item_id, workflow = NEW.workflow, run_id = NEW.run_id, status = NEW.status,
            updated_at = NEW.updated_at, stage_times = NEW.stage_times, reason = NEW.reason,
            review_target = NEW.review_target, attempts = NEW.attempts, last_error = NEW.last_error,
            priority = NEW.priority, workflow_version = NEW.workflow_version
        WHERE item_id = OLD.item_id;
        IF (NEW.business_key, NEW.payload, NEW.input_hash, NEW.ai_result, NEW.confidence, NEW.created_at,
            NEW.schema_version, NEW.item_id)
           IS DISTINCT FROM (OLD.business_key, OLD.payload, OLD.input_hash, OLD.ai_result, OLD.confidence,
                             OLD.created_at, OLD.schema_version, OLD.item_id) THEN
            UPDATE conveyor.item_bodies SET
                item_id = NEW.item_id, business_key = NEW.business_key, payload = NEW.payload,
                input_hash = NEW.input_hash, ai_result = NEW.ai_result, confidence = NEW.confidence,
                created_at = NEW.created_at, schema_version = NEW.schema_version
            WHERE item_id = OLD.item_id;
        END IF;
        RETURN NEW;
    ELSE
        DELETE FROM conveyor.item_states WHERE item_id = OLD.item_id;
        DELETE FROM conveyor.item_bodies WHERE item_id = OLD.item_id;
        RETURN OLD;
    END IF;
END
$$;

CREATE TRIGGER items_write INSTEAD OF INSERT OR UPDATE OR DELETE ON conveyor.items
    FOR EACH ROW EXECUTE FUNCTION conveyor.items_write();

ANALYZE conveyor.item_states;
