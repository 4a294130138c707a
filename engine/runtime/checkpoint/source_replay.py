"""The rule that exactly-once checkpoints need sources that can replay their input.

An EXACTLY_ONCE checkpoint restores every operator to one consistent cut; a source that cannot
go back to its position at that cut (``Source.supports_replay`` false: legacy
``SourceFunction`` sources, the async source) would lose or repeat records after a restore,
so a job with such a source and EXACTLY_ONCE checkpoints is refused before it runs. Flink
itself does not refuse (its legacy sources may replay or not); Rill does, because it knows.
"""

from __future__ import annotations

from rill.common.checkpointing_options import CheckpointingMode, CheckpointingOptions

__all__ = ["check_sources_replayable"]


def check_sources_replayable(job_graph, options: CheckpointingOptions) -> None:
    """Refuse EXACTLY_ONCE checkpoints over a source that cannot replay.

    :param job_graph: the job's ``JobGraph`` (its vertices' ``stream_configs``).
    :param options: the job's ``CheckpointingOptions``; nothing is checked when checkpointing
        is off or the mode is AT_LEAST_ONCE.
    :raises ValueError: naming the first source (by name, and uid when set) whose
        ``supports_replay`` is false.
    """
    if not options.enabled or options.mode is not CheckpointingMode.EXACTLY_ONCE:
        return
    for vertex in job_graph.get_vertices():
        for cfg in vertex.stream_configs.values():
            source = cfg.source
            if source is not None and not source.supports_replay:
                uid = f" (uid hash {cfg.user_operator_id})" if cfg.user_operator_id else ""
                raise ValueError(
                    f"Source '{cfg.operator_name}'{uid} ({type(source).__name__}) cannot replay its input "
                    "(supports_replay is False), so EXACTLY_ONCE checkpoints cannot restore it consistently: "
                    "use a replayable source (one whose readers resume from split positions) or "
                    "CheckpointingMode.AT_LEAST_ONCE")
