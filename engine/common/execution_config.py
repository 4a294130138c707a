"""``ExecutionConfig``: per-job execution settings (PyFlink's ``env.get_config()``)."""

from __future__ import annotations

from typing import Dict

from rill.common.configuration import ConfigOptions, Configuration

__all__ = ["ExecutionConfig"]


class ExecutionConfig:
    """A view on the environment's configuration with Flink's setter names.

    :param configuration: the environment's ``Configuration`` (shared, not copied).
    """

    def __init__(self, configuration: Configuration):
        self._config = configuration
        self._job_parameters: Dict[str, str] = {}

    def set_auto_watermark_interval(self, interval: int) -> "ExecutionConfig":
        """How often (ms of processing time) periodic watermark generators emit; 0 disables
        periodic emission (Flink's ``pipeline.auto-watermark-interval``, default 200 ms).

        :raises ValueError: for a negative interval.
        """
        if not isinstance(interval, int) or interval < 0:
            raise ValueError(f"The auto watermark interval must be >= 0 ms, got {interval!r}")
        self._config.set(ConfigOptions.AUTO_WATERMARK_INTERVAL, interval)
        return self

    def get_auto_watermark_interval(self) -> int:
        return self._config.get(ConfigOptions.AUTO_WATERMARK_INTERVAL)

    def set_global_job_parameters(self, params: Dict[str, str]) -> "ExecutionConfig":
        self._job_parameters = {str(k): str(v) for k, v in dict(params).items()}
        return self

    def get_global_job_parameters(self) -> Dict[str, str]:
        return dict(self._job_parameters)

    def get_parallelism(self) -> int:
        return self._config.get(ConfigOptions.PARALLELISM_DEFAULT)
