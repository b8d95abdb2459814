"""Human review: the per-item exception queue, the review sensor and trigger, the HTTP API and page.

Nothing is imported here on purpose: DAG files import ``conveyor.review.sensors``, and that must stay
cheap at parse time (no psycopg, no FastAPI).
"""
