"""Sweeps: a grid of configs x seeds (plan), run here or on Ray (run, ray_backend) one trial at a time (trial),
read back from the sweep folder (record), and its trials measured and summarised over seeds (study)."""
