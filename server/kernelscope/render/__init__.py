"""Reports as text and pictures."""
