"""The performance model: predicted kernel time of a config on a device."""
