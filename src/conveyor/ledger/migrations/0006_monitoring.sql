-- Monitoring: what workflow_health measured each hour, which alerts are open, and what was sent.

-- Throughput and cycle-time reads filter transitions by workflow, target status and time.
CREATE INDEX IF NOT EXISTS transitions_workflow_to_at ON conveyor.transitions (workflow, to_status, at);

-- One row per workflow per evaluation: the numbers an alert was based on, kept for the record.
CREATE TABLE conveyor.metric_snapshots (
    workflow     text        NOT NULL,
    as_of        timestamptz NOT NULL,          -- end of the measured window
    window_hours double precision NOT NULL,
    metrics      jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workflow, as_of)
);

-- The open or last known state of each alert condition: what makes de-duplication possible.
CREATE TABLE conveyor.alert_state (
    workflow         text        NOT NULL,
    rule             text        NOT NULL,      -- e.g. 'throughput_drop'
    subject          text        NOT NULL DEFAULT '',  -- what inside the workflow ('' = all of it; a stage)
    state            text        NOT NULL,      -- 'firing' | 'resolved'
    severity         text        NOT NULL,
    title            text        NOT NULL,
    detail           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    opened_at        timestamptz NOT NULL,
    last_seen_at     timestamptz NOT NULL,      -- last evaluation that found the condition
    last_notified_at timestamptz,               -- NULL until a notification went out
    resolved_at      timestamptz,
    notifications    integer     NOT NULL DEFAULT 0,
    PRIMARY KEY (workflow, rule, subject),
    CHECK (state IN ('firing', 'resolved'))
);

-- Every notification decided by an evaluation, and whether it went out.
CREATE TABLE conveyor.alert_events (
    id         bigserial   PRIMARY KEY,
    workflow   text        NOT NULL,
    rule       text        NOT NULL,
    subject    text        NOT NULL DEFAULT '',
    kind       text        NOT NULL,            -- 'fired' | 'repeated' | 'resolved'
    severity   text        NOT NULL,
    title      text        NOT NULL,
    alert      jsonb       NOT NULL,            -- the full alert: what moved, by how much, against what, where to look
    as_of      timestamptz NOT NULL,
    state      text        NOT NULL DEFAULT 'pending',  -- 'pending' | 'sent' | 'superseded'
    channels   text[]      NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz,
    CHECK (kind IN ('fired', 'repeated', 'resolved')),
    CHECK (state IN ('pending', 'sent', 'superseded'))
);
CREATE INDEX alert_events_workflow_created ON conveyor.alert_events (workflow, created_at DESC);
CREATE INDEX alert_events_pending ON conveyor.alert_events (workflow, rule, subject) WHERE state = 'pending';
