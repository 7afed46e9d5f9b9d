"""A simulation run, laid out by what happens to a turn: pages > control | measuring > aftermath > turn > run > providers > story | prompting (each imports only those below it)."""
