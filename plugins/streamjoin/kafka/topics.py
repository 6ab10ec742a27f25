"""The topic plan, where the Kafka adapter's callers look for it. The plan is pure and lives in the core
(:mod:`streamjoin.core.topic_plan`); this module only re-exports it."""

from __future__ import annotations

from streamjoin.core.topic_plan import (
    DEAD_LETTER_RETENTION_MS,
    TopicPlan,
    TopicRole,
    TopicSpec,
    plan_topics,
)

__all__ = ["DEAD_LETTER_RETENTION_MS", "TopicPlan", "TopicRole", "TopicSpec", "plan_topics"]
