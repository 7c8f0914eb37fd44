"""The retry and schedule engine: delay levels, retry decisions, the schedule service."""
