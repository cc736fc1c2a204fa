"""Did a change slow training down? Comparison and verdicts, A/B duets, calibration."""
