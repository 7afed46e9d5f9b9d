"""Recalling: what an agent, a writer or an outside client gets back from a bank.

Retrieval proper — filters (what a search may return and what it returns), scoring (presets,
weights, the score's SQL), sql (the ranking statement, run and loaded), search (recall(): exact
below EXACT_LIMIT candidates, HNSW above), lexical (BM25 and names), enhance (query enhancement),
confidence (a similarity's calibrated worth), indexing (a big bank's own vector indexes) — and what
reads through it: the agent's tools (tools, tool_types) and the sheet by category (sheet_recall).

A memory's similarity is its best match over its content embedding and its canonical-query keys
(MemoryKey); the result says which key matched. Scores and their components are computed in SQL.
"""
