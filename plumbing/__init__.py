"""The notebook's plumbing as modules: tools/embed_modules.py --fix embeds them into its folded cells."""
