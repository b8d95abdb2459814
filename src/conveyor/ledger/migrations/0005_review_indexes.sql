-- Review: indexes for the reads of the review queue, the review sensor and the search box.

-- The review sensor's outcome reads the decisions taken on one run's items: the transitions that
-- left a review status. Partial, so it stays small next to the whole audit trail.
CREATE INDEX IF NOT EXISTS transitions_review_decisions ON conveyor.transitions (workflow, run_id)
    WHERE from_status IN ('quarantined', 'pending_review');

-- "Where is item X" by its business key (PO number, invoice number) across workflows.
CREATE INDEX IF NOT EXISTS items_business_key ON conveyor.items (business_key);

-- The queue is read in priority order, then oldest first.
CREATE INDEX IF NOT EXISTS items_review_queue_order ON conveyor.items (priority DESC, updated_at)
    WHERE status IN ('quarantined', 'pending_review');
