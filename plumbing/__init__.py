"""The notebook's plumbing as modules: scripts/embed_modules.py --fix embeds them into its folded cells."""
