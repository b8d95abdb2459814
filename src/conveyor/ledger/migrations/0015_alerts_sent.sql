-- Alerts sent to a person, one row per alert key: a task failure is reported by whichever Airflow
-- component sees it first (the task's own process, or the scheduler when the worker was killed), and
-- sometimes by both; the first to insert the key sends, the others see the row and stay quiet.
-- Not item data: no audit row.
CREATE TABLE IF NOT EXISTS conveyor.alerts_sent (
    alert_key  text PRIMARY KEY,
    subject    text NOT NULL,
    sent_by    text,
    sent_at    timestamptz NOT NULL DEFAULT now()
);
