"""Readers of facts: subprocess runner, host, NVML."""
