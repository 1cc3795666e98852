"""The notebook's plumbing as modules: scripts/notebook_format.py --fix embeds them into its folded cells."""
