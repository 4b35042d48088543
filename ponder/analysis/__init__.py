"""Measurements of a trained model: one function per question, called by the CLI, reproduce and the explorer."""
