"""The words a model is sent and read back: the prompt's sections, the context window's token counts, what a reply holds beyond its text."""
