"""memory.api's services grouped by what a caller does with them (capture a line, read a bank, keep a
bank, …): one module each, naming what it offers in `__all__` and nothing of memory's insides."""
