"""The Parity page's own sections."""
