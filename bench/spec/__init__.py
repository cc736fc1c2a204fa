"""What to run: the task (TaskSpec and presets), the variants table, devices and pinning plans."""
